//! The web playground in a real headless chromium: sign in through /login, land on the
//! playground, type a prompt, watch the job go queued/running → done and the picture load, see
//! the balance drop by the price, then "Edit this" from the gallery. Screenshots (desktop and
//! phone, light and dark) go to the temp dir.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::webdriver::Driver;
use common::*;
use pictor::ops::AdminRequest;
use serde_json::{Value, json};

const EMAIL: &str = "painter@example.com";
const PASSWORD: &str = "painter's long password";

/// Signs in through the real /login page, starting from the playground.
async fn sign_in(s: &TestServer, d: &Driver) {
    d.goto(&s.url("/playground")).await;
    let url = d.current_url().await;
    assert!(
        url.starts_with(&s.url("/login")) && url.contains("return_to=%2Fplayground")
            || url.contains("return_to=/playground"),
        "signed out, /playground sends to sign-in: {url}"
    );
    d.type_into("#email", EMAIL).await;
    d.type_into("#password", PASSWORD).await;
    d.click("form[action=\"/login\"] button[type=submit]").await;
    assert!(
        d.wait_until("return location.pathname === '/playground'", 20)
            .await,
        "landed on {}: {}",
        d.current_url().await,
        d.source().await
    );
    d.wait_for("#gen-prompt").await;
}

fn shot(name: &str) -> std::path::PathBuf {
    common::webdriver::shot("playground", name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_generate_and_see_the_picture() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    s.person(EMAIL, PASSWORD);
    sign_in(&s, &d).await;

    assert_eq!(d.text("#pg-balance").await, "5");
    // The default model's current price is on the page before anything is sent.
    assert_eq!(d.text("#gen-price").await, "1");
    d.execute(
        "const m = document.getElementById('gen-model'); m.value = 'artist'; m.dispatchEvent(new Event('change'));",
        vec![],
    )
    .await;
    assert_eq!(
        d.text("#gen-price").await,
        "5",
        "the price follows the model"
    );
    d.execute(
        "const m = document.getElementById('gen-model'); m.value = '0.2plus'; m.dispatchEvent(new Event('change'));",
        vec![],
    )
    .await;
    assert!(
        d.text("#gen-warn").await.contains("Not enough credits"),
        "10 credits with a balance of 5"
    );
    assert_eq!(
        d.execute(
            "return document.getElementById('gen-submit').disabled",
            vec![]
        )
        .await,
        json!(true)
    );
    d.execute(
        "const m = document.getElementById('gen-model'); m.value = 'fast'; m.dispatchEvent(new Event('change'));",
        vec![],
    )
    .await;

    d.type_into("#gen-prompt", "a lighthouse on a cliff at sunset")
        .await;
    d.type_into("#gen-seed", "42").await;
    d.click("#gen-submit").await;

    // The render is held at the gate: the card shows the job in progress with the time ticking.
    assert!(
        d.wait_until(
            "return document.getElementById('job').dataset.state === 'running'",
            20
        )
        .await,
        "job card never showed running: {}",
        d.text("#job").await
    );
    assert_eq!(d.text("#job-badge").await, "Rendering");
    assert!(
        d.wait_until(
            "return /^[1-9]\\d* s$/.test(document.getElementById('job-elapsed').textContent)",
            10
        )
        .await,
        "elapsed seconds tick: {:?}",
        d.text("#job-elapsed").await
    );
    assert_eq!(
        d.execute(
            "return document.getElementById('job-status').getAttribute('aria-live')",
            vec![]
        )
        .await,
        json!("polite")
    );
    gate.open();

    assert!(
        d.wait_until(
            "const i = document.getElementById('job-img'); return !!i && !document.getElementById('job-figure').hidden && i.complete && i.naturalWidth > 0",
            30
        )
        .await,
        "the picture never loaded: {}",
        d.text("#job").await
    );
    let size = d
        .execute(
            "const i = document.getElementById('job-img'); return [i.naturalWidth, i.naturalHeight]",
            vec![],
        )
        .await;
    assert_eq!(size, json!([1024, 1024]));
    assert_eq!(d.text("#job-badge").await, "Done");
    let facts = d.text("#job-facts").await;
    assert!(
        facts.contains("a lighthouse on a cliff at sunset"),
        "{facts}"
    );
    assert!(facts.contains("Enhanced prompt"), "{facts}");
    assert!(facts.contains("42"), "seed shown: {facts}");
    // The balance is refreshed: 5 - the price of `fast` (1).
    assert!(
        d.wait_until(
            "return document.getElementById('pg-balance').textContent === '4'",
            10
        )
        .await,
        "balance shows {}",
        d.text("#pg-balance").await
    );
    assert_eq!(d.text("#pg-daily-used").await, "1");
    d.screenshot(&shot("done")).await;

    // The gallery has it, with a working "Reuse prompt".
    d.wait_for("#gallery .pg-item img").await;
    d.execute("document.getElementById('gen-prompt').value = ''; document.getElementById('gen-seed').value = '';", vec![]).await;
    d.click("#gallery [data-act=reuse]").await;
    assert_eq!(
        d.execute(
            "return [document.getElementById('gen-prompt').value, document.getElementById('gen-seed').value, document.activeElement.id]",
            vec![]
        )
        .await,
        json!(["a lighthouse on a cliff at sunset", "42", "gen-prompt"])
    );

    // "Edit this": the gallery picture becomes the edit's source, no upload needed.
    d.click("#gallery [data-act=edit]").await;
    assert_eq!(
        d.execute(
            "return [document.getElementById('edit-source').hidden, document.activeElement.id]",
            vec![]
        )
        .await,
        json!([false, "edit-prompt"])
    );
    d.type_into(
        "#edit-prompt",
        "crop it to 16:9 and make it black and white",
    )
    .await;
    d.click("#edit-submit").await;
    assert!(
        d.wait_until(
            "const i = document.getElementById('job-img'); return document.getElementById('job').dataset.state === 'done' && i.complete && i.naturalWidth === 1024 && i.naturalHeight === 576",
            30
        )
        .await,
        "the edit never finished: {}",
        d.text("#job").await
    );
    assert!(
        d.wait_until(
            "return document.getElementById('pg-balance').textContent === '2' && document.querySelectorAll('#gallery .pg-item').length === 2",
            10
        )
        .await,
        "balance {} after the edit (price 2)",
        d.text("#pg-balance").await
    );

    // An uploaded photo, through the file input and FormData.
    let upload = std::env::temp_dir().join(format!(
        "pictor-playground-upload-{}.png",
        std::process::id()
    ));
    // A file that is not a picture: refused, in words a person understands, nothing charged.
    std::fs::write(&upload, b"this is not a picture").unwrap();
    d.click("#edit-source-clear").await;
    d.type_into("#edit-file", &upload.display().to_string())
        .await;
    d.type_into("#edit-prompt", "add a red border").await;
    d.click("#edit-submit").await;
    assert!(
        d.wait_until(
            "const e = document.getElementById('edit-error'); return !e.hidden && e.textContent.includes('not a picture Pictor can edit')",
            10
        )
        .await,
        "the refusal: {}",
        d.text("#edit-error").await
    );
    std::fs::write(&upload, png_bytes(64, 48)).unwrap();
    d.execute("document.getElementById('edit-file').value = ''", vec![])
        .await;
    d.type_into("#edit-file", &upload.display().to_string())
        .await;
    d.execute("document.getElementById('edit-prompt').value = ''", vec![])
        .await;
    d.type_into(
        "#edit-prompt",
        "add a red border, then add a dog next to the girl",
    )
    .await;
    d.click("#edit-submit").await;
    assert!(
        d.wait_until(
            "const i = document.getElementById('job-img'); return document.getElementById('job').dataset.state === 'done' && i.complete && i.naturalWidth === 64 && i.naturalHeight === 48",
            30
        )
        .await,
        "the upload edit never finished: {}",
        d.text("#job").await
    );
    // What the painter did and what it could not do, as a note under the picture.
    let note = d.text("#job-scene").await;
    assert!(
        note.contains("did: border, added dog") && note.contains("could not do: next to girl"),
        "{note}"
    );
    let _ = std::fs::remove_file(&upload);
    // 0 credits left: both forms say why they cannot be sent.
    assert!(
        d.wait_until(
            "return document.getElementById('pg-balance').textContent === '0' && document.getElementById('gen-submit').disabled && document.getElementById('edit-submit').disabled",
            10
        )
        .await,
        "balance {}",
        d.text("#pg-balance").await
    );
    assert!(d.text("#gen-warn").await.starts_with("Not enough credits"));
    assert!(d.text("#edit-warn").await.starts_with("Not enough credits"));

    // Light and dark, desktop and phone, for people to look at.
    for scheme in ["light", "dark"] {
        d.color_scheme(scheme).await;
        d.phone_viewport(None).await;
        d.set_window_size(1280, 1000).await;
        d.execute("window.scrollTo(0, 0)", vec![]).await;
        d.full_screenshot(&shot(&format!("desktop-{scheme}"))).await;
        d.phone_viewport(Some((390, 844))).await;
        d.execute("window.scrollTo(0, 0)", vec![]).await;
        d.full_screenshot(&shot(&format!("phone-{scheme}"))).await;
    }
    d.phone_viewport(None).await;
    eprintln!(
        "screenshots: {}",
        shot("{done,desktop-light,desktop-dark,phone-light,phone-dark}").display()
    );

    // The books balance: 5 - 1 (generate) - 2 (edit) - 2 (edit).
    let user = s.admin(AdminRequest::UserShow {
        email: EMAIL.into(),
    });
    assert_eq!(user["balance"], json!(0), "{user}");
    s.assert_books_balanced();
    drop(d);
    s.stop().await;
}

/// A failed render shows its error and that the credits came back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_says_so_and_returns_the_credits() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let gate = Gate {
        fail: true,
        ..Gate::default()
    };
    gate.open();
    let s = TestServer::with_renderer(Arc::new(gate)).await;
    s.person(EMAIL, PASSWORD);
    sign_in(&s, &d).await;
    d.type_into("#gen-prompt", "a castle at night").await;
    d.click("#gen-submit").await;
    assert!(
        d.wait_until(
            "return document.getElementById('job').dataset.state === 'failed'",
            30
        )
        .await,
        "{}",
        d.text("#job").await
    );
    let card = d.text("#job").await;
    assert!(card.contains("fails on purpose"), "{card}");
    assert!(card.contains("Returned"), "{card}");
    assert_eq!(d.text("#pg-balance").await, "5");
    let v: Value = d
        .execute(
            "return document.getElementById('gen-submit').disabled",
            vec![],
        )
        .await;
    assert_eq!(v, json!(false), "ready for another try");
    d.screenshot(&shot("failed")).await;
    drop(d);
    s.stop().await;
}

