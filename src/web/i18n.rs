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
    /// The request's URI (the switcher comes back to its path and query).
    here: poem::http::Uri,
}

tokio::task_local! {
    static CTX: PageCtx;
}

/// The language of the request being handled (English outside of one).
pub fn current() -> Lang {
    CTX.try_with(|c| c.lang).unwrap_or(Lang::En)
}

/// Runs `f` (a request's handling) in `lang`, `here` being its path and query.
pub async fn scope<F: Future>(lang: Lang, here: poem::http::Uri, f: F) -> F::Output {
    CTX.scope(PageCtx { lang, here }, f).await
}

/// Runs `f` in `lang` outside of a request (tests, mail written off a request).
pub fn scope_sync<R>(lang: Lang, f: impl FnOnce() -> R) -> R {
    CTX.sync_scope(
        PageCtx {
            lang,
            here: poem::http::Uri::from_static("/"),
        },
        f,
    )
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
        .try_with(|c| {
            let here = c
                .here
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned();
            (c.lang, here)
        })
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

/// A model's name on the pages, in the request's language (the API keeps
/// [`Model::display_name`](crate::render::Model::display_name), in English).
pub fn model_name(model: crate::render::Model) -> &'static str {
    match model {
        crate::render::Model::Fast => tr("model.fast"),
        // A name in both languages, as the plan's.
        crate::render::Model::Artist => "PRO",
        crate::render::Model::Plus => tr("model.plus"),
    }
}

/// [`tr`] with `{}` replaced by `arg`.
pub fn tr1(key: &str, arg: impl std::fmt::Display) -> String {
    tr(key).replacen("{}", &arg.to_string(), 1)
}

/// [`tr`] with its two `{}` replaced by `a` and `b`, in order.
pub fn tr2(key: &str, a: impl std::fmt::Display, b: impl std::fmt::Display) -> String {
    tr(key)
        .replacen("{}", &a.to_string(), 1)
        .replacen("{}", &b.to_string(), 1)
}

/// The plural form of a count: English has one and many, Russian one (1, 21…), few (2–4,
/// 22–24…) and many (0, 5–20, 25…). `playground.js` has the same rule.
pub enum Plural {
    One,
    Few,
    Many,
}

pub fn plural(n: i64) -> Plural {
    match current() {
        Lang::En if n == 1 => Plural::One,
        Lang::En => Plural::Many,
        Lang::Ru => match (n.unsigned_abs() % 10, n.unsigned_abs() % 100) {
            (1, h) if h != 11 => Plural::One,
            (2..=4, h) if !(12..=14).contains(&h) => Plural::Few,
            _ => Plural::Many,
        },
    }
}

/// A count templates pass by value or by reference.
pub trait Count {
    fn count(&self) -> i64;
}

impl Count for i64 {
    fn count(&self) -> i64 {
        *self
    }
}

impl Count for u32 {
    fn count(&self) -> i64 {
        i64::from(*self)
    }
}

impl<T: Count> Count for &T {
    fn count(&self) -> i64 {
        (**self).count()
    }
}

/// "credit" or "credits" (кредит, кредита, кредитов) after `n`.
pub fn credits(n: impl Count) -> &'static str {
    match plural(n.count()) {
        Plural::One => tr("playground.js.credits.one"),
        Plural::Few => tr("playground.js.credits.few"),
        Plural::Many => tr("playground.js.credits.many"),
    }
}

pub fn tr_in(lang: Lang, key: &str) -> &'static str {
    match entries().find(|(k, _, _)| *k == key) {
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

mod admin;
mod pages;

/// The catalogue, in parts so that each area of the site keeps its texts next to each other:
/// the frame, sign-in and account pages here, the operator pages in `i18n/admin.rs`, the
/// playground, consent, sign-out and setup pages in `i18n/pages.rs`.
static CATALOGUE: &[&[(&str, &str, &str)]] = &[MESSAGES, admin::MESSAGES, pages::MESSAGES];

/// Every `(key, English, Russian)` of the catalogue.
pub fn entries() -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)> {
    CATALOGUE.iter().flat_map(|part| part.iter())
}

