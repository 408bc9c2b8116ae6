//! The playground, consent, sign-out and setup pages in Russian, for a browser that asks for it
//! (`Accept-Language: ru`): their texts, the plural forms of the counts, the playground's texts
//! for its script (JSON in the page), and the same pages still in English for everyone else. In
//! a real headless chromium (skipped without one), the playground's script speaks Russian too,
//! and so does the sign-in SDK's button on a Russian page.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::webdriver::Driver;
use common::*;
use pictor::ops::AdminRequest;
use serde_json::{Value, json};

const EMAIL: &str = "masha@example.com";
const PASSWORD: &str = "a long enough password";
const REDIRECT: &str = "https://shop.example/auth/callback";

/// A browser whose every request says `Accept-Language: ru`.
fn russian_browser() -> Browser {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT_LANGUAGE,
        "ru-RU,ru;q=0.9,en;q=0.5".parse().unwrap(),
    );
    Browser {
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            .build()
            .unwrap(),
        cookies: Default::default(),
    }
}

/// Signs `b` in through /login, from the playground, and opens the playground.
async fn sign_in_to_the_playground(s: &TestServer, b: &mut Browser) -> Page {
    let page = b.get(&s.url("/playground")).await;
    let page = b.follow(&s.base, page).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", EMAIL);
    set_field(&mut fields, "password", PASSWORD);
    let r = b.post(&s.url("/login"), &fields).await;
    assert_eq!(r.location.as_deref(), Some("/playground"), "{}", r.body);
    let page = b.get(&s.url("/playground")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    page
}

/// The playground's texts for its script: the JSON object in `data-texts`.
fn script_texts(html: &str) -> serde_json::Map<String, Value> {
    let key = "data-texts=\"";
    let start = html.find(key).expect("data-texts on the page") + key.len();
    let end = html[start..].find('"').unwrap() + start;
    let raw = &html[start..end];
    assert!(!raw.contains('<') && !raw.contains('>'), "escaped: {raw}");
    match serde_json::from_str::<Value>(&html_unescape(raw)) {
        Ok(Value::Object(texts)) => texts,
        other => panic!("not a JSON object: {other:?}"),
    }
}

fn contains_all(body: &str, texts: &[&str]) {
    for t in texts {
        assert!(body.contains(t), "{t:?} missing from:\n{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_page_in_russian() {
    let s = TestServer::start().await;
    let link = s.handle.as_ref().unwrap().setup_url.clone().unwrap();
    let path = link.strip_prefix(&s.base).unwrap().to_string();

    let page = Browser::new().get(&s.url(&path)).await;
    assert_eq!(page.status, 200);
    contains_all(
        &page.body,
        &[
            "<html lang=\"en\">",
            "<title>Set up Pictor · Pictor</title>",
            "<h1>Welcome to Pictor</h1>",
            "Create administrator",
            "You can also do it on the server: <code>pictor user add --email E --admin --password-stdin</code> for a new account, or <code>pictor user update --email E --admin true</code> to make an existing account the administrator.",
        ],
    );

    let mut b = russian_browser();
    let page = b.get(&s.url(&path)).await;
    assert_eq!(page.status, 200);
    contains_all(
        &page.body,
        &[
            "<html lang=\"ru\">",
            "<title>Настройка Pictor · Pictor</title>",
            "<h1>Добро пожаловать в Pictor</h1>",
            "Создайте учётную запись администратора.",
            "<label for=\"password\">Пароль <span class=\"muted\">(не меньше 8 символов)</span>",
            "Создать администратора",
            "<code>pictor user add --email E --admin --password-stdin</code> — для новой учётной записи",
            "<code>pictor user update --email E --admin true</code> — чтобы сделать администратором",
        ],
    );
    assert!(!page.body.contains("Welcome"), "{}", page.body);

    // A dead link says so in Russian, with the commands as they are.
    let dead = b.get(&s.url("/setup?token=not-the-token")).await;
    assert_eq!(dead.status, 404);
    contains_all(
        &dead.body,
        &[
            "Ссылка для настройки недействительна",
            "Это не текущая ссылка для настройки",
            "<code>pictor user update --email E --admin true</code> — существующая учётная запись",
        ],
    );

    // The Russian form works as the English one.
    let mut f = form_fields(&page.body, "/setup");
    set_field(&mut f, "name", "Маша");
    set_field(&mut f, "email", "owner@example.com");
    set_field(&mut f, "password", "the owner's password");
    let r = b.post(&s.url("/setup"), &f).await;
    assert_eq!(
        (r.status, r.location.as_deref()),
        (303, Some("/account")),
        "{}",
        r.body
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_in_russian() {
    let s = TestServer::start().await;
    s.finish_setup();
    s.person(EMAIL, PASSWORD);
    s.admin(AdminRequest::CreditsGrant {
        email: EMAIL.into(),
        amount: 17,
    });

    let mut b = russian_browser();
    let page = sign_in_to_the_playground(&s, &mut b).await;
    let html = &page.body;
    contains_all(
        html,
        &[
            "<html lang=\"ru\">",
            "<title>Мастерская · Pictor</title>",
            "<h1>Мастерская</h1>",
            // 22 credits: «22 кредита»; the models' prices: 1 кредит, 5 кредитов.
            "id=\"pg-balance\">22</strong> <span id=\"pg-balance-unit\">кредита</span>",
            ">Стандарт · встроенный художник · 1 кредит</option>",
            "кредитов</option>",
            "<dt>Сегодня <span class=\"muted\">(UTC)</span></dt>",
            "<span id=\"pg-daily-unit\">картинок</span>",
            "Обычный <span class=\"muted\">(с водяным знаком)</span>",
            "Мастерской нужен JavaScript",
            "<h2 id=\"gen-h\">Создать картинку</h2>",
            "placeholder=\"маяк на скале на закате, три парусника, акварель\"",
            "<kbd>Ctrl</kbd>+<kbd>Enter</kbd> — создать.",
            "<option value=\"1:1\">1:1 квадрат</option>",
            "<option value=\"auto\">Авто (по запросу)</option>",
            "placeholder=\"случайное\"",
            ">Создать</button>",
            "Здесь появится ваша картинка.",
            "aria-label=\"Готовность картинки\"",
            "<h2 id=\"edit-h\">Изменить фото</h2>",
            "(PNG, JPEG или WebP, до 20 МБ)",
            "добавь внизу текст «Привет»",
            "размер фото сохраняется",
            ">Изменить фото</button>",
            "<h2 id=\"gallery-h\">Ваши картинки</h2>",
            "Загружаем ваши картинки…",
            "Показать более ранние",
        ],
    );
    for english in [
        "Generate a picture",
        "Your pictures",
        ">credits<",
        ">Prompt<",
    ] {
        assert!(!html.contains(english), "{english:?} left in:\n{html}");
    }
    // Still no inline script: the texts for the script are data.
    assert_eq!(html.matches("<script").count(), 1);

    // The script's texts: every `playground.js.*` entry, in Russian.
    let texts = script_texts(html);
    let expected: Vec<_> = pictor::web::i18n::entries()
        .filter_map(|(k, _, ru)| Some((k.strip_prefix("playground.js.")?, *ru)))
        .collect();
    assert!(expected.len() > 50, "{}", expected.len());
    assert_eq!(texts.len(), expected.len());
    for (key, ru) in expected {
        assert_eq!(texts[key], json!(ru), "{key}");
    }
    assert_eq!(texts["status.done.text"], "Ваша картинка готова.");
    assert_eq!(texts["credits.few"], "кредита");

    // The same page in English for a browser that does not ask for Russian.
    let mut en = Browser::new();
    en.cookies = b.cookies.clone();
    let page = en.get(&s.url("/playground")).await;
    contains_all(
        &page.body,
        &[
            "<title>Playground · Pictor</title>",
            "id=\"pg-balance\">22</strong> <span id=\"pg-balance-unit\">credits</span>",
            ">Standard · built-in painter · 1 credit</option>",
            "<dt>Today <span class=\"muted\">(UTC)</span></dt>",
            "Costs <strong id=\"gen-price\">1</strong> <span id=\"gen-price-unit\">credit</span>",
            "add text \"Hello\" at the bottom",
            "keeps the photo's size",
        ],
    );
    let texts = script_texts(&page.body);
    assert_eq!(texts["status.done.text"], "Your picture is ready.");
    assert_eq!(texts["credits.one"], "credit");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consent_and_sign_out_in_russian() {
    let s = TestServer::start().await;
    s.finish_setup();
    s.person(EMAIL, PASSWORD);
    let (app, _secret) = s.oauth_client("shop", &[REDIRECT]);
    let authorize = authorize_url(
        &s.base,
        &[
            ("response_type", "code"),
            ("client_id", app.as_str()),
            ("redirect_uri", REDIRECT),
            ("state", "st-1"),
            ("scope", "openid profile email images:read images:generate"),
        ],
    );

    let mut b = russian_browser();
    let page = b.get(&authorize).await;
    let page = b.follow(&s.base, page).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", EMAIL);
    set_field(&mut fields, "password", PASSWORD);
    let r = b.post(&s.url("/login"), &fields).await;
    let consent = b.follow(&s.base, r).await;
    assert_eq!(consent.status, 200, "{}", consent.body);
    contains_all(
        &consent.body,
        &[
            "<html lang=\"ru\">",
            "<title>Разрешить вход в shop? · Pictor</title>",
            "Разрешить вход в <strong>shop</strong> через Pictor?</h1>",
            &format!("Вы вошли как {EMAIL}."),
            "Не вы?",
            "<p>shop сможет:</p>",
            "<li>Знать, кто вы (постоянный идентификатор пользователя)</li>",
            "<li>Видеть ваше имя и фото профиля</li>",
            "<li>Видеть ваш адрес эл. почты</li>",
            "<li>Видеть ваш баланс кредитов и картинки, которые оно для вас сделало</li>",
            "<li>Создавать для вас картинки за ваши кредиты</li>",
            "Пароль приложение не увидит.",
            "<legend>Сколько ваших кредитов может тратить shop?</legend>",
            "Кредитов в день <span class=\"muted\">(пусто — без дневного лимита)</span>",
            "Кредитов всего <span class=\"muted\">(пусто — без общего лимита)</span>",
            "Картинка сверх лимита не создаётся",
            "value=\"deny\">Отказать</button>",
            "class=\"primary\" autofocus>Разрешить</button>",
        ],
    );
    for english in ["Allow", "Deny", "will be able to", "Signed in as"] {
        assert!(
            !consent.body.contains(english),
            "{english:?} left in:\n{}",
            consent.body
        );
    }
    // Allowing works as before: back to the app with a code.
    let mut fields = form_fields(&consent.body, "/oauth/authorize");
    set_field(&mut fields, "decision", "allow");
    let r = b.post(&s.url("/oauth/authorize"), &fields).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let back = r.location.unwrap();
    assert!(back.starts_with(REDIRECT), "{back}");
    assert_eq!(query_of(&back)["state"], "st-1");

    // Sign-out asked by the app without a hint: Pictor asks first, in Russian.
    let logout = format!("{}/oauth/logout?client_id={app}", s.base);
    let ask = b.get(&logout).await;
    assert_eq!(ask.status, 200, "{}", ask.body);
    contains_all(
        &ask.body,
        &[
            "<title>Выйти? · Pictor</title>",
            "<h1>Выйти из Pictor?</h1>",
            "<strong>shop</strong> просит завершить ваш сеанс в Pictor.",
            &format!("Вы вошли как {EMAIL}. Выход здесь завершает сеанс Pictor в этом браузере;"),
            ">Не выходить</a>",
            "autofocus>Выйти</button>",
        ],
    );
    // A refused request says why in Russian.
    let refused = b
        .get(&format!("{}/oauth/logout?client_id=nobody", s.base))
        .await;
    assert_eq!(refused.status, 400);
    contains_all(
        &refused.body,
        &[
            "Этот запрос на выход не выполнить",
            "Приложение с таким именем не зарегистрировано.",
        ],
    );
    // The English page is as it was.
    let mut en = Browser::new();
    en.cookies = b.cookies.clone();
    let page = en.get(&logout).await;
    contains_all(
        &page.body,
        &[
            "<h1>Sign out of Pictor?</h1>",
            "<strong>shop</strong> asks to end your Pictor session.",
            "Stay signed in",
        ],
    );

    let mut fields = form_fields(&ask.body, "/oauth/logout");
    set_field(&mut fields, "confirm", "yes");
    let done = b.post(&s.url("/oauth/logout"), &fields).await;
    assert_eq!(done.status, 200, "{}", done.body);
    contains_all(
        &done.body,
        &[
            "<title>Выход выполнен · Pictor</title>",
            "<h1>Вы вышли</h1>",
            "Сеанс Pictor в этом браузере завершён.",
            ">Войти снова</a>",
        ],
    );
    assert_eq!(b.get(&s.url("/account")).await.status, 303, "signed out");
    s.stop().await;
}

/// The playground's script in Russian in chromium: the texts it writes (prices, the empty
/// gallery, the job's progress and result) come from the page in the page's language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_script_speaks_russian_in_a_browser() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let s = TestServer::start().await;
    s.finish_setup();
    s.person(EMAIL, PASSWORD);
    // The language chosen in the header before signing in is kept.
    d.goto(&s.url("/login")).await;
    d.click("nav.langs a[lang=ru]").await;
    d.wait_text("Эл. почта").await;
    d.type_into("#email", EMAIL).await;
    d.type_into("#password", PASSWORD).await;
    d.click("form[action=\"/login\"] button[type=submit]").await;
    assert!(
        d.wait_until("return location.pathname !== '/login'", 20)
            .await,
        "{}",
        d.current_url().await
    );
    d.goto(&s.url("/playground")).await;
    d.wait_for("#gen-prompt").await;
    assert!(
        d.wait_until(
            "return document.getElementById('gallery-status').textContent.startsWith('Картинок пока нет')",
            20
        )
        .await,
        "the empty gallery: {}",
        d.text("#gallery-status").await
    );
    assert_eq!(d.text("#pg-balance-unit").await, "кредитов");
    assert_eq!(d.text("#gen-price-unit").await, "кредит");
    assert_eq!(d.text("#gen-submit").await, "Создать");
    assert!(
        d.text("#gen-size").await.ends_with(" пикс."),
        "{}",
        d.text("#gen-size").await
    );
    d.execute(
        "const m = document.getElementById('gen-model'); m.value = '0.2plus'; m.dispatchEvent(new Event('change'));",
        vec![],
    )
    .await;
    let warn = d.text("#gen-warn").await;
    assert!(
        warn.starts_with("Не хватает кредитов: это стоит 10 кредитов, а у вас 5."),
        "{warn}"
    );
    d.execute(
        "const m = document.getElementById('gen-model'); m.value = 'fast'; m.dispatchEvent(new Event('change'));",
        vec![],
    )
    .await;
    d.type_into("#gen-prompt", "маяк на скале на закате").await;
    d.click("#gen-submit").await;
    assert!(
        d.wait_until(
            "return document.getElementById('job').dataset.state === 'done'",
            60
        )
        .await,
        "{}",
        d.text("#job").await
    );
    assert_eq!(d.text("#job-badge").await, "Готово");
    assert_eq!(d.text("#job-status").await, "Ваша картинка готова.");
    let took = d.text("#job-elapsed").await;
    assert!(
        took.starts_with("заняло ") && took.ends_with(" с"),
        "{took}"
    );
    let facts = d.text("#job-facts").await;
    assert!(facts.contains("Запрос") && facts.contains("Сид"), "{facts}");
    assert_eq!(d.text("#job-actions a").await, "Скачать");
    assert!(
        d.wait_until(
            "return document.getElementById('pg-balance').textContent === '4'",
            20
        )
        .await,
        "the balance is refreshed"
    );
    assert_eq!(d.text("#pg-balance-unit").await, "кредита");
    let widths = d
        .execute(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth];",
            vec![],
        )
        .await;
    assert!(
        widths[0].as_u64() <= widths[1].as_u64(),
        "the Russian page fits its window (scroll, client): {widths}"
    );
    d.full_screenshot(&std::env::temp_dir().join("pictor-playground-ru.png"))
        .await;

    // The sign-in SDK's button on a page in Russian: the option, then the page's language, then
    // the browser's.
    d.execute(
        "const e = document.createElement('script'); e.src = '/static/sdk/pictor-login.js'; document.head.append(e);",
        vec![],
    )
    .await;
    assert!(
        d.wait_until("return typeof window.PictorLogin === 'function'", 20)
            .await
    );
    let labels = d
        .execute(
            "const o = { issuer: location.origin, appName: 'shop', redirectUri: 'https://shop.example/cb' };
             const make = (extra) => new PictorLogin(Object.assign({}, o, extra));
             const html = document.documentElement;
             const out = [make({}).render(document.body).textContent, make({ lang: 'en' }).label,
                          make({ label: 'Go' }).label];
             html.lang = 'en-GB';
             out.push(make({}).label, make({ lang: 'ru-RU' }).label);
             html.lang = 'de';
             out.push(make({}).label);
             html.removeAttribute('lang');
             out.push(make({}).label, navigator.language);
             return out;",
            vec![],
        )
        .await;
    let labels: Vec<String> = serde_json::from_value(labels).unwrap();
    let browsers = if labels[7].to_lowercase().starts_with("ru") {
        "Войти через Pictor"
    } else {
        "Sign in with Pictor"
    };
    assert_eq!(
        labels[..7],
        [
            "Войти через Pictor",
            "Sign in with Pictor",
            "Go",
            "Sign in with Pictor",
            "Войти через Pictor",
            "Sign in with Pictor",
            browsers,
        ],
        "{labels:?}"
    );
    s.stop().await;
}
