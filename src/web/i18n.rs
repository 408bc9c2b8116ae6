//! The pages' language: English or Russian. Chosen per request — the saved preference (cookie
//! `pictor_lang`, set by the switcher in the page header, `GET /lang?to=ru`), else the browser's
//! `Accept-Language` (by q-value), else English — and kept for the request in a task-local, so
//! templates and page errors render in it without it being threaded through every function.
//!
//! Texts live in one catalogue, [`MESSAGES`]: `(key, English, Russian)`. Templates call
//! `crate::web::i18n::tr` with the key; Rust code calls [`tr`]. A test reads every template and
//! source file and fails if a key used there is missing, duplicated or untranslated.

use std::future::Future;

use poem::http::HeaderMap;

/// The name of the preference cookie.
pub const LANG_COOKIE: &str = "pictor_lang";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    Ru,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Ru];

    /// The BCP 47 code (`lang` attribute, cookie value).
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Ru => "ru",
        }
    }

    /// The language's own name, for the switcher.
    pub fn name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Ru => "Русский",
        }
    }

    pub fn parse(code: &str) -> Option<Lang> {
        let primary = code.trim().split(['-', '_']).next()?.to_ascii_lowercase();
        match primary.as_str() {
            "en" => Some(Lang::En),
            "ru" => Some(Lang::Ru),
            _ => None,
        }
    }
}

/// What a page being rendered knows about its request.
#[derive(Clone, Debug)]
struct PageCtx {
    lang: Lang,
    /// Path and query of the request (where the switcher comes back to).
    here: String,
}

tokio::task_local! {
    static CTX: PageCtx;
}

/// The language of the request being handled (English outside of one).
pub fn current() -> Lang {
    CTX.try_with(|c| c.lang).unwrap_or(Lang::En)
}

/// Runs `f` (a request's handling) in `lang`, `here` being its path and query.
pub async fn scope<F: Future>(lang: Lang, here: String, f: F) -> F::Output {
    CTX.scope(PageCtx { lang, here }, f).await
}

/// The saved preference, else the best of `Accept-Language`, else English.
pub fn negotiate(headers: &HeaderMap) -> Lang {
    let cookie = headers
        .get_all(poem::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == LANG_COOKIE)
        .and_then(|(_, v)| Lang::parse(v));
    if let Some(lang) = cookie {
        return lang;
    }
    let accept = headers
        .get(poem::http::header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut best: Option<(f32, Lang)> = None;
    for (i, item) in accept.split(',').take(32).enumerate() {
        let mut parts = item.split(';');
        let tag = parts.next().unwrap_or_default();
        let q = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        // Earlier entries win ties (the browser's order).
        let q = q - i as f32 * 1e-4;
        if let Some(lang) = Lang::parse(tag)
            && q > 0.0
            && best.is_none_or(|(b, _)| q > b)
        {
            best = Some((q, lang));
        }
    }
    best.map(|(_, l)| l).unwrap_or(Lang::En)
}

/// The switcher's links: the other languages, each with the address that switches to it and
/// comes back here.
pub fn switches() -> Vec<(&'static str, &'static str, String)> {
    let (lang, here) = CTX
        .try_with(|c| (c.lang, c.here.clone()))
        .unwrap_or((Lang::En, "/".into()));
    Lang::ALL
        .into_iter()
        .filter(|l| *l != lang)
        .map(|l| {
            let href = format!(
                "/lang?to={}&back={}",
                l.code(),
                super::query_escape(&here).replace("%2F", "/")
            );
            (l.code(), l.name(), href)
        })
        .collect()
}

/// The text of `key` in the request's language (the key itself, if it is not in the catalogue:
/// the catalogue test makes that a test failure).
pub fn tr(key: &str) -> &'static str {
    tr_in(current(), key)
}

pub fn tr_in(lang: Lang, key: &str) -> &'static str {
    match MESSAGES.iter().find(|(k, _, _)| *k == key) {
        Some((_, en, ru)) => match lang {
            Lang::En => en,
            Lang::Ru => ru,
        },
        None => {
            tracing::warn!(key, "a text missing from the catalogue");
            "…"
        }
    }
}