/// `(key, English, Russian)`: the frame, sign-in, registration, reset and account pages.
static MESSAGES: &[(&str, &str, &str)] = &[
    // The frame of every page.
    ("nav.main", "Main", "Основное"),
    ("nav.playground", "Playground", "Мастерская"),
    // The API documentation page (/api/pictor/docs, Swagger UI around Pictor's bar and note).
    ("docs.image_api", "Image API", "API картинок"),
    (
        "docs.account",
        "Account and API keys",
        "Кабинет и ключи API",
    ),
    (
        "docs.signed_in",
        "You are signed in as {}: “Try it out” runs as you, with no key to paste, and jobs spend your credits. A key given under “Authorize” is used instead.",
        "Вы вошли как {}: «Try it out» выполняется от вашего имени без ключа, задания тратят ваши кредиты. Ключ, указанный в «Authorize», используется вместо этого.",
    ),
    (
        "docs.signed_out",
        "To try the API on this page, <a href=\"/login?return_to=/api/pictor/docs\">sign in</a>: “Try it out” then runs as you. Scripts send an API key from your <a href=\"/account\">account page</a> (here: “Authorize”, the first field, ApiKey).",
        "Чтобы попробовать API на этой странице, <a href=\"/login?return_to=/api/pictor/docs\">войдите</a>: тогда «Try it out» выполняется от вашего имени. Скрипты передают ключ API из <a href=\"/account\">кабинета</a> (здесь: «Authorize», первое поле, ApiKey).",
    ),
    (
        "docs.reference_english",
        "The reference below is in English.",
        "Справочник ниже — на английском языке.",
    ),
    (
        "docs.picture",
        "The picture of the finished job",
        "Картинка готового задания",
    ),
    ("docs.close", "Close", "Закрыть"),
    ("nav.account", "Account", "Кабинет"),
    ("nav.admin", "Admin", "Администрирование"),
    ("nav.docs", "API docs", "Документация API"),
    ("nav.sign_out", "Sign out", "Выйти"),
    ("nav.language", "Language", "Язык"),
    // Error pages.
    ("error.form_expired.title", "Form expired", "Форма устарела"),
    (
        "error.malformed_form.title",
        "Malformed form",
        "Форма не читается",
    ),
    (
        "error.malformed_form.message",
        "The form could not be read: {}.",
        "Не удалось прочитать форму: {}.",
    ),
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
        "error.not_found.title",
        "Page not found",
        "Страница не найдена",
    ),
    (
        "error.not_found.message",
        "There is no page at this address. Check the link, or start from the playground.",
        "По этому адресу ничего нет. Проверьте ссылку или начните с главной страницы.",
    ),
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
    // The account page.
    ("account.title", "Your account", "Ваш кабинет"),
    ("account.api", "Image API", "API картинок"),
    ("account.balance", "Balance", "Баланс"),
    ("account.plan", "Plan", "Тариф"),
    ("account.daily_limit", "Daily limit", "Дневной лимит"),
    ("keys.title", "API keys", "Ключи API"),
    (
        "keys.intro",
        "Send a key as <code>Authorization: Bearer …</code> or <code>X-API-Key: …</code>. Only a fingerprint of each key is kept, so a key is shown once, when it is made.",
        "Передавайте ключ как <code>Authorization: Bearer …</code> или <code>X-API-Key: …</code>. Хранится только отпечаток ключа, поэтому ключ показывается один раз — когда его создают.",
    ),
    (
        "keys.copy_now",
        "Copy it now: it is shown only once.",
        "Скопируйте его сейчас: он показывается только один раз.",
    ),
    ("keys.copy", "Copy", "Копировать"),
    ("keys.name", "Name", "Название"),
    ("keys.action", "Action", "Действие"),
    (
        "keys.replace_confirm",
        "replace it (programs using it stop working)",
        "заменить (старый ключ перестанет работать)",
    ),
    ("keys.replace", "Replace", "Заменить"),
    ("keys.revoke", "Revoke", "Отозвать"),
    ("keys.none", "No keys yet.", "Ключей пока нет."),
    ("keys.issue", "Issue a key", "Выпустить ключ"),
    (
        "keys.new_name",
        "Name of the new key",
        "Название нового ключа",
    ),
    (
        "keys.placeholder",
        "Name, e.g. laptop script",
        "Например, «ноутбук»",
    ),
    ("keys.add", "Add a named key", "Добавить именной ключ"),
    ("hooks.title", "Webhooks", "Вебхуки"),
    (
        "hooks.intro",
        "A job created with a <code>webhook_url</code> is POSTed there when it finishes, signed in the <code>Pictor-Signature</code> header with this secret (see <a href=\"/api/pictor/docs\">the API documentation</a>).",
        "Задание с <code>webhook_url</code> по завершении отправляется туда POST-запросом, подписанным этим секретом в заголовке <code>Pictor-Signature</code> (см. <a href=\"/api/pictor/docs\">документацию API</a>).",
    ),
    (
        "hooks.show",
        "Show the signing secret",
        "Показать секрет подписи",
    ),
    (
        "hooks.overlap",
        "The previous secret also signs deliveries until {} (UTC).",
        "Прежний секрет тоже подписывает отправки до {} (UTC).",
    ),
    (
        "hooks.none",
        "No secret yet: one is made the first time you use a webhook, or now.",
        "Секрета пока нет: он появится при первом использовании вебхука или сейчас.",
    ),
    (
        "hooks.rotate_note",
        "A new secret signs from now on; the current one keeps signing beside it for 24 hours.",
        "Новый секрет подписывает с этого момента; нынешний подписывает рядом с ним ещё 24 часа.",
    ),
    ("hooks.rotate", "Rotate the secret", "Сменить секрет"),
    ("profile.title", "Profile", "Профиль"),
    ("profile.save_name", "Save name", "Сохранить имя"),
    ("profile.picture", "Profile picture", "Фото профиля"),
    ("profile.picture_label", "Picture", "Картинка"),
    ("profile.upload", "Upload picture", "Загрузить"),
    ("profile.remove", "Remove picture", "Удалить фото"),
    ("password.title", "Change password", "Смена пароля"),
    ("password.current", "Current password", "Текущий пароль"),
    (
        "password.note",
        "Changing it signs you out everywhere else.",
        "После смены вы выйдете на всех других устройствах.",
    ),
    ("password.submit", "Change password", "Сменить пароль"),
    (
        "tfa.title",
        "Two-factor authentication",
        "Двухфакторная защита",
    ),
    (
        "tfa.codes",
        "Two-factor authentication is on. Save these recovery codes now: they are shown only once, and each works once if you lose your phone.",
        "Двухфакторная защита включена. Сохраните эти резервные коды сейчас: они показываются только один раз, и каждый сработает один раз, если вы потеряете телефон.",
    ),
    (
        "tfa.scan",
        "Scan this code with an authenticator app (Aegis, Google Authenticator, 1Password…), then enter the 6-digit code it shows.",
        "Отсканируйте этот код приложением-аутентификатором (Aegis, Google Authenticator, 1Password…) и введите 6-значный код, который оно покажет.",
    ),
    (
        "tfa.qr",
        "QR code for your authenticator app",
        "QR-код для приложения-аутентификатора",
    ),
    (
        "tfa.type_key",
        "Or type this key into the app:",
        "Или введите в приложение этот ключ:",
    ),
    ("tfa.code", "Code from the app", "Код из приложения"),
    ("tfa.cancel", "Cancel", "Отмена"),
    ("tfa.turn_on", "Turn on", "Включить"),
    ("tfa.on", "On", "Вкл."),
    (
        "tfa.off_note",
        "To turn it off, confirm with your password or a current code.",
        "Чтобы выключить, подтвердите паролем или текущим кодом.",
    ),
    ("tfa.or_code", "or code", "или код"),
    (
        "tfa.turn_off",
        "Turn off two-factor",
        "Выключить двухфакторную защиту",
    ),
    (
        "tfa.off",
        "Off. With two-factor authentication, signing in also asks for a code from an app on your phone.",
        "Выключена. С двухфакторной защитой при входе нужен ещё код из приложения на телефоне.",
    ),
    (
        "tfa.setup",
        "Set up two-factor",
        "Настроить двухфакторную защиту",
    ),
    (
        "apps.title",
        "Apps you have authorized",
        "Приложения, которым вы дали доступ",
    ),
    (
        "apps.none",
        "None. Apps you sign in to with Pictor appear here.",
        "Нет. Здесь появятся приложения, в которые вы входите через Pictor.",
    ),
    ("apps.since", "since {}", "с {}"),
    ("apps.cap_daily", "Credits a day", "Кредитов в день"),
    ("apps.cap_total", "Credits in all", "Кредитов всего"),
    ("apps.save_limits", "Save limits", "Сохранить лимиты"),
    ("account.sign_out", "Sign out of Pictor", "Выйти из Pictor"),
    (
        "delete.title",
        "Delete your account",
        "Удаление учётной записи",
    ),
    (
        "delete.intro",
        "Your profile, API keys, sign-ins, the apps you allowed, and every picture you made are deleted for good; your remaining credits ({}) are forfeited. This cannot be undone.",
        "Профиль, ключи API, входы, разрешённые приложения и все ваши картинки удаляются насовсем; оставшиеся кредиты ({}) сгорают. Это нельзя отменить.",
    ),
    ("delete.password", "Your password", "Ваш пароль"),
    (
        "delete.confirm",
        "I understand: delete my account and my pictures",
        "Понимаю: удалить мою учётную запись и картинки",
    ),
    (
        "delete.submit",
        "Delete my account",
        "Удалить учётную запись",
    ),
    ("account.standard", "Standard", "Обычный"),
    ("keys.key", "Key", "Ключ"),
    ("keys.made", "Made", "Создан"),
    ("keys.last_used", "Last used", "Использован"),
    ("hooks.create", "Create a secret", "Создать секрет"),
    (
        "profile.picture_hint",
        "(PNG, JPEG or WebP, up to 5 MB; cropped to a square)",
        "(PNG, JPEG или WebP, до 5 МБ; обрезается до квадрата)",
    ),
    (
        "tfa.on_note",
        "Signing in asks for a code from your authenticator app.",
        "При входе нужен код из приложения-аутентификатора.",
    ),
    (
        "tfa.code_left_one",
        "1 recovery code left.",
        "Остался 1 резервный код.",
    ),
    (
        "tfa.codes_left",
        "{} recovery codes left.",
        "Осталось резервных кодов: {}.",
    ),
    (
        "account.pending_approval",
        "Welcome credits: +{} once an administrator approves your account",
        "Приветственные кредиты: +{}, когда администратор подтвердит учётную запись",
    ),
    (
        "account.pending_signin",
        "Welcome credits: +{} the next time you sign in",
        "Приветственные кредиты: +{} при следующем входе",
    ),
    (
        "account.daily_used",
        "Pictures today (UTC): {} of {}",
        "Картинок сегодня (UTC): {} из {}",
    ),
    (
        "keys.new_named",
        "Your new key “{}”.",
        "Ваш новый ключ «{}».",
    ),
    (
        "keys.new_default",
        "Your new default key.",
        "Ваш новый основной ключ.",
    ),
    // The account page's messages.
    (
        "apps.no_access",
        "That app does not have access to your account.",
        "У этого приложения нет доступа к вашей учётной записи.",
    ),
    (
        "delete.unconfirmed",
        "Tick the box to confirm that the account and its pictures go for good.",
        "Отметьте галочку, чтобы подтвердить: учётная запись и картинки удаляются насовсем.",
    ),
    (
        "delete.bad_password",
        "The password is not right.",
        "Пароль неверный.",
    ),
    (
        "keys.unconfirmed",
        "Tick the box to confirm: programs that use your current key will stop working.",
        "Отметьте галочку для подтверждения: программы с нынешним ключом перестанут работать.",
    ),
    ("notice.name", "Your name was saved.", "Имя сохранено."),
    (
        "notice.avatar",
        "Your profile picture was updated.",
        "Фото профиля обновлено.",
    ),
    (
        "notice.avatar_removed",
        "Your profile picture was removed.",
        "Фото профиля удалено.",
    ),
    (
        "notice.password",
        "Your password was changed. Other devices were signed out, and apps you signed in to must ask you to sign in again.",
        "Пароль изменён. На других устройствах выполнен выход, а приложения, в которые вы входили, попросят войти снова.",
    ),
    (
        "notice.totp_off",
        "Two-factor authentication is off.",
        "Двухфакторная защита выключена.",
    ),
    (
        "notice.key_revoked",
        "The key was revoked; programs that use it are refused from now on.",
        "Ключ отозван: программам с ним теперь отказывают.",
    ),
    (
        "notice.app_revoked",
        "The app's access was revoked.",
        "Доступ приложения отозван.",
    ),
    (
        "notice.limits",
        "The app's spending limits were saved.",
        "Лимиты расходов приложения сохранены.",
    ),
    (
        "account.too_many",
        "Too many attempts. Try again in {} s.",
        "Слишком много попыток. Попробуйте снова через {} с.",
    ),
    (
        "password.none",
        "This account has no password to change.",
        "У этой учётной записи нет пароля, который можно сменить.",
    ),
    (
        "password.wrong",
        "The current password is not right.",
        "Текущий пароль неверный.",
    ),
    (
        "password.mismatch",
        "The two new passwords are different.",
        "Новые пароли не совпадают.",
    ),
    (
        "password.length",
        "The password must be between {} and {} characters.",
        "Пароль должен быть длиной от {} до {} символов.",
    ),
    (
        "profile.bad_name",
        "The name must be 1 to 100 characters.",
        "Имя должно быть от 1 до 100 символов.",
    ),
    (
        "profile.choose",
        "Choose a picture to upload.",
        "Выберите картинку для загрузки.",
    ),
    (
        "profile.too_large",
        "The picture is larger than 5 MB. Choose a smaller one.",
        "Картинка больше 5 МБ. Выберите поменьше.",
    ),
    (
        "profile.unreadable",
        "The upload could not be read. Try again.",
        "Не удалось прочитать загрузку. Попробуйте ещё раз.",
    ),
    (
        "profile.unusable",
        "That picture cannot be used: {}.",
        "Эту картинку нельзя использовать: {}.",
    ),
    (
        "tfa.already_on",
        "Two-factor authentication is already on.",
        "Двухфакторная защита уже включена.",
    ),
    (
        "tfa.expired",
        "The set-up expired. Start again and scan the new code.",
        "Настройка устарела. Начните заново и отсканируйте новый код.",
    ),
    (
        "tfa.wrong_code",
        "That code is not right. Enter the code the app shows now.",
        "Код неверный. Введите код, который приложение показывает сейчас.",
    ),
    (
        "tfa.off_needs",
        "Enter your current password or a current code to turn two-factor off.",
        "Чтобы выключить двухфакторную защиту, введите текущий пароль или текущий код.",
    ),
    ("keys.default_label", "Default key", "Основной ключ"),
    ("keys.never", "never", "никогда"),
    ("keys.unknown", "unknown", "неизвестно"),
    ("account.apps.spent", "Spent", "Потрачено"),
    (
        "account.apps.credits_today",
        "credits today",
        "кредитов за сегодня",
    ),
    ("account.apps.of_cap", "of {}", "(лимит {})"),
    ("account.apps.in_all", "in all", "за всё время"),
    // Sign-in, two-factor and registration refusals.
    (
        "login.pow_missing",
        "After several failed sign-ins a bot check runs before the password is checked; this attempt did not carry it, so the password was not checked. When the box below says the check is done (it needs JavaScript), sign in again.",
        "После нескольких неудачных попыток входа перед проверкой пароля выполняется проверка на бота; эта попытка пришла без неё, поэтому пароль не проверялся. Когда ниже появится «проверка пройдена» (нужен JavaScript), войдите ещё раз.",
    ),
    (
        "login.wrong",
        "Wrong e-mail or password.",
        "Неверная эл. почта или пароль.",
    ),
    (
        "login.blocked",
        "This account is blocked.",
        "Эта учётная запись заблокирована.",
    ),
    (
        "totp.wrong",
        "That code is not right. Try the current code.",
        "Код неверный. Введите текущий код.",
    ),
    (
        "register.network_quota",
        "Too many accounts were created from your network in the last hour. Try again in {} minutes, or ask an administrator.",
        "Из вашей сети за последний час создано слишком много учётных записей. Попробуйте через {} мин. или обратитесь к администратору.",
    ),
    (
        "register.pow_missing",
        "The bot check was not completed. Wait for it to finish (it needs JavaScript), then create the account again.",
        "Проверка на бота не завершилась. Дождитесь её окончания (нужен JavaScript) и создайте учётную запись ещё раз.",
    ),
    (
        "register.bad_email",
        "That is not a valid e-mail address.",
        "Это не похоже на адрес эл. почты.",
    ),
    (
        "register.taken",
        "An account with this e-mail already exists. Sign in instead.",
        "Учётная запись с этой почтой уже есть. Войдите в неё.",
    ),
    (
        "register.not_set_up.title",
        "Not set up yet",
        "Ещё не настроено",
    ),
    (
        "register.not_set_up.message",
        "This Pictor has no administrator yet, so accounts cannot be created here. The owner opens the one-time setup link printed when the server first started, or runs `{}` on the server.",
        "У этого Pictor ещё нет администратора, поэтому учётные записи здесь создавать нельзя. Владелец открывает одноразовую ссылку настройки, которую сервер напечатал при первом запуске, или выполняет на сервере `{}`.",
    ),
    (
        "register.closed.title",
        "Registration is closed",
        "Регистрация закрыта",
    ),
    (
        "register.closed.message",
        "New accounts are made by an administrator on this Pictor. Ask yours for an account.",
        "Учётные записи на этом Pictor создаёт администратор. Попросите его создать вам учётную запись.",
    ),
    // "Forgot password?" and its mail (only with `smtp.host` set).
    (
        "login.setup_pending",
        "This Pictor is not set up yet: open the setup link the server printed in its console when it started, to create the administrator account. Nobody can register before that.",
        "Этот Pictor ещё не настроен: откройте ссылку для настройки, которую сервер вывел в консоль при запуске, и создайте учётную запись администратора. До этого никто не может зарегистрироваться.",
    ),
    ("login.forgot", "Forgot password?", "Забыли пароль?"),
    (
        "login.forgot_no_mail",
        "Forgot your password? Ask your administrator for a reset link.",
        "Забыли пароль? Попросите у администратора ссылку для сброса.",
    ),
    ("forgot.title", "Forgot password", "Восстановление пароля"),
    (
        "forgot.intro",
        "Give the e-mail of your account: we send a link there to choose a new password.",
        "Укажите почту своей учётной записи: мы пришлём на неё ссылку для нового пароля.",
    ),
    ("forgot.submit", "Send the link", "Прислать ссылку"),
    ("forgot.back", "Back to sign-in", "Вернуться ко входу"),
    (
        "forgot.sent",
        "If an account uses {}, a link to choose a new password is on its way.",
        "Если {} — почта учётной записи, ссылка для нового пароля уже отправлена.",
    ),
    (
        "forgot.sent_note",
        "The link works once, for 24 hours. Nothing came? Look in the spam folder, or ask an administrator for a reset link.",
        "Ссылка действует один раз в течение 24 часов. Письма нет? Загляните в «Спам» или попросите ссылку у администратора.",
    ),
    (
        "forgot.pow_missing",
        "The bot check was not completed. Wait for it to finish (it needs JavaScript), then send again.",
        "Проверка на бота не завершилась. Дождитесь её окончания (нужен JavaScript) и отправьте ещё раз.",
    ),
    (
        "forgot.no_mail.title",
        "No mail on this Pictor",
        "Этот Pictor не отправляет почту",
    ),
    (
        "forgot.no_mail.message",
        "This Pictor sends no mail. Ask an administrator for a password-reset link.",
        "Этот Pictor не отправляет писем. Попросите у администратора ссылку для смены пароля.",
    ),
    (
        "mail.reset.subject",
        "Choose a new Pictor password",
        "Новый пароль для Pictor",
    ),
    (
        "mail.reset.asked",
        "Someone (we hope you) asked to reset the password of the Pictor account {}.",
        "Кто-то (надеемся, вы) попросил сменить пароль учётной записи Pictor {}.",
    ),
    (
        "mail.reset.link",
        "Choose a new password here; the link works once, for 24 hours:",
        "Выберите новый пароль по ссылке; она действует один раз в течение 24 часов:",
    ),
    (
        "mail.reset.not_you",
        "If it was not you, ignore this mail: your password stays as it is.",
        "Если это были не вы, просто не обращайте внимания на письмо: пароль останется прежним.",
    ),
    // The bot check's status line (`/static/pow.js` reads them from the page).
    ("pow.done", "Bot check done.", "Проверка на бота пройдена."),
    (
        "pow.finishing",
        "Finishing the bot check…",
        "Завершаем проверку на бота…",
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

    /// The visible text a template writes itself: what is left after template code, scripts,
    /// styles and tags are taken away, plus the texts of `placeholder`, `title`, `alt` and
    /// `aria-label` attributes. Every word of it must come from the catalogue.
    fn literal_texts(template: &str) -> Vec<String> {
        let mut text = template.to_owned();
        for (open, close) in [
            ("{#", "#}"),
            // A class name, not text.
            ("{% block main_class %}", "{% endblock %}"),
            ("<script", "</script>"),
            ("<style", "</style>"),
            ("{{", "}}"),
            ("{%", "%}"),
        ] {
            while let Some(start) = text.find(open) {
                let Some(len) = text[start..].find(close) else {
                    break;
                };
                text.replace_range(start..start + len + close.len(), " ");
            }
        }
        let mut found = Vec::new();
        let mut rest = text.as_str();
        let mut visible = String::new();
        while let Some(lt) = rest.find('<') {
            visible.push_str(&rest[..lt]);
            visible.push(' ');
            let end = rest[lt..].find('>').map_or(rest.len(), |e| lt + e + 1);
            let tag = &rest[lt..end];
            for attr in ["placeholder=\"", "title=\"", "alt=\"", "aria-label=\""] {
                if let Some(i) = tag.find(attr) {
                    let value = &tag[i + attr.len()..];
                    found.push(value[..value.find('"').unwrap_or(value.len())].to_owned());
                }
            }
            rest = &rest[end..];
        }
        visible.push_str(rest);
        found.extend(visible.split('\n').map(str::to_owned));
        // Names, not words: the product, protocols and formats read the same in both languages.
        const NAMES: &[&str] = &[
            "Pictor", "PRO", "API", "OAuth", "OpenID", "TOTP", "PNG", "JPEG", "CSV", "JSON", "ID",
            "URL", "amp", "nbsp", "middot", "times", "rarr", "larr", "hellip", "mdash", "ndash",
        ];
        found
            .into_iter()
            .filter(|t| {
                t.split(|c: char| !c.is_alphabetic())
                    .any(|w| w.chars().any(|c| c.is_ascii_alphabetic()) && !NAMES.contains(&w))
            })
            .map(|t| t.trim().to_owned())
            .collect()
    }

    #[test]
    fn no_template_writes_its_own_text() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/templates");
        let mut untranslated = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let texts = literal_texts(&std::fs::read_to_string(&p).unwrap());
            for t in texts {
                untranslated.push(format!("{}: {t}", p.file_name().unwrap().to_string_lossy()));
            }
        }
        assert!(
            untranslated.is_empty(),
            "texts written in templates instead of the catalogue:\n{}",
            untranslated.join("\n")
        );
    }

    /// Every key used by a template or in the source is in the catalogue once, with both texts,
    /// and the Russian is not the English copied.
    #[test]
    fn the_catalogue_is_complete_in_both_languages() {
        let mut seen = std::collections::HashSet::new();
        for (key, en, ru) in entries() {
            assert!(seen.insert(*key), "{key} twice");
            assert!(
                !en.trim().is_empty() && !ru.trim().is_empty(),
                "{key} is empty"
            );
            assert!(en != ru, "{key} is not translated");
            assert_eq!(
                en.matches("{}").count(),
                ru.matches("{}").count(),
                "{key}: placeholders"
            );
            assert!(
                ru.chars().any(|c| ('\u{0400}'..='\u{04FF}').contains(&c)),
                "{key}: {ru}"
            );
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut dirs = vec![
            root.join("assets/templates"),
            root.join("src"),
            root.join("assets/static"),
        ];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if matches!(
                    p.extension().and_then(|x| x.to_str()),
                    Some("html" | "rs" | "js")
                ) {
                    files.push(p);
                }
            }
        }
        let mut used = 0;
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            if f.extension().is_some_and(|x| x == "js") {
                // The playground's script: its own `t("key")` (not a call of a name ending in
                // `t`) shows the catalogue's `playground.js.key`, which the page hands it.
                for (at, _) in text.match_indices("t(\"") {
                    let before = text[..at].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '.')) {
                        continue;
                    }
                    let rest = &text[at + 3..];
                    let key = format!("playground.js.{}", &rest[..rest.find('"').unwrap()]);
                    used += 1;
                    assert!(
                        entries().any(|(k, _, _)| *k == key),
                        "{}: the key {key:?} is not in the catalogue",
                        f.display()
                    );
                }
            }
            for call in [
                "i18n::tr(\"",
                "i18n::tr1(\"",
                "i18n::tr2(\"",
                "tr_in(lang, \"",
            ] {
                for part in text.split(call).skip(1) {
                    let key = &part[..part.find('"').unwrap()];
                    used += 1;
                    assert!(
                        entries().any(|(k, _, _)| *k == key),
                        "{}: the key {key:?} is not in the catalogue",
                        f.display()
                    );
                }
            }
        }
        assert!(used > 40, "the templates use the catalogue ({used} uses)");
    }
}
