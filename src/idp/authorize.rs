//! `GET|POST /oauth/authorize`: checks the client and redirect URI before anything is sent back
//! (open-redirect protection), then the rest of the request (errors go back to the client), then
//! signs the user in, asks for consent (remembered per client and scopes) and issues a code.

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Request, Response, handler};

use super::crypto::{random_token, sha256};
use super::{DEFAULT_SCOPES, SCOPES};
use crate::clock::Millis;
use crate::state::AppState;
use crate::store::oauth::{CODE_TTL_MS, ClientRecord, CodeRecord};
use crate::web::oauth_error_page;
use crate::web::{csrf_ok, csrf_token, page, redirect, secure_page, signed_in};

/// A checked authorization request.
pub struct AuthzRequest {
    pub client: ClientRecord,
    pub redirect_uri: String,
    pub state: String,
    pub scopes: Vec<String>,
    pub nonce: Option<String>,
    pub challenge: Option<String>,
    pub display: String,
    pub prompt: Option<String>,
    /// The oldest sign-in this request accepts (`max_age`, and `prompt=login` once Pictor has
    /// turned it into `auth_after` for the return trip through `/login`).
    pub auth_after: Option<Millis>,
}

impl AuthzRequest {
    fn prompts(&self, value: &str) -> bool {
        self.prompt
            .as_deref()
            .is_some_and(|p| p.split(' ').any(|x| x == value))
    }
}

/// The internal parameter that carries "signed in after this moment" through `/login`, in
/// place of `prompt=login` (which would otherwise ask again after every sign-in).
const AUTH_AFTER: &str = "auth_after";

pub enum Checked {
    Ok(Box<AuthzRequest>),
    /// Shown on Pictor: the client or redirect URI cannot be trusted.
    Page(Response),
    /// Sent back to the (verified) redirect URI.
    Redirect(Response),
}

/// Parses a query or form body, refusing repeated parameters (RFC 6749 §3.1).
pub fn parse_params(raw: &str) -> Result<HashMap<String, String>, String> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(raw).map_err(|e| format!("malformed parameters: {e}"))?;
    let mut map = HashMap::new();
    for (k, v) in pairs {
        if map.insert(k.clone(), v).is_some() {
            return Err(format!("parameter {k} is repeated"));
        }
    }
    Ok(map)
}

/// `redirect_uri` + the parameters, added to its query.
pub fn with_params(uri: &str, params: &[(&str, &str)]) -> String {
    let query = serde_urlencoded::to_string(params).unwrap_or_default();
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}{query}")
}

fn error_redirect(
    state: &AppState,
    uri: &str,
    error: &str,
    description: &str,
    client_state: Option<&str>,
) -> Response {
    let mut params = vec![("error", error), ("error_description", description)];
    if let Some(s) = client_state {
        params.push(("state", s));
    }
    params.push(("iss", &state.public_url));
    redirect(&with_params(uri, &params))
}

