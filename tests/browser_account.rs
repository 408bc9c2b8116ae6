//! The account page's API keys and the error pages in a real headless chromium: sign in, make
//! two named keys (each shown once, with a working Copy button), revoke one, issue the default
//! key; a stale form ends on the site's "Form expired" page with its navigation; the language
//! switch turns the page Russian and the choice is kept. Screenshots go to the temp dir
//! (`pictor-account-*.png`; the ones in `packaging/screenshots/` were taken from them).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::webdriver::Driver;
use common::*;
use serde_json::json;

const EMAIL: &str = "keys@example.com";
const PASSWORD: &str = "keys person's long password";

fn shot(name: &str) -> std::path::PathBuf {
    common::webdriver::shot("account", name)
}

async fn sign_in(s: &TestServer, d: &Driver) {
    d.goto(&s.url("/account")).await;
    d.type_into("#email", EMAIL).await;
    d.type_into("#password", PASSWORD).await;
    d.click("form[action=\"/login\"] button[type=submit]").await;
    assert!(
        d.wait_until("return location.pathname === '/account'", 20)
            .await,
        "landed on {}",
        d.current_url().await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_made_copied_and_revoked_and_the_language_switches() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let s = TestServer::start().await;
    s.person(EMAIL, PASSWORD);
    sign_in(&s, &d).await;
    assert_eq!(d.text("#key-list tbody").await, "No keys yet.");

    let mut keys = Vec::new();
    for label in ["laptop script", "CI runner"] {
        d.type_into("#key-label", label).await;
        d.click("form[action=\"/account/keys\"] button[type=submit]")
            .await;
        d.wait_for("#new-api-key").await;
        let key = d.text("#new-api-key").await;
        assert!(key.starts_with("vx_") && key.len() == 67, "{key}");
        assert_eq!(s.me(&key).await["email"], EMAIL);
        keys.push(key);
    }
    // Copy puts the key on the clipboard (or says how to, where the clipboard is refused).
    d.click("button[data-copy=\"new-api-key\"]").await;
    assert!(
        d.wait_until(
            "const t = document.querySelector('button[data-copy]').textContent; return t === 'Copied' || t.startsWith('Select');",
            5
        )
        .await
    );
    d.full_screenshot(&shot("keys")).await;
    let rows = d.text("#key-list tbody").await;
    assert!(
        rows.contains("laptop script")
            && rows.contains("CI runner")
            && rows.contains(&keys[0][63..]),
        "{rows}"
    );

    // Revoke the laptop's key.
    d.click("button[aria-label=\"Revoke laptop script\"]").await;
    d.wait_text("The key was revoked").await;
    assert_eq!(s.get(&keys[0], "/api/pictor/v1/me").await.0, 401);
    assert_eq!(s.me(&keys[1]).await["email"], EMAIL);
    assert!(!d.text("#key-list tbody").await.contains("laptop script"));

    // The default key: issued with one click (replacing it needs a ticked box: tested over
    // HTTP in idp_pages, where the order of requests is exact).
    d.click("form[action=\"/account/key\"] button[type=submit]")
        .await;
    d.wait_for("#new-api-key").await;
    let first = d.text("#new-api-key").await;
    assert_eq!(s.me(&first).await["email"], EMAIL);
    assert!(
        d.execute(
            "return !!document.querySelector('form[action=\"/account/key\"] input[name=confirm][required]');",
            vec![]
        )
        .await
            == true,
        "the replace form asks for its confirmation"
    );

    // A form whose CSRF token went stale ends on the site's error page, with its navigation.
    d.goto(&s.url("/account")).await;
    d.execute(
        "document.querySelector('form[action=\"/account/keys\"] input[name=csrf]').value = 'stale';",
        vec![],
    )
    .await;
    d.type_into("#key-label", "never made").await;
    d.click("form[action=\"/account/keys\"] button[type=submit]")
        .await;
    d.wait_text("Form expired").await;
    let nav = d.text("header nav").await;
    assert!(
        nav.contains("Account") && nav.contains("Playground"),
        "{nav}"
    );
    assert!(!d.source().await.contains("application"));
    d.screenshot(&shot("form-expired")).await;

    // The language switch in the header: the account page in Russian, and it stays so.
    d.goto(&s.url("/account")).await;
    d.click("nav.langs a[lang=ru]").await;
    d.wait_text("Ваш кабинет").await;
    assert_eq!(
        d.execute("return document.documentElement.lang;", vec![])
            .await,
        "ru"
    );
    assert_eq!(d.text("#keys-h").await, "Ключи API");
    assert_eq!(
        d.text("nav[aria-label] a[href='/account']").await,
        "Кабинет"
    );
    d.full_screenshot(&shot("account-ru")).await;
    // On a phone: the header stays short, the key table keeps its headers, the name field has
    // room.
    d.phone_viewport(Some((390, 844))).await;
    d.goto(&s.url("/account")).await;
    let m = d
        .execute(
            "const r = (q) => document.querySelector(q).getBoundingClientRect(); \
             const labels = [...document.querySelectorAll('#key-list tbody tr:first-child .stack-label')]; \
             return {header: r('header.top').height, field: r('#key-label').width, \
               labels: labels.filter((l) => l.getBoundingClientRect().width > 0).map((l) => l.textContent.trim()), \
               overflow: document.documentElement.scrollWidth - window.innerWidth};",
            vec![],
        )
        .await;
    assert!(m["header"].as_f64().unwrap() <= 110.0, "{m}");
    assert!(m["field"].as_f64().unwrap() >= 250.0, "{m}");
    assert_eq!(
        m["labels"],
        json!(["Название:", "Ключ:", "Создан:", "Использован:"]),
        "{m}"
    );
    assert_eq!(m["overflow"], 0, "{m}");
    d.full_screenshot(&shot("account-ru-phone")).await;
    d.phone_viewport(None).await;
    d.goto(&s.url("/playground")).await;
    d.goto(&s.url("/account")).await;
    assert_eq!(d.text("h1").await, "Ваш кабинет", "the choice is kept");
    d.click("nav.langs a[lang=en]").await;
    d.wait_text("Your account").await;
    s.stop().await;
}

/// The operator console in chromium: change a price in the settings form, watch a waiting job
/// in the queue and cancel it, read the audit log and a person's ledger. Screenshots go to the
/// temp dir (`pictor-admin-*.png`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_console_works_in_a_browser() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let gate = Gate::default();
    let s = TestServer::with_renderer(std::sync::Arc::new(gate.clone())).await;
    s.admin(pictor::ops::AdminRequest::UserAdd {
        email: EMAIL.into(),
        name: Some("Olga Operator".into()),
        password_hash: Some(pictor::auth::password::hash(PASSWORD).unwrap()),
        admin: true,
        pro: false,
        credits: 0,
    });
    s.person("painter@example.com", "painter's long password");
    sign_in(&s, &d).await;

    d.goto(&s.url("/admin")).await;
    // Settings are labelled with what they mean (the key as a hint) and carry their unit; an
    // on/off one is a switch, and switching it off saves 0.
    let price = d.text("label[for=\"set-prices.fast\"]").await;
    assert!(
        price.contains("Price of a picture with Standard") && price.contains("prices.fast"),
        "{price}"
    );
    let grid = d.text(".settings-grid").await;
    assert!(
        grid.contains("credits") && grid.contains("bits, 8–28"),
        "{grid}"
    );
    assert_eq!(
        s.admin(pictor::ops::AdminRequest::SettingsList)["registration_open"],
        1
    );
    d.click("#set-registration_open").await;
    d.execute(
        "const i = document.getElementById('set-prices.fast'); i.value = '4';",
        vec![],
    )
    .await;
    d.click("form[action=\"/admin/settings\"] button[type=submit]")
        .await;
    d.wait_text("The settings were saved").await;
    let saved = s.admin(pictor::ops::AdminRequest::SettingsList);
    assert_eq!(
        (
            saved["prices.fast"].as_u64(),
            saved["registration_open"].as_u64()
        ),
        (Some(4), Some(0))
    );
    // And back on (from a fresh page: the notice above must not answer for this save).
    d.goto(&s.url("/admin")).await;
    d.click("#set-registration_open").await;
    d.click("form[action=\"/admin/settings\"] button[type=submit]")
        .await;
    d.wait_text("The settings were saved").await;
    assert_eq!(
        s.admin(pictor::ops::AdminRequest::SettingsList)["registration_open"],
        1
    );
    d.execute(
        "document.getElementById('settings').scrollIntoView();",
        vec![],
    )
    .await;
    d.screenshot(&shot("admin-settings")).await;

    let key = s.admin(pictor::ops::AdminRequest::KeyIssue {
        email: "painter@example.com".into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, job) = s.generate(&key, json!({"prompt": "a red boat"})).await;
    let job_id = job["job_id"].as_str().unwrap().to_string();
    d.goto(&s.url("/admin/queue")).await;
    d.wait_for("#queue").await;
    let rows = d.text("#queue tbody").await;
    assert!(
        rows.contains(&job_id) && rows.contains("painter@example.com"),
        "{rows}"
    );
    d.screenshot(&shot("admin-queue")).await;
    d.click(&format!("button[aria-label=\"Cancel {job_id}\"]"))
        .await;
    d.wait_text("The job was cancelled").await;
    gate.open();

    d.goto(&s.url("/admin/audit")).await;
    let log = d.text("#audit tbody").await;
    assert!(
        log.contains("settings.set")
            && log.contains("prices.fast 1 → 4")
            && log.contains("job.cancel"),
        "{log}"
    );
    d.screenshot(&shot("admin-audit")).await;

    // The same console in Russian, from the header's switcher.
    d.click("nav.langs a[lang=ru]").await;
    d.wait_text("Журнал аудита").await;
    assert_eq!(
        d.execute("return document.documentElement.lang;", vec![])
            .await,
        "ru"
    );
    d.screenshot(&shot("admin-audit-ru")).await;
    d.goto(&s.url("/admin")).await;
    d.execute(
        "document.getElementById('settings').scrollIntoView();",
        vec![],
    )
    .await;
    assert!(d.text("#settings-h").await.starts_with("Настройки"));
    d.screenshot(&shot("admin-settings-ru")).await;
    s.stop().await;
}

/// The API documentation page in chromium: Swagger UI renders under Pictor's own bar (title,
/// icon, a link back), and "Try it out" starts from a real example request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_is_pictors_and_its_example_is_real() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let s = TestServer::start().await;
    d.goto(&s.url("/api/pictor/docs")).await;
    d.wait_for(".swagger-ui .info").await;
    assert_eq!(
        d.execute("return document.title;", vec![]).await,
        "Pictor image API · Pictor"
    );
    assert_eq!(d.text(".pictor-bar .brand").await, "Pictor");
    assert!(
        d.execute(
            "return document.querySelector('link[rel=icon]').getAttribute('href');",
            vec![]
        )
        .await
            == "/static/icon.svg"
    );
    // The generate operation's example body: a real prompt and a small seed.
    d.click("#operations-Images-generate .opblock-summary")
        .await;
    assert!(
        d.wait_until(
            "const e = document.querySelector('#operations-Images-generate .opblock-body'); return !!e && e.textContent.includes('red fox') && e.textContent.includes('42');",
            10
        )
        .await,
        "the example request is shown"
    );
    d.screenshot(&shot("docs-example")).await;
    d.execute("window.scrollTo(0, 0);", vec![]).await;
    d.screenshot(&shot("docs")).await;

    // The Authorize dialog starts with the API key, not the OAuth scopes.
    d.click(".swagger-ui .auth-wrapper .authorize").await;
    d.wait_for(".swagger-ui .dialog-ux .auth-container").await;
    let first = d
        .execute(
            "return document.querySelector('.swagger-ui .dialog-ux .auth-container h4').textContent;",
            vec![],
        )
        .await;
    assert!(first.as_str().unwrap().starts_with("ApiKey"), "{first}");
    d.screenshot(&shot("docs-authorize")).await;
    d.click(".swagger-ui .dialog-ux .close-modal").await;

    // Signed in, "Try it out" runs as the person with no key pasted, and a finished job's
    // picture is shown on the page.
    s.person(EMAIL, PASSWORD);
    sign_in(&s, &d).await;
    d.goto(&s.url("/api/pictor/docs")).await;
    d.wait_for(".swagger-ui .info").await;
    assert!(d.text("#pictor-intro").await.contains(EMAIL));
    d.click("#operations-Account-me .opblock-summary").await;
    d.wait_for("#operations-Account-me .try-out__btn").await;
    d.click("#operations-Account-me .try-out__btn").await;
    d.click("#operations-Account-me .execute").await;
    assert!(
        d.wait_until(
            "const r = document.querySelector('#operations-Account-me .live-responses-table'); return !!r && r.textContent.startsWith('CodeDetails200') && r.textContent.includes('\"balance\": 5');",
            15
        )
        .await,
        "GET /v1/me answered 200 without a key"
    );
    let key = s.admin(pictor::ops::AdminRequest::KeyIssue {
        email: EMAIL.into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, job) = s
        .generate(&key, json!({"prompt": "a red boat on a lake"}))
        .await;
    let job_id = job["job_id"].as_str().unwrap().to_string();
    s.finish(&key, &job_id).await;
    d.click("#operations-Jobs-get_job .opblock-summary").await;
    d.wait_for("#operations-Jobs-get_job .try-out__btn").await;
    d.click("#operations-Jobs-get_job .try-out__btn").await;
    d.type_into(
        "#operations-Jobs-get_job input[placeholder=job_id]",
        &job_id,
    )
    .await;
    d.click("#operations-Jobs-get_job .execute").await;
    assert!(
        d.wait_until(
            "const i = document.getElementById('pictor-picture-img'); return !document.getElementById('pictor-picture').hidden && i.complete && i.naturalWidth > 0;",
            15
        )
        .await,
        "the finished job's picture is shown"
    );
    d.screenshot(&shot("docs-picture")).await;

    // In Russian: the bar and the note; the reference stays English, and says so.
    d.click(".pictor-bar a[lang=ru]").await;
    d.wait_text("API картинок").await;
    assert!(d.text("#pictor-intro").await.contains("Справочник ниже"));
    d.execute("window.scrollTo(0, 0);", vec![]).await;
    d.screenshot(&shot("docs-ru")).await;
    s.stop().await;
}