/// Registration in a real browser: the page's own script solves the proof-of-work bot check at
/// the default difficulty, then the account exists and is signed in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_in_a_real_browser_solves_the_bot_check() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let s = TestServer::start().await;
    s.finish_setup();
    let bits = s.store().settings().unwrap().challenge_bits;
    let loaded = std::time::Instant::now();
    d.goto(&s.url("/register?return_to=/account")).await;
    assert!(
        d.wait_until(
            "return document.querySelector('.pow-status').textContent === 'Bot check done.'",
            60
        )
        .await
    );
    let solved = loaded.elapsed();
    d.type_into("#name", "Nadia").await;
    d.type_into("#email", "nadia@example.com").await;
    d.type_into("#password", "nadia's long password").await;
    let started = std::time::Instant::now();
    d.click("form[action=\"/register\"] button[type=submit]")
        .await;
    assert!(
        d.wait_until("return location.pathname === '/account'", 60)
            .await,
        "still on {}: {}",
        d.current_url().await,
        d.source().await
    );
    println!(
        "headless chromium: bot check at {bits} bits solved {:.2} s after the page was asked for; account made {:.2} s after the click",
        solved.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let user = s
        .store()
        .user_by_email("nadia@example.com")
        .unwrap()
        .unwrap();
    assert_eq!(user.pending_credits, 20);
    drop(d);
    s.stop().await;
}