/// `(key, English, Russian)`.
pub static MESSAGES: &[(&str, &str, &str)] = &[
    // The frame of every page.
    ("nav.main", "Main", "Основное"),
    ("nav.playground", "Playground", "Мастерская"),
    ("nav.account", "Account", "Кабинет"),
    ("nav.admin", "Admin", "Администрирование"),
    ("nav.docs", "API docs", "Документация API"),
    ("nav.sign_out", "Sign out", "Выйти"),
    ("nav.language", "Language", "Язык"),
    // Error pages.
    ("error.form_expired.title", "Form expired", "Форма устарела"),
    (
        "error.form_expired.message",
        "The page was open too long, or the form came from another site. Reload the page and try again.",
        "Страница была открыта слишком долго или форма пришла с другого сайта. Обновите страницу и попробуйте ещё раз.",
    ),
    ("error.admin_only.title", "Not allowed", "Нет доступа"),
    (
        "error.admin_only.message",
        "This page is for administrators only.",
        "Эта страница только для администраторов.",
    ),
    ("error.server.title", "Server error", "Ошибка сервера"),
    (
        "error.server.message",
        "Something went wrong on our side. Please try again.",
        "У нас что-то пошло не так. Попробуйте ещё раз.",
    ),
    (
        "error.oauth_note",
        "Nothing was sent to the application that asked. You can close this window.",
        "Приложению, которое об этом просило, ничего не отправлено. Это окно можно закрыть.",
    ),
    ("error.back", "Back to Pictor", "Вернуться в Pictor"),
    // Sign in.
    ("login.title", "Sign in", "Вход"),
    ("login.to_continue", "to continue to", "чтобы продолжить в"),
    ("login.email", "E-mail", "Эл. почта"),
    ("login.password", "Password", "Пароль"),
    ("login.submit", "Sign in", "Войти"),
    (
        "login.pow",
        "After several failed attempts, this browser runs a short bot check before you can sign in (a few seconds; needs JavaScript)…",
        "После нескольких неудачных попыток браузер проходит короткую проверку на бота, прежде чем вы сможете войти (несколько секунд; нужен JavaScript)…",
    ),
    ("login.no_account", "No account?", "Нет учётной записи?"),
    ("login.create_one", "Create one", "Создайте её"),
    (
        "login.notice.reset",
        "Your password was changed. Sign in with the new one.",
        "Пароль изменён. Войдите с новым паролем.",
    ),
    (
        "login.notice.deleted",
        "Your account was deleted, with its pictures and keys.",
        "Ваша учётная запись удалена вместе с картинками и ключами.",
    ),
    // Two-factor step.
    ("totp.title", "Two-factor code", "Код двухфакторной защиты"),
    (
        "totp.intro",
        "Enter the 6-digit code from your authenticator app, or one of your recovery codes.",
        "Введите 6-значный код из приложения-аутентификатора или один из резервных кодов.",
    ),
    ("totp.code", "Code", "Код"),
    ("totp.submit", "Continue", "Продолжить"),
    // Register.
    (
        "register.title",
        "Create an account",
        "Создание учётной записи",
    ),
    ("register.name", "Name", "Имя"),
    (
        "register.password_hint",
        "(at least 8 characters)",
        "(не меньше 8 символов)",
    ),
    (
        "register.pow",
        "A short bot check runs in this browser while you type (needs JavaScript)…",
        "Пока вы печатаете, браузер проходит короткую проверку на бота (нужен JavaScript)…",
    ),
    (
        "register.submit",
        "Create account",
        "Создать учётную запись",
    ),
    (
        "register.have_account",
        "Have an account?",
        "Уже есть учётная запись?",
    ),
    // Password reset.
    ("reset.title", "Choose a new password", "Новый пароль"),
    ("reset.for", "For", "Для"),
    (
        "reset.intro",
        "This link works once; after it, you sign in with the new password everywhere.",
        "Ссылка действует один раз; после неё входите везде с новым паролем.",
    ),
    ("reset.new", "New password", "Новый пароль"),
    ("reset.again", "New password again", "Новый пароль ещё раз"),
    ("reset.submit", "Set the password", "Сохранить пароль"),
    (
        "reset.dead.title",
        "This link does not work",
        "Эта ссылка не работает",
    ),
    (
        "reset.dead.message",
        "It was used already, it expired (links last 24 hours), or a newer link replaced it. Ask an administrator for a new one.",
        "Ею уже воспользовались, у неё истёк срок (ссылка действует 24 часа) или её заменила более новая. Попросите у администратора новую.",
    ),
    (
        "reset.mismatch",
        "The two passwords are different.",
        "Пароли не совпадают.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                poem::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn the_preference_wins_then_accept_language_then_english() {
        assert_eq!(negotiate(&headers(&[])), Lang::En);
        assert_eq!(
            negotiate(&headers(&[("accept-language", "ru-RU,ru;q=0.9,en;q=0.8")])),
            Lang::Ru
        );
        assert_eq!(
            negotiate(&headers(&[("accept-language", "de-DE,en;q=0.5,ru;q=0.7")])),
            Lang::Ru
        );
        assert_eq!(
            negotiate(&headers(&[("accept-language", "en, ru")])),
            Lang::En
        );
        assert_eq!(
            negotiate(&headers(&[("accept-language", "ru;q=0")])),
            Lang::En
        );
        assert_eq!(
            negotiate(&headers(&[("accept-language", "fr, de")])),
            Lang::En
        );
        assert_eq!(
            negotiate(&headers(&[
                ("accept-language", "ru"),
                ("cookie", "a=b; pictor_lang=en")
            ])),
            Lang::En
        );
        assert_eq!(
            negotiate(&headers(&[("cookie", "pictor_lang=ru")])),
            Lang::Ru
        );
        assert_eq!(
            negotiate(&headers(&[
                ("cookie", "pictor_lang=xx"),
                ("accept-language", "ru")
            ])),
            Lang::Ru
        );
    }

    /// Every key used by a template or in the source is in the catalogue once, with both texts,
    /// and the Russian is not the English copied.
    #[test]
    fn the_catalogue_is_complete_in_both_languages() {
        let mut seen = std::collections::HashSet::new();
        for (key, en, ru) in MESSAGES {
            assert!(seen.insert(*key), "{key} twice");
            assert!(
                !en.trim().is_empty() && !ru.trim().is_empty(),
                "{key} is empty"
            );
            assert!(en != ru, "{key} is not translated");
            assert!(
                ru.chars().any(|c| ('\u{0400}'..='\u{04FF}').contains(&c)),
                "{key}: {ru}"
            );
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut dirs = vec![root.join("assets/templates"), root.join("src")];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if matches!(p.extension().and_then(|x| x.to_str()), Some("html" | "rs")) {
                    files.push(p);
                }
            }
        }
        let mut used = 0;
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for call in ["i18n::tr(\"", "tr_in(lang, \""] {
                for part in text.split(call).skip(1) {
                    let key = &part[..part.find('"').unwrap()];
                    used += 1;
                    assert!(
                        MESSAGES.iter().any(|(k, _, _)| *k == key),
                        "{}: the key {key:?} is not in the catalogue",
                        f.display()
                    );
                }
            }
        }
        assert!(used > 40, "the templates use the catalogue ({used} uses)");
    }
}
