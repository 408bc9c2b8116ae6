//! The operator pages in Russian: an administrator who chose Russian (the `pictor_lang` cookie)
//! or whose browser asks for it sees the overview, the settings form and its refusals, the
//! queue, the audit log and a person's page in Russian; the CSV exports stay English, and
//! English pages are unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use pictor::ops::AdminRequest;

async fn signed_in_admin(s: &TestServer) -> Browser {
    let hash = pictor::auth::password::hash("the operator's password").unwrap();
    s.admin(AdminRequest::UserAdd {
        email: "op@example.com".into(),
        name: Some("Operator".into()),
        password_hash: Some(hash),
        admin: true,
        pro: false,
        credits: 0,
    });
    let mut b = Browser::new();
    let r = b
        .sign_in(&s.base, "op@example.com", "the operator's password")
        .await;
    assert_eq!(r.status, 303, "sign-in failed: {}", r.body);
    b
}

async fn submit(
    s: &TestServer,
    b: &mut Browser,
    page: &Page,
    action: &str,
    changes: &[(&str, &str)],
) -> Page {
    b.submit(&s.base, page, action, changes).await
}

fn assert_has(body: &str, needles: &[&str]) {
    for n in needles {
        assert!(body.contains(n), "{n:?} missing from: {body}");
    }
}