/// Waiting in line, the progress bar, and Cancel: another user's render holds the only render
/// slot, so the page's job says it is next in line; once it renders, the bar fills; Cancel stops
/// it and the credits come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_place_progress_bar_and_cancel() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let stepper = Stepper::new(600, std::time::Duration::from_millis(50));
    let s = TestServer::start_with(Options {
        renderer: Arc::new(stepper.clone()),
        render_workers: 1,
        ..Options::default()
    })
    .await;
    s.person(EMAIL, PASSWORD);
    let (_, other) = s.user("other@example.com", 10, false);
    sign_in(&s, &d).await;

    let (_, blocker) = s.generate(&other, json!({"prompt": "a long render"})).await;
    let blocker = blocker["job_id"].as_str().unwrap().to_string();
    d.type_into("#gen-prompt", "a lighthouse in a storm").await;
    d.click("#gen-submit").await;
    assert!(
        d.wait_until(
            "return document.getElementById('job-status').textContent.includes('you are next')",
            30
        )
        .await,
        "{}",
        d.text("#job").await
    );
    let cancel_shown: Value = d
        .execute(
            "return !document.getElementById('job-cancel').hidden",
            vec![],
        )
        .await;
    assert_eq!(cancel_shown, json!(true));
    d.screenshot(&shot("queued")).await;

    // The other render is cancelled: ours starts, and the bar shows its steps.
    let r = s
        .client
        .post(s.url(&format!("/api/pictor/v1/jobs/{blocker}/cancel")))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        d.wait_until(
            "const p = document.getElementById('job-progress'); \
             return p.hasAttribute('data-known') && Number(p.getAttribute('aria-valuenow')) >= 2",
            60
        )
        .await,
        "{}",
        d.text("#job").await
    );
    d.screenshot(&shot("progress")).await;

    d.click("#job-cancel").await;
    assert!(
        d.wait_until(
            "return document.getElementById('job').dataset.state === 'failed'",
            30
        )
        .await,
        "{}",
        d.text("#job").await
    );
    assert_eq!(d.text("#job-badge").await, "Cancelled");
    let card = d.text("#job").await;
    assert!(card.contains("Returned"), "{card}");
    let person = s
        .store()
        .users()
        .unwrap()
        .into_iter()
        .find(|u| u.email == EMAIL)
        .unwrap();
    assert!(
        d.wait_until(
            &format!(
                "return document.getElementById('pg-balance').textContent.trim() === '{}'",
                person.balance
            ),
            10
        )
        .await
    );
    d.screenshot(&shot("cancelled")).await;
    // Both renders stopped early.
    for _ in 0..100 {
        if stepper.ran.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let ran = stepper.ran.lock().unwrap().clone();
    assert!(ran.len() == 2 && ran.iter().all(|n| *n < 600), "{ran:?}");
    s.assert_books_balanced();
    drop(d);
    s.stop().await;
}