pub fn check(state: &AppState, p: &HashMap<String, String>) -> Checked {
    let get = |k: &str| p.get(k).map(String::as_str).filter(|v| !v.is_empty());
    // 1. Client and redirect URI, before anything can be sent anywhere.
    let Some(client_id) = get("client_id") else {
        return Checked::Page(oauth_error_page(
            state,
            StatusCode::BAD_REQUEST,
            crate::web::i18n::tr("oauth.missing_client.title"),
            crate::web::i18n::tr("oauth.missing_client.message"),
        ));
    };
    let client = match state.store.client(client_id) {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Checked::Page(oauth_error_page(
                state,
                StatusCode::BAD_REQUEST,
                crate::web::i18n::tr("oauth.unknown_app.title"),
                crate::web::i18n::tr("oauth.unknown_app.message"),
            ));
        }
        Err(e) => {
            tracing::error!(error = %e, "client lookup");
            return Checked::Page(oauth_error_page(
                state,
                StatusCode::INTERNAL_SERVER_ERROR,
                crate::web::i18n::tr("error.server.title"),
                crate::web::i18n::tr("error.server.message"),
            ));
        }
    };
    let Some(redirect_uri) = get("redirect_uri") else {
        return Checked::Page(oauth_error_page(
            state,
            StatusCode::BAD_REQUEST,
            crate::web::i18n::tr("oauth.missing_redirect.title"),
            crate::web::i18n::tr("oauth.missing_redirect.message"),
        ));
    };
    // Byte-for-byte against the whitelist: no prefix, case or normalisation tricks.
    if !client
        .redirect_uris
        .iter()
        .any(|u| u.as_bytes() == redirect_uri.as_bytes())
    {
        return Checked::Page(oauth_error_page(
            state,
            StatusCode::BAD_REQUEST,
            crate::web::i18n::tr("oauth.bad_redirect.title"),
            crate::web::i18n::tr("oauth.bad_redirect.message"),
        ));
    }
    let redirect_uri = redirect_uri.to_string();
    let client_state = get("state");
    let fail = |error: &str, description: &str| {
        Checked::Redirect(error_redirect(
            state,
            &redirect_uri,
            error,
            description,
            client_state,
        ))
    };

    // 2. The rest of the request; errors now go back to the client.
    match get("response_type") {
        None => return fail("invalid_request", "response_type is required"),
        Some("code") => {}
        Some(_) => {
            return fail(
                "unsupported_response_type",
                "only response_type=code is supported",
            );
        }
    }
    let Some(client_state) = client_state else {
        return fail("invalid_request", "state is required");
    };
    let scopes: Vec<String> = match get("scope") {
        None => DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect(),
        Some(s) => {
            let mut out: Vec<String> = Vec::new();
            for part in s.split(' ').filter(|x| !x.is_empty()) {
                if !SCOPES.contains(&part) {
                    return fail(
                        "invalid_scope",
                        &format!(
                            "unsupported scope {part:?}; supported: {}",
                            SCOPES.join(" ")
                        ),
                    );
                }
                if !out.iter().any(|x| x == part) {
                    out.push(part.to_string());
                }
            }
            if out.is_empty() {
                return fail("invalid_scope", "scope is empty");
            }
            out
        }
    };
    let challenge = get("code_challenge").map(str::to_string);
    match (get("code_challenge_method"), &challenge) {
        (Some("S256"), Some(_)) => {}
        (Some("plain"), _) | (None, Some(_)) => {
            return fail(
                "invalid_request",
                "PKCE code_challenge_method must be S256 (plain is not supported)",
            );
        }
        (Some(_), Some(_)) => {
            return fail("invalid_request", "PKCE code_challenge_method must be S256");
        }
        (Some(_), None) => {
            return fail(
                "invalid_request",
                "code_challenge_method without code_challenge",
            );
        }
        (None, None) => {}
    }
    if let Some(c) = &challenge
        && (c.len() != 43
            || !c
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    {
        return fail(
            "invalid_request",
            "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
        );
    }
    let nonce = get("nonce").map(str::to_string);
    if nonce.as_ref().is_some_and(|n| n.len() > 512) {
        return fail("invalid_request", "nonce is too long");
    }
    let prompt = get("prompt").map(str::to_string);
    if let Some(p) = &prompt {
        let values: Vec<&str> = p.split(' ').filter(|x| !x.is_empty()).collect();
        if let Some(bad) = values
            .iter()
            .find(|v| !matches!(**v, "none" | "login" | "consent" | "select_account"))
        {
            return fail(
                "invalid_request",
                &format!("unsupported prompt value {bad:?}"),
            );
        }
        if values.contains(&"none") && values.len() > 1 {
            return fail(
                "invalid_request",
                "prompt=none cannot be combined with other values",
            );
        }
    }
    let now = state.clock.now();
    let mut auth_after: Option<Millis> = None;
    if let Some(v) = get("max_age") {
        let Ok(secs) = v.parse::<u64>() else {
            return fail("invalid_request", "max_age must be a number of seconds");
        };
        auth_after = Some(now.saturating_sub(secs.saturating_mul(1000)));
    }
    if let Some(v) = get(AUTH_AFTER) {
        let Ok(t) = v.parse::<u64>() else {
            return fail("invalid_request", "malformed auth_after");
        };
        // Never in the future: a fresh sign-in must be able to satisfy it.
        auth_after = Some(auth_after.unwrap_or(0).max(t.min(now)));
    }
    let display = match get("display") {
        Some("popup") => "popup",
        _ => "page",
    }
    .to_string();
    Checked::Ok(Box::new(AuthzRequest {
        client,
        redirect_uri,
        state: client_state.to_string(),
        scopes,
        nonce,
        challenge,
        display,
        prompt,
        auth_after,
    }))
}