fn assert_lacks(body: &str, needles: &[&str]) {
    for n in needles {
        assert!(!body.contains(n), "{n:?} left in English in: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_pages_speak_russian() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(std::sync::Arc::new(gate.clone())).await;
    let mut op = signed_in_admin(&s).await;
    s.oauth_client("sample-app", &["http://127.0.0.1:9/callback"]);
    op.cookies.insert("pictor_lang".into(), "ru".into());

    // The overview: every section, the settings with their descriptions.
    let page = op.get(&s.url("/admin")).await;
    assert_eq!(page.status, 200);
    assert_has(
        &page.body,
        &[
            r#"<html lang="ru">"#,
            "<h1>Администрирование</h1>",
            "Пользователи и приложения",
            "Журнал аудита",
            "Сохраняются вместе",
            "<code>pictor settings set</code>",
            "Цена картинки моделью Стандарт",
            "Сложность проверки на бота",
            "бит, 8–28",
            "кредитов</span>",
            "Сохранить настройки",
            "Создание учётной записи",
            "Начальные кредиты",
            "Регистрация приложения",
            "Разрешённые адреса возврата",
            "Потрачено кредитов: 0 сегодня, 0 всего",
            "Удалить приложение sample-app",
            "Показано пользователей: 1 из 1.",
            "Поиск по эл. почте или имени",
            "Баланс:",
            "<span class=\"badge\">админ</span>",
        ],
    );
    assert_lacks(
        &page.body,
        &[
            "Save settings",
            "Create an account",
            "Register an app",
            "Price of a picture",
            "Standard</",
            "Spent 0 credits",
            "user shown",
            "Users &#38; apps",
        ],
    );

    // The settings' refusals.
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/settings",
        &[("prices.fast", "abc")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_has(
        &r.body,
        &["Значение prices.fast должно быть целым числом, а не «abc»."],
    );
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/settings",
        &[("prices.fast", "3"), ("prices.edit", "0")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_has(
        &r.body,
        &["Ничего не изменено: значение prices.edit должно быть от 1 до 1000000 кредитов."],
    );
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/settings",
        &[("challenge_bits", "40")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_has(
        &r.body,
        &["Ничего не изменено: значение challenge_bits должно быть от 8 до 28."],
    );
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/settings",
        &[("limits.daily", "9")],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.body);
    let done = op.follow(&s.base, r).await;
    assert_has(&done.body, &["Настройки сохранены."]);

    // A form's refusal on the overview.
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/users",
        &[("email", "new@example.com"), ("credits", "lots")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_has(&r.body, &["Кредиты — целое число от 0 до 1000000."]);

    // An account made here without a password: its reset link right away, then its page.
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/users",
        &[("email", "new@example.com"), ("credits", "12")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_has(
        &r.body,
        &[
            "Учётная запись создана. Пароля у неё пока нет",
            "Ссылка для сброса пароля пользователя",
            "id=\"reset-link\"",
            "/reset?token=",
        ],
    );
    let new = s.store().user_by_email("new@example.com").unwrap().unwrap();
    let person = op
        .get(&s.url(&format!("/admin/users/{}?done=created", new.user_id())))
        .await;
    assert_has(
        &person.body,
        &[
            "Учётная запись создана.",
            "Начислено · списано · возвращено",
            "История баланса",
            "Сначала новые",
            "Скачать всё в CSV",
            "Когда (UTC)",
            "Баланс после",
            "начисление",
            "Изменения администраторов",
        ],
    );
    assert_lacks(&person.body, &["Ledger", "Balance after", ">grant<"]);
    let new = s.store().user_by_email("new@example.com").unwrap().unwrap();
    let csv = op
        .get(&s.url(&format!("/admin/users/{}/ledger.csv", new.user_id())))
        .await;
    assert!(
        csv.body
            .starts_with("seq,at_utc,reason,delta,balance_after,job_id,app\r\n")
            && csv.body.contains(",grant,12,12,"),
        "the CSV stays machine-readable: {}",
        csv.body
    );

    // Granting a wrong amount.
    let overview = op.get(&s.url("/admin")).await;
    let r = submit(
        &s,
        &mut op,
        &overview,
        &format!("/admin/users/{}/credits", new.user_id()),
        &[("amount", "many")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_has(
        &r.body,
        &["Количество кредитов для new@example.com должно быть целым числом"],
    );

    // The queue, with a job held by the gate; cancelled from here.
    let key = s.admin(AdminRequest::KeyIssue {
        email: "new@example.com".into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, job) = s
        .generate(&key, serde_json::json!({"prompt": "a boat"}))
        .await;
    let job_id = job["job_id"].as_str().unwrap().to_string();
    let queue = op.get(&s.url("/admin/queue")).await;
    assert_has(
        &queue.body,
        &[
            &job_id,
            "Очередь · Администрирование",
            "Заданий в очереди и в работе: 1",
            "слотов отрисовки: 1",
            "страница обновляется каждые 5 секунд",
            "<th scope=\"col\">Задание</th>",
            "создание",
            "Отменить",
        ],
    );
    assert!(
        queue.body.contains("в очереди") || queue.body.contains("в работе"),
        "{}",
        queue.body
    );
    assert_lacks(
        &queue.body,
        &["queued or running", "render slot", ">generate<"],
    );
    let r = submit(&s, &mut op, &queue, "/admin/queue/cancel", &[]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let done = op.follow(&s.base, r).await;
    assert_has(&done.body, &["Задание отменено, его кредиты возвращены."]);
    gate.open();
    let mut empty = String::new();
    for _ in 0..50 {
        empty = op.get(&s.url("/admin/queue")).await.body;
        if empty.contains("Очередь пуста.") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_has(&empty, &["Очередь пуста."]);

    // A job that is not there.
    let mut fields = form_fields(&queue.body, "/admin/queue/cancel");
    set_field(&mut fields, "job", "nope");
    let r = op.post(&s.url("/admin/queue/cancel"), &fields).await;
    assert_eq!(r.status, 404);
    assert_has(&r.body, &["Нет такого задания", "Задания с таким ID нет."]);

    // The audit log: Russian around the recorded events; its CSV stays English.
    let audit = op.get(&s.url("/admin/audit")).await;
    assert_has(
        &audit.body,
        &[
            "Журнал аудита · Администрирование",
            "Что меняли администраторы, сначала новое",
            "командная строка администратора",
            "О ком",
            "Подробности",
            "settings.set",
            "limits.daily 25 → 9",
            "job.cancel",
        ],
    );
    assert_lacks(
        &audit.body,
        &["What administrators changed", "Download all"],
    );
    let csv = op.get(&s.url("/admin/audit.csv")).await;
    assert!(
        csv.body
            .starts_with("seq,at_utc,actor,action,user,detail\r\n"),
        "{}",
        csv.body
    );

    // A person who is not there.
    let r = op.get(&s.url("/admin/users/usr_0000000000000000")).await;
    assert_eq!(r.status, 404);
    assert_has(&r.body, &["Нет такого пользователя"]);

    // The browser's language works too, and English stays English.
    op.cookies.remove("pictor_lang");
    let r = op
        .http
        .get(s.url("/admin/audit"))
        .header("cookie", op.cookie_header())
        .header("accept-language", "ru-RU,ru;q=0.9")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_has(&r, &["<h2 id=\"audit-h\">Журнал аудита</h2>"]);
    let en = op.get(&s.url("/admin")).await;
    assert_has(
        &en.body,
        &[
            r#"<html lang="en">"#,
            "<h1>Admin</h1>",
            "Users &#38; apps",
            "Save settings",
            "Price of a picture with Premium",
            "bits, 8–28",
            "Spent 0 credits today, 0 in all",
            "2 of 2 users shown.",
        ],
    );
    let r = submit(
        &s,
        &mut op,
        &en,
        "/admin/settings",
        &[("prices.fast", "abc")],
    )
    .await;
    assert_has(
        &r.body,
        &["prices.fast must be a whole number, not &#34;abc&#34;."],
    );
    s.stop().await;
}
