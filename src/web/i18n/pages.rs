//! Catalogue part: see [`super::CATALOGUE`]. The playground (its page, and under `playground.js.`
//! the texts its script shows, which the page hands to the script), the consent page, the
//! sign-out pages and the first-start setup page.

/// `(key, English, Russian)`.
pub static MESSAGES: &[(&str, &str, &str)] = &[
    // The playground page.
    ("playground.title", "Playground", "Мастерская"),
    ("playground.balance", "Balance", "Баланс"),
    ("playground.today", "Today", "Сегодня"),
    ("playground.of", "of", "из"),
    ("playground.plan", "Plan", "Тариф"),
    ("playground.standard", "Standard", "Обычный"),
    // The three models' names (the API's `name` stays English).
    ("model.fast", "Standard", "Стандарт"),
    ("model.plus", "Premium", "Премиум"),
    (
        "playground.watermarked",
        "(watermarked)",
        "(с водяным знаком)",
    ),
    (
        "playground.noscript",
        "The playground needs JavaScript. Without it, use the <a href=\"/api/pictor/docs\">image API</a> with a key from your <a href=\"/account\">account</a>.",
        "Мастерской нужен JavaScript. Без него пользуйтесь <a href=\"/api/pictor/docs\">API картинок</a> с ключом из <a href=\"/account\">кабинета</a>.",
    ),
    (
        "playground.generate.title",
        "Generate a picture",
        "Создать картинку",
    ),
    ("playground.prompt", "Prompt", "Запрос"),
    (
        "playground.prompt.placeholder",
        "a lighthouse on a cliff at sunset, three sailboats, watercolor",
        "маяк на скале на закате, три парусника, акварель",
    ),
    (
        "playground.prompt.help",
        "What to draw, in English or Russian.",
        "Что нарисовать, по-русски или по-английски.",
    ),
    (
        "playground.prompt.keys",
        "<kbd>Ctrl</kbd>+<kbd>Enter</kbd> generates.",
        "<kbd>Ctrl</kbd>+<kbd>Enter</kbd> — создать.",
    ),
    ("playground.model", "Model", "Модель"),
    (
        "playground.engine.painter",
        "built-in painter",
        "встроенный художник",
    ),
    (
        "playground.engine.help",
        "What draws each tier is set by the administrator. The built-in painter draws simple scenes from shapes; a diffusion model draws real pictures.",
        "Что рисует каждый уровень, выбирает администратор. Встроенный художник рисует простые сцены из фигур, модель диффузии — настоящие картинки.",
    ),
    (
        "playground.firstrun.title",
        "Install a model for real pictures",
        "Установите модель для настоящих картинок",
    ),
    (
        "playground.firstrun.text",
        "Every tier is drawn by the built-in painter now: simple scenes made of shapes. A diffusion model draws real pictures on this machine; {} is the one recommended here.",
        "Сейчас все уровни рисует встроенный художник: простые сцены из фигур. Модель диффузии рисует настоящие картинки на этой машине; здесь рекомендуется {}.",
    ),
    (
        "playground.firstrun.action",
        "Choose a model",
        "Выбрать модель",
    ),
    ("playground.ratio", "Ratio", "Пропорции"),
    ("playground.ratio.square", "1:1 square", "1:1 квадрат"),
    ("playground.ratio.wide", "16:9 wide", "16:9 широкий"),
    (
        "playground.ratio.tall",
        "9:16 tall (phone)",
        "9:16 высокий (телефон)",
    ),
    (
        "playground.ratio.landscape_3_2",
        "3:2 landscape",
        "3:2 альбомный",
    ),
    (
        "playground.ratio.portrait_2_3",
        "2:3 portrait",
        "2:3 портретный",
    ),
    (
        "playground.ratio.landscape_4_3",
        "4:3 landscape",
        "4:3 альбомный",
    ),
    (
        "playground.ratio.portrait_3_4",
        "3:4 portrait",
        "3:4 портретный",
    ),
    (
        "playground.ratio.auto",
        "Auto (from the prompt)",
        "Авто (по запросу)",
    ),
    ("playground.seed", "Seed", "Сид"),
    ("playground.optional", "(optional)", "(необязательно)"),
    ("playground.seed.placeholder", "random", "случайное"),
    (
        "playground.seed.help",
        "0 to 4294967295; the same prompt, model, ratio and seed give the same picture",
        "от 0 до 4294967295; одинаковые запрос, модель, пропорции и сид дают одну и ту же картинку",
    ),
    (
        "playground.enhance",
        "Enhance the prompt",
        "Улучшить запрос",
    ),
    (
        "playground.enhance.hint",
        "(adds detail and light)",
        "(добавит деталей и света)",
    ),
    ("playground.costs", "Costs", "Стоит"),
    ("playground.generate", "Generate", "Создать"),
    ("playground.result", "Result", "Результат"),
    (
        "playground.result.empty",
        "Your picture will appear here.",
        "Здесь появится ваша картинка.",
    ),
    ("playground.cancel", "Cancel", "Отменить"),
    (
        "playground.progress",
        "Progress of the picture",
        "Готовность картинки",
    ),
    ("playground.edit.title", "Edit a photo", "Изменить фото"),
    (
        "playground.edit.from_gallery",
        "Editing a picture from your gallery.",
        "Правка картинки из вашей галереи.",
    ),
    (
        "playground.edit.other_photo",
        "Use another photo",
        "Взять другое фото",
    ),
    ("playground.edit.photo", "Photo", "Фото"),
    (
        "playground.edit.photo_hint",
        "(PNG, JPEG or WebP, up to 20 MB)",
        "(PNG, JPEG или WebP, до 20 МБ)",
    ),
    ("playground.edit.instruction", "Instruction", "Указание"),
    (
        "playground.edit.placeholder",
        "make it black and white and add a vignette",
        "сделай чёрно-белым и добавь виньетку",
    ),
    (
        "playground.edit.help",
        "For example: crop it to a square, warmer, rotate 90 degrees, add text \"Hello\" at the bottom, as a watercolor.",
        "Например: обрежь до квадрата, теплее, поверни на 90 градусов, добавь внизу текст «Привет», как акварель.",
    ),
    (
        "playground.edit.keeps_size",
        "keeps the photo's size",
        "размер фото сохраняется",
    ),
    ("playground.edit.submit", "Edit photo", "Изменить фото"),
    ("playground.gallery", "Your pictures", "Ваши картинки"),
    (
        "playground.gallery.loading",
        "Loading your pictures…",
        "Загружаем ваши картинки…",
    ),
    (
        "playground.gallery.more",
        "Show older pictures",
        "Показать более ранние",
    ),
    // The playground's script (`assets/static/playground.js` asks for them without the
    // `playground.js.` prefix). Plural forms: English uses `one` and `many`, Russian all three.
    ("playground.js.credits.one", "credit", "кредит"),
    ("playground.js.credits.few", "credits", "кредита"),
    ("playground.js.credits.many", "credits", "кредитов"),
    // "… of N pictures": the Russian is the genitive after «из».
    ("playground.js.pictures_of.one", "picture", "картинки"),
    ("playground.js.pictures_of.few", "pictures", "картинок"),
    ("playground.js.pictures_of.many", "pictures", "картинок"),
    (
        "playground.js.network",
        "Pictor could not be reached. Check the connection and try again.",
        "Не удалось связаться с Pictor. Проверьте подключение и попробуйте ещё раз.",
    ),
    (
        "playground.js.unexpected",
        "Unexpected answer from the server (HTTP {}).",
        "Неожиданный ответ сервера (HTTP {}).",
    ),
    (
        "playground.js.error",
        "Something went wrong.",
        "Что-то пошло не так.",
    ),
    (
        "playground.js.error.unauthorized",
        "You are signed out. Reload the page to sign in again.",
        "Вы вышли из Pictor. Обновите страницу, чтобы войти снова.",
    ),
    (
        "playground.js.error.csrf",
        "This page has expired. Reload it and try again.",
        "Страница устарела. Обновите её и попробуйте ещё раз.",
    ),
    (
        "playground.js.error.invalid_image",
        "This file is not a picture Pictor can edit: send a PNG, JPEG or WebP photo (at most 20 MiB and 50 megapixels).",
        "Этот файл не подходит для правки: пришлите фотографию PNG, JPEG или WebP (не больше 20 МиБ и 50 мегапикселей).",
    ),
    (
        "playground.js.error.too_large",
        "The photo is over 20 MiB. Send a smaller one.",
        "Фотография больше 20 МиБ. Пришлите файл поменьше.",
    ),
    (
        "playground.js.error.busy",
        "You already have a picture in progress. Wait for it to finish.",
        "Одна ваша картинка уже рисуется. Дождитесь, пока она будет готова.",
    ),
    ("playground.js.size", "{}×{} px", "{}×{} пикс."),
    (
        "playground.js.size.auto",
        "size from the prompt",
        "размер по запросу",
    ),
    (
        "playground.js.warn.credits",
        "Not enough credits: this costs {}, you have {}.",
        "Не хватает кредитов: это стоит {}, а у вас {}.",
    ),
    (
        "playground.js.warn.daily",
        "Daily limit reached: {} of {} pictures today. It resets at 00:00 UTC.",
        "Дневной лимит исчерпан: картинок за сегодня — {} из {}. Он обнулится в 00:00 UTC.",
    ),
    (
        "playground.js.warn.edit_credits",
        "Not enough credits: an edit costs {}, you have {}.",
        "Не хватает кредитов: правка стоит {}, а у вас {}.",
    ),
    ("playground.js.working", "Working…", "Работаем…"),
    ("playground.js.status.queued", "Queued", "В очереди"),
    (
        "playground.js.status.queued.text",
        "Starting…",
        "Запускаем…",
    ),
    ("playground.js.status.running", "Rendering", "Рисуется"),
    (
        "playground.js.status.running.text",
        "Drawing your picture…",
        "Рисуем вашу картинку…",
    ),
    ("playground.js.status.done", "Done", "Готово"),
    (
        "playground.js.status.done.text",
        "Your picture is ready.",
        "Ваша картинка готова.",
    ),
    ("playground.js.status.failed", "Failed", "Ошибка"),
    (
        "playground.js.status.failed.text",
        "The job failed.",
        "Задание не выполнено.",
    ),
    ("playground.js.seconds", "{} s", "{} с"),
    (
        "playground.js.queue.next",
        "Waiting for a free renderer: you are next",
        "Ждём свободного художника: вы следующий",
    ),
    // The English gets the place as "2nd", "3rd"…; other languages the bare number.
    (
        "playground.js.queue.place",
        "Waiting for a free renderer: {} in line",
        "Ждём свободного художника: вы {}-й в очереди",
    ),
    (
        "playground.js.queue.starts",
        " (starts in {})",
        " (начнём {})",
    ),
    (
        "playground.js.eta.under_second",
        "under a second",
        "меньше чем через секунду",
    ),
    (
        "playground.js.eta.seconds",
        "about {} s",
        "примерно через {} с",
    ),
    (
        "playground.js.eta.minutes",
        "about {} min",
        "примерно через {} мин",
    ),
    ("playground.js.fact.instruction", "Instruction", "Указание"),
    ("playground.js.fact.prompt", "Prompt", "Запрос"),
    (
        "playground.js.fact.enhanced",
        "Enhanced prompt",
        "Улучшенный запрос",
    ),
    ("playground.js.fact.model", "Model", "Модель"),
    (
        "playground.js.fact.model_ratio",
        "{} · ratio {}",
        "{} · пропорции {}",
    ),
    ("playground.js.fact.seed", "Seed", "Сид"),
    ("playground.js.fact.size", "Size", "Размер"),
    ("playground.js.fact.credits", "Credits", "Кредиты"),
    (
        "playground.js.fact.returned",
        "Returned (balance: {})",
        "Возвращены (баланс: {})",
    ),
    ("playground.js.download", "Download", "Скачать"),
    (
        "playground.js.reuse.instruction",
        "Reuse instruction",
        "Повторить указание",
    ),
    (
        "playground.js.reuse.prompt",
        "Reuse prompt",
        "Повторить запрос",
    ),
    ("playground.js.edit_this", "Edit this", "Изменить"),
    ("playground.js.edit", "Edit", "Правка"),
    (
        "playground.js.took.instant",
        "took under 0.1 s",
        "заняло меньше 0,1 с",
    ),
    ("playground.js.took", "took {} s", "заняло {} с"),
    (
        "playground.js.deleted",
        "Done, but the picture has been deleted by the server's retention policy.",
        "Готово, но картинку уже удалил сервер по правилам хранения.",
    ),
    (
        "playground.js.not_drawn",
        "Note: this tier is drawn by the built-in painter, which has no picture for: {}.",
        "Примечание: эту модель рисует встроенный художник, у него нет картинки для: {}.",
    ),
    (
        "playground.js.not_drawn.admin",
        "A diffusion model draws anything: install one on Admin → Models.",
        "Диффузионная модель нарисует что угодно: установите её в разделе «Администрирование → Модели».",
    ),
    (
        "playground.js.not_drawn.user",
        "Your administrator can install a diffusion model that draws anything.",
        "Администратор может установить диффузионную модель, которая рисует что угодно.",
    ),
    (
        "playground.js.not_done",
        "Note: the built-in painter did: {}. It could not do: {}.",
        "Примечание: встроенный художник сделал: {}. Не смог: {}.",
    ),
    (
        "playground.js.not_done.admin",
        "An edit model (InstructPix2Pix) follows any instruction: install one on Admin → Models.",
        "Модель для правок (InstructPix2Pix) выполнит любую правку: установите её в разделе «Администрирование → Модели».",
    ),
    (
        "playground.js.not_done.user",
        "Your administrator can install an edit model that follows any instruction.",
        "Администратор может установить модель для правок, которая выполнит любую правку.",
    ),
    (
        "playground.js.cancelled",
        "You cancelled this job.",
        "Вы отменили это задание.",
    ),
    ("playground.js.status.cancelled", "Cancelled", "Отменено"),
    (
        "playground.js.failed_refunded",
        "The job failed; your credits were returned.",
        "Задание не выполнено; кредиты возвращены.",
    ),
    (
        "playground.js.lost_job",
        "The job could not be followed.",
        "Не удалось следить за заданием.",
    ),
    (
        "playground.js.lost_contact",
        "Lost contact with Pictor.",
        "Связь с Pictor потеряна.",
    ),
    (
        "playground.js.reload_for_result",
        "Reload the page to see the result.",
        "Обновите страницу, чтобы увидеть результат.",
    ),
    (
        "playground.js.need_prompt",
        "Type a prompt first.",
        "Сначала введите запрос.",
    ),
    (
        "playground.js.bad_seed",
        "The seed must be a whole number from 0 to 4294967295, or empty for a random one.",
        "Сид — целое число от 0 до 4294967295; оставьте пустым для случайного.",
    ),
    (
        "playground.js.need_photo",
        "Choose a photo to edit.",
        "Выберите фото для правки.",
    ),
    (
        "playground.js.photo_too_large",
        "The photo is larger than 20 MB. Choose a smaller one.",
        "Фото больше 20 МБ. Выберите поменьше.",
    ),
    (
        "playground.js.need_instruction",
        "Say what to change in the instruction.",
        "Напишите в указании, что изменить.",
    ),
    (
        "playground.js.filled.instruction",
        "Instruction filled in.",
        "Указание подставлено.",
    ),
    (
        "playground.js.filled.prompt",
        "Prompt, model, ratio and seed filled in.",
        "Запрос, модель, пропорции и сид подставлены.",
    ),
    (
        "playground.js.source.alt",
        "The picture to edit: {}",
        "Картинка для правки: {}",
    ),
    (
        "playground.js.source.text",
        "Editing your picture.",
        "Правка вашей картинки.",
    ),
    (
        "playground.js.source.text_sized",
        "Editing your picture ({}×{} px).",
        "Правка вашей картинки ({}×{} пикс.).",
    ),
    (
        "playground.js.source.ready",
        "The picture is ready to edit. Type an instruction.",
        "Картинка готова к правке. Введите указание.",
    ),
    ("playground.js.meta.seed", "seed {}", "сид {}"),
    (
        "playground.js.gallery.empty",
        "No pictures yet. The ones you make appear here.",
        "Картинок пока нет. Здесь появятся те, что вы создадите.",
    ),
    (
        "playground.js.gallery.failed",
        "Your pictures could not be loaded: {}",
        "Не удалось загрузить ваши картинки: {}",
    ),
    // The consent page.
    ("consent.title", "Allow {}?", "Разрешить вход в {}?"),
    // "Allow <app> to sign you in?", the app's name in bold between the two.
    ("consent.heading.before", "Allow", "Разрешить вход в"),
    ("consent.heading.after", "to sign you in?", "через Pictor?"),
    ("consent.app_id", "App id", "ID приложения"),
    (
        "consent.signed_in_as",
        "Signed in as {}.",
        "Вы вошли как {}.",
    ),
    ("consent.not_you", "Not you?", "Не вы?"),
    ("consent.will_be_able", "{} will be able to:", "{} сможет:"),
    (
        "consent.no_password",
        "It will not see your password. You can withdraw this at any time from your account page.",
        "Пароль приложение не увидит. Отозвать разрешение можно в любой момент в кабинете.",
    ),
    (
        "consent.spend.legend",
        "How much may {} spend of your credits?",
        "Сколько ваших кредитов может тратить {}?",
    ),
    ("consent.spend.daily", "Credits a day", "Кредитов в день"),
    (
        "consent.spend.daily_hint",
        "(empty: no daily limit)",
        "(пусто — без дневного лимита)",
    ),
    ("consent.spend.total", "Credits in all", "Кредитов всего"),
    (
        "consent.spend.total_hint",
        "(empty: no overall limit)",
        "(пусто — без общего лимита)",
    ),
    (
        "consent.spend.note",
        "A picture that would go over a limit is not made and costs nothing. You can change the limits on your account page.",
        "Картинка сверх лимита не создаётся и ничего не стоит. Лимиты можно изменить в кабинете.",
    ),
    ("consent.deny", "Deny", "Отказать"),
    ("consent.allow", "Allow", "Разрешить"),
    // What each scope lets the app do (`idp::authorize::scope_text`).
    (
        "consent.scope.openid",
        "Know who you are (a stable user id)",
        "Знать, кто вы (постоянный идентификатор пользователя)",
    ),
    (
        "consent.scope.profile",
        "See your name and profile picture",
        "Видеть ваше имя и фото профиля",
    ),
    (
        "consent.scope.email",
        "See your e-mail address",
        "Видеть ваш адрес эл. почты",
    ),
    (
        "consent.scope.images_read",
        "See your credit balance and the pictures it made for you",
        "Видеть ваш баланс кредитов и картинки, которые оно для вас сделало",
    ),
    (
        "consent.scope.images_generate",
        "Make pictures for you, paid with your credits",
        "Создавать для вас картинки за ваши кредиты",
    ),
    (
        "consent.scope.unknown",
        "Unknown permission",
        "Неизвестное разрешение",
    ),
    // Sign-out (RP-initiated logout).
    ("logout.title.confirm", "Sign out?", "Выйти?"),
    ("logout.title.done", "Signed out", "Выход выполнен"),
    ("logout.heading", "Sign out of Pictor?", "Выйти из Pictor?"),
    // After the app's name, in bold.
    (
        "logout.app_asks",
        "asks to end your Pictor session.",
        "просит завершить ваш сеанс в Pictor.",
    ),
    (
        "logout.intro",
        "You are signed in as {}. Signing out here signs you out of Pictor in this browser; apps you allowed keep their access until you withdraw it on your account page.",
        "Вы вошли как {}. Выход здесь завершает сеанс Pictor в этом браузере; приложения, которым вы дали доступ, сохранят его, пока вы не отзовёте его в кабинете.",
    ),
    ("logout.stay", "Stay signed in", "Не выходить"),
    ("logout.submit", "Sign out", "Выйти"),
    ("logout.done.heading", "You are signed out", "Вы вышли"),
    (
        "logout.done.text",
        "Your Pictor session in this browser has ended.",
        "Сеанс Pictor в этом браузере завершён.",
    ),
    ("logout.sign_in_again", "Sign in again", "Войти снова"),
    (
        "logout.refused.title",
        "This sign-out request cannot be used",
        "Этот запрос на выход не выполнить",
    ),
    (
        "logout.refused.bad_hint",
        "The id_token_hint is not an id_token Pictor issued.",
        "id_token_hint — не id_token, выданный Pictor.",
    ),
    (
        "logout.refused.hint_mismatch",
        "client_id is not the app the id_token_hint was issued to.",
        "client_id — не то приложение, которому выдан id_token_hint.",
    ),
    (
        "logout.refused.unknown_app",
        "No app is registered under that name.",
        "Приложение с таким именем не зарегистрировано.",
    ),
    (
        "logout.refused.needs_app",
        "post_logout_redirect_uri needs the app named by id_token_hint or client_id.",
        "Для post_logout_redirect_uri нужно приложение, указанное в id_token_hint или client_id.",
    ),
    (
        "logout.refused.unregistered",
        "post_logout_redirect_uri is not one the app registered.",
        "Такой post_logout_redirect_uri приложение не регистрировало.",
    ),
    (
        "logout.error.title",
        "Something went wrong",
        "Что-то пошло не так",
    ),
    (
        "logout.error.message",
        "Try again in a moment.",
        "Попробуйте ещё раз чуть позже.",
    ),
    // First-start setup.
    ("setup.title", "Set up Pictor", "Настройка Pictor"),
    (
        "setup.welcome",
        "Welcome to Pictor",
        "Добро пожаловать в Pictor",
    ),
    (
        "setup.intro",
        "Create the administrator account. It is a PRO account: your own pictures carry no watermark. This link works once.",
        "Создайте учётную запись администратора. Это PRO-аккаунт: ваши картинки будут без водяного знака. Ссылка действует один раз.",
    ),
    ("setup.name", "Name", "Имя"),
    ("setup.email", "E-mail", "Эл. почта"),
    ("setup.password", "Password", "Пароль"),
    (
        "setup.password_hint",
        "(at least 8 characters)",
        "(не меньше 8 символов)",
    ),
    (
        "setup.submit",
        "Create administrator",
        "Создать администратора",
    ),
    // HTML; the two commands go in the `<code>`s: making a new administrator, then making an
    // existing account one.
    (
        "setup.note",
        "Until an administrator exists, nobody can register on this Pictor and this link stays valid (a restart prints a new one). You can also do it on the server: <code>{}</code> for a new account, or <code>{}</code> to make an existing account the administrator.",
        "Пока администратора нет, в этом Pictor никто не может зарегистрироваться, а ссылка остаётся в силе (после перезапуска выводится новая). Это можно сделать и на сервере: <code>{}</code> — для новой учётной записи или <code>{}</code> — чтобы сделать администратором существующую.",
    ),
    (
        "setup.server_error",
        "Server error; please try again.",
        "Ошибка сервера; попробуйте ещё раз.",
    ),
    (
        "setup.dead.title",
        "Setup link not valid",
        "Ссылка для настройки недействительна",
    ),
    (
        "setup.dead.used",
        "This setup link was already used: this Pictor has its administrator.",
        "Эта ссылка для настройки уже использована: у этого Pictor есть администратор.",
    ),
    ("setup.dead.sign_in", "Sign in", "Войти"),
    (
        "setup.dead.stale",
        "This setup link is not the current one (it may be from before a restart: every start prints a new one in the server's console), and nobody has set this Pictor up yet. Open the link the server printed last.",
        "Это не текущая ссылка для настройки (возможно, она от прошлого запуска: при каждом запуске сервер выводит новую в консоль), а этот Pictor ещё никто не настроил. Откройте ссылку, которую сервер вывел последней.",
    ),
    (
        "setup.dead.on_server",
        "Or make the administrator on the server:",
        "Или назначьте администратора на сервере:",
    ),
    (
        "setup.dead.new_account",
        "— a new account",
        "— новая учётная запись",
    ),
    (
        "setup.dead.existing_account",
        "— an existing account",
        "— существующая учётная запись",
    ),
    // The authorization endpoint's refusals (nothing is sent back to the app).
    (
        "oauth.missing_client.title",
        "Missing client",
        "Не указано приложение",
    ),
    (
        "oauth.missing_client.message",
        "The request does not say which application is asking (client_id).",
        "В запросе не сказано, какое приложение спрашивает (client_id).",
    ),
    (
        "oauth.unknown_app.title",
        "Unknown application",
        "Неизвестное приложение",
    ),
    (
        "oauth.unknown_app.message",
        "This application is not registered with Pictor.",
        "Это приложение не зарегистрировано в Pictor.",
    ),
    (
        "oauth.missing_redirect.title",
        "Missing redirect address",
        "Нет адреса возврата",
    ),
    (
        "oauth.missing_redirect.message",
        "The request has no redirect_uri.",
        "В запросе нет redirect_uri.",
    ),
    (
        "oauth.bad_redirect.title",
        "Unregistered redirect address",
        "Незарегистрированный адрес возврата",
    ),
    (
        "oauth.bad_redirect.message",
        "The application asked to return to an address it has not registered. For your safety Pictor will not send you there.",
        "Приложение просит вернуть вас на адрес, который оно не регистрировало. Ради вашей безопасности Pictor туда не отправит.",
    ),
    ("oauth.malformed", "Malformed request", "Неверный запрос"),
    (
        "oauth.check_limit",
        "Check the spending limit",
        "Проверьте лимит расходов",
    ),
    (
        "oauth.cap.daily_bad",
        "The daily limit must be a whole number of credits from 0 to 1000000, or empty for no limit.",
        "Дневной лимит — целое число кредитов от 0 до 1000000 или пусто, если лимита нет.",
    ),
    (
        "oauth.cap.total_bad",
        "The total limit must be a whole number of credits from 0 to 1000000, or empty for no limit.",
        "Общий лимит — целое число кредитов от 0 до 1000000 или пусто, если лимита нет.",
    ),
    (
        "oauth.no_decision.title",
        "No decision",
        "Решение не выбрано",
    ),
    (
        "oauth.no_decision.message",
        "Choose Allow or Deny.",
        "Выберите «Разрешить» или «Отказать».",
    ),
];