/// The request's parameters to carry through sign-in and the consent form.
fn carried(p: &HashMap<String, String>) -> Vec<(String, String)> {
    let keys = [
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "nonce",
        "display",
        "code_challenge",
        "code_challenge_method",
        "max_age",
        AUTH_AFTER,
    ];
    keys.iter()
        .filter_map(|k| p.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

async fn issue_code(
    state: &AppState,
    req: &AuthzRequest,
    user_id: u64,
    auth_time: u64,
) -> Response {
    let code = random_token("pc_");
    let now = state.clock.now();
    let record = CodeRecord {
        client: req.client.name.clone(),
        user_id,
        redirect_uri: req.redirect_uri.clone(),
        scope: req.scopes.join(" "),
        nonce: req.nonce.clone(),
        challenge: req.challenge.clone(),
        auth_time,
        expires_at: now + CODE_TTL_MS,
        used_at: None,
        family: None,
    };
    let hash = sha256(&code);
    if let Err(e) = state.store.call(move |s| s.store_code(hash, record)).await {
        tracing::error!(error = %e, "storing an authorization code");
        return error_redirect(
            state,
            &req.redirect_uri,
            "server_error",
            "please try again",
            Some(&req.state),
        );
    }
    redirect(&with_params(
        &req.redirect_uri,
        &[
            ("code", &code),
            ("state", &req.state),
            ("iss", &state.public_url),
        ],
    ))
}

/// What a scope lets the app do, in plain words and the page's language: the consent page and
/// the account page's list of apps.
pub fn scope_text(scope: &str) -> &'static str {
    use crate::web::i18n;
    match scope {
        "openid" => i18n::tr("consent.scope.openid"),
        "profile" => i18n::tr("consent.scope.profile"),
        "email" => i18n::tr("consent.scope.email"),
        "images:read" => i18n::tr("consent.scope.images_read"),
        "images:generate" => i18n::tr("consent.scope.images_generate"),
        _ => i18n::tr("consent.scope.unknown"),
    }
}

#[derive(askama::Template)]
#[template(path = "consent.html")]
struct ConsentPage {
    app: String,
    /// The app's display name (its client id when it has none).
    display: String,
    logo: Option<String>,
    homepage: Option<String>,
    email: String,
    scopes: Vec<&'static str>,
    /// When the app asks to make pictures: the proposed (daily, total) spending limits.
    spending: Option<(String, String)>,
    csrf: String,
    params: Vec<(String, String)>,
    return_to: String,
}

#[handler]
pub async fn authorize_get(req: &Request, state: Data<&AppState>, jar: &CookieJar) -> Response {
    let raw = req.uri().query().unwrap_or_default();
    let params = match parse_params(raw) {
        Ok(p) => p,
        Err(e) => {
            return oauth_error_page(
                &state,
                StatusCode::BAD_REQUEST,
                crate::web::i18n::tr("oauth.malformed"),
                &e,
            );
        }
    };
    let authz = match check(&state, &params) {
        Checked::Ok(a) => a,
        Checked::Page(r) | Checked::Redirect(r) => return r,
    };
    let now = state.clock.now();
    // `prompt=login` asks for a sign-in made now, `max_age` for one made after now - max_age.
    // From here on (the way back from `/login`, the consent form) the request carries that as a
    // fixed `auth_after` time instead, which the fresh sign-in satisfies: no loop, however long
    // the person takes, and other prompt values (`consent`) are kept.
    let fresh_after = if authz.prompts("login") {
        Some(authz.auth_after.unwrap_or(0).max(now))
    } else {
        authz.auth_after
    };
    let mut normal: HashMap<String, String> = params
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "prompt" | "max_age" | AUTH_AFTER))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(p) = &authz.prompt {
        let rest: Vec<&str> = p
            .split(' ')
            .filter(|x| !x.is_empty() && *x != "login")
            .collect();
        if !rest.is_empty() {
            normal.insert("prompt".into(), rest.join(" "));
        }
    }
    if let Some(t) = fresh_after {
        normal.insert(AUTH_AFTER.into(), t.to_string());
    }
    let mut pairs: Vec<(&String, &String)> = normal.iter().collect();
    pairs.sort();
    let back = format!(
        "/oauth/authorize?{}",
        serde_urlencoded::to_string(&pairs).unwrap_or_default()
    );
    let here = back.clone();
    let return_q = serde_urlencoded::to_string([("return_to", back.as_str())]).unwrap_or_default();
    let popup = if authz.display == "popup" {
        "&display=popup"
    } else {
        ""
    };
    let me = signed_in(&state, jar);
    let stale = me
        .as_ref()
        .is_some_and(|m| fresh_after.is_some_and(|t| m.session.auth_time < t));
    let Some(me) = me.filter(|_| !stale) else {
        if authz.prompts("none") {
            return error_redirect(
                &state,
                &authz.redirect_uri,
                "login_required",
                if stale {
                    "the user's sign-in is older than max_age"
                } else {
                    "the user is not signed in"
                },
                Some(&authz.state),
            );
        }
        let force = if stale { "&force=1" } else { "" };
        return redirect(&format!(
            "/login?{return_q}&app={}{popup}{force}",
            urlencode(&authz.client.name)
        ));
    };
    let consent = state
        .store
        .consent(me.user.id, &authz.client.name)
        .ok()
        .flatten();
    let consent_caps = consent.as_ref().map(|c| c.caps);
    let remembered = consent.is_some_and(|c| authz.scopes.iter().all(|s| c.scopes.contains(s)));
    if remembered && !authz.prompts("consent") {
        return issue_code(&state, &authz, me.user.id, me.session.auth_time).await;
    }
    if authz.prompts("none") {
        return error_redirect(
            &state,
            &authz.redirect_uri,
            "consent_required",
            "the user has not approved this application",
            Some(&authz.state),
        );
    }
    let spending = authz
        .scopes
        .iter()
        .any(|s| s == "images:generate")
        .then(|| {
            let shown = |v: Option<u32>| v.map(|n| n.to_string()).unwrap_or_default();
            match consent_caps {
                // Asked again: the limits the person set before.
                Some(caps) => (shown(caps.daily), shown(caps.total)),
                None => {
                    let proposed = state
                        .store
                        .settings()
                        .map(|s| s.app_daily_cap)
                        .unwrap_or(10);
                    (shown((proposed > 0).then_some(proposed)), String::new())
                }
            }
        });
    let profile = &authz.client.profile;
    let logo = profile.logo_uri.clone();
    let resp = page(&ConsentPage {
        app: authz.client.name.clone(),
        display: profile
            .display_name
            .clone()
            .unwrap_or_else(|| authz.client.name.clone()),
        logo: logo.clone(),
        homepage: profile.homepage.clone(),
        email: me.user.email.clone(),
        scopes: authz.scopes.iter().map(|s| scope_text(s)).collect(),
        spending,
        csrf: csrf_token(&state, jar),
        params: carried(&normal),
        return_to: here.clone(),
    });
    // The logo is the app's own: the browser loads it from the app's origin (Pictor never
    // fetches it), so the page's policy lets images come from there and nowhere else.
    match logo.as_deref().and_then(|l| url::Url::parse(l).ok()) {
        Some(u) => crate::web::allow_images_from(resp, &u.origin().ascii_serialization()),
        None => resp,
    }
}