/// The Russian playground with a real picture by the built-in painter and an edit that says what
/// it could not do, for people to look at (`packaging/screenshots/playground-ru.png` when
/// `PICTOR_WRITE_SCREENSHOTS=1`, else the temp dir): the model names, "Сид", the note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_russian_playground_as_people_see_it() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let s = TestServer::start().await;
    s.person(EMAIL, PASSWORD);
    s.admin(AdminRequest::CreditsGrant {
        email: EMAIL.into(),
        amount: 20,
    });
    sign_in(&s, &d).await;
    d.click("nav.langs a[lang=ru]").await;
    d.wait_text("Мастерская").await;
    assert!(d.text("#gen-model").await.contains("Стандарт"));
    d.execute("document.getElementById('gen-prompt').value = ''", vec![])
        .await;
    d.type_into("#gen-prompt", "маяк на скале на закате").await;
    d.click("#gen-submit").await;
    assert!(
        d.wait_until(
            "const i = document.getElementById('job-img'); return document.getElementById('job').dataset.state === 'done' && i.complete && i.naturalWidth > 0",
            60
        )
        .await,
        "{}",
        d.text("#job").await
    );
    d.click("#gallery [data-act=edit]").await;
    d.type_into(
        "#edit-prompt",
        "сделай небо грозовым и добавь собаку рядом с маяком",
    )
    .await;
    d.click("#edit-submit").await;
    assert!(
        d.wait_until(
            "return document.getElementById('job').dataset.state === 'done' && !document.getElementById('job-scene').hidden",
            60
        )
        .await,
        "{}",
        d.text("#job").await
    );
    let note = d.text("#job-scene").await;
    assert!(
        note.contains("сделал: небо перекрашено") && note.contains("Не смог: рядом с маяком"),
        "{note}"
    );
    d.set_window_size(1200, 1000).await;
    d.execute("window.scrollTo(0, 0)", vec![]).await;
    let path = if std::env::var_os("PICTOR_WRITE_SCREENSHOTS").is_some() {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("packaging/screenshots/playground-ru.png")
    } else {
        shot("ru")
    };
    d.full_screenshot(&path).await;
    eprintln!("screenshot: {}", path.display());
    s.stop().await;
}