/// The spending limits of the consent form: `cap_daily` and `cap_total`, whole credits from 0
/// to 1,000,000, empty for no limit.
pub fn spend_caps(
    params: &HashMap<String, String>,
) -> Result<crate::store::oauth::SpendCaps, String> {
    let read = |name: &str, what: &str| -> Result<Option<u32>, String> {
        match params.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= 1_000_000)
                .map(Some)
                .ok_or_else(|| what.to_owned()),
        }
    };
    Ok(crate::store::oauth::SpendCaps {
        daily: read("cap_daily", crate::web::i18n::tr("oauth.cap.daily_bad"))?,
        total: read("cap_total", crate::web::i18n::tr("oauth.cap.total_bad"))?,
    })
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("", s)])
        .unwrap_or_default()
        .trim_start_matches('=')
        .to_string()
}

#[handler]
pub async fn authorize_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    body: String,
) -> Response {
    let params = match parse_params(&body) {
        Ok(p) => p,
        Err(e) => {
            return oauth_error_page(
                &state,
                StatusCode::BAD_REQUEST,
                crate::web::i18n::tr("oauth.malformed"),
                &e,
            );
        }
    };
    let csrf = params.get("csrf").map(String::as_str).unwrap_or_default();
    if !csrf_ok(&state, req, jar, csrf) {
        return crate::web::PageError::oauth_form_expired().render();
    }
    let authz = match check(&state, &params) {
        Checked::Ok(a) => a,
        Checked::Page(r) | Checked::Redirect(r) => return r,
    };
    // Signed out, or signed in before the request's `auth_after`: sign in (again) first.
    let me = signed_in(&state, jar);
    let stale = me
        .as_ref()
        .is_some_and(|m| authz.auth_after.is_some_and(|t| m.session.auth_time < t));
    let Some(me) = me.filter(|_| !stale) else {
        let here = with_params(
            "/oauth/authorize",
            &carried(&params)
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
        );
        return redirect(&format!(
            "/login?{}{}",
            serde_urlencoded::to_string([("return_to", here.as_str())]).unwrap_or_default(),
            if stale { "&force=1" } else { "" }
        ));
    };
    match params.get("decision").map(String::as_str) {
        Some("allow") => {
            let caps = if authz.scopes.iter().any(|s| s == "images:generate") {
                match spend_caps(&params) {
                    Ok(caps) => Some(caps),
                    Err(message) => {
                        return oauth_error_page(
                            &state,
                            StatusCode::BAD_REQUEST,
                            crate::web::i18n::tr("oauth.check_limit"),
                            &message,
                        );
                    }
                }
            } else {
                None
            };
            let (uid, client, scopes, now) = (
                me.user.id,
                authz.client.name.clone(),
                authz.scopes.clone(),
                state.clock.now(),
            );
            if let Err(e) = state
                .store
                .call(move |s| s.set_consent(uid, &client, scopes, caps, now))
                .await
            {
                tracing::error!(error = %e, "saving consent");
            }
            issue_code(&state, &authz, me.user.id, me.session.auth_time).await
        }
        Some("deny") => error_redirect(
            &state,
            &authz.redirect_uri,
            "access_denied",
            "the user refused",
            Some(&authz.state),
        ),
        _ => secure_page(oauth_error_page(
            &state,
            StatusCode::BAD_REQUEST,
            crate::web::i18n::tr("oauth.no_decision.title"),
            crate::web::i18n::tr("oauth.no_decision.message"),
        )),
    }
}
