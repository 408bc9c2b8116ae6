//! The sample app's server: a tiny relying party that signs a person in with Pictor (OpenID
//! Connect, authorization code flow with PKCE, confidential client), shows their balance, makes
//! pictures on their behalf with their access token (within the spending limit they set at
//! consent), and signs them out (RP-initiated logout). Used by `main.rs` and by
//! `tests/sample_app.rs`, which drives it in chromium.
//!
//! Kept small on purpose: sessions live in memory, and its own forms rely on the session cookie
//! being `SameSite=Lax` (a real app adds CSRF tokens to its forms).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use poem::http::StatusCode;
use poem::web::cookie::{Cookie, CookieJar, SameSite};
use poem::web::{Data, Form, Html, Query, Redirect};
use poem::{EndpointExt, IntoResponse, Response, Route, get, handler, post};
use serde::Deserialize;
use serde_json::Value;

/// What the sample app knows about Pictor and itself.
pub struct SampleApp {
    pub issuer: String,
    pub client_id: String,
    pub secret: String,
    /// This app's own address (for its callback and post-logout URIs).
    pub base: String,
    metadata: CoreProviderMetadata,
    http: openidconnect::reqwest::Client,
    /// state → (PKCE verifier, nonce) of sign-ins under way.
    pending: Mutex<HashMap<String, (String, String)>>,
    /// session cookie → the signed-in person.
    sessions: Mutex<HashMap<String, Person>>,
}

#[derive(Clone)]
struct Person {
    name: String,
    access_token: String,
    id_token: String,
    last_picture: Option<String>,
    last_error: Option<String>,
}

const COOKIE: &str = "sample_session";

impl SampleApp {
    /// Reads Pictor's discovery document.
    pub async fn new(
        issuer: &str,
        client_id: &str,
        secret: &str,
        base: &str,
    ) -> anyhow::Result<Arc<SampleApp>> {
        let http = openidconnect::reqwest::ClientBuilder::new()
            .redirect(openidconnect::reqwest::redirect::Policy::none())
            .build()?;
        let metadata =
            CoreProviderMetadata::discover_async(IssuerUrl::new(issuer.to_string())?, &http)
                .await?;
        Ok(Arc::new(SampleApp {
            issuer: issuer.trim_end_matches('/').to_string(),
            client_id: client_id.to_string(),
            secret: secret.to_string(),
            base: base.trim_end_matches('/').to_string(),
            metadata,
            http,
            pending: Mutex::default(),
            sessions: Mutex::default(),
        }))
    }

    fn client(
        &self,
    ) -> anyhow::Result<
        CoreClient<
            openidconnect::EndpointSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointMaybeSet,
            openidconnect::EndpointMaybeSet,
        >,
    > {
        Ok(CoreClient::from_provider_metadata(
            self.metadata.clone(),
            ClientId::new(self.client_id.clone()),
            Some(ClientSecret::new(self.secret.clone())),
        )
        .set_redirect_uri(RedirectUrl::new(format!("{}/callback", self.base))?))
    }

    fn person(&self, jar: &CookieJar) -> Option<(String, Person)> {
        let id = jar.get(COOKIE)?.value_str().to_string();
        let person = self.sessions.lock().ok()?.get(&id)?.clone();
        Some((id, person))
    }
}

/// The routes of the sample app.
pub fn routes(app: Arc<SampleApp>) -> impl poem::Endpoint {
    Route::new()
        .at("/", get(home))
        .at("/login", get(login))
        .at("/callback", get(callback))
        .at("/generate", post(generate))
        .at("/logout", post(logout))
        .at("/signed-out", get(signed_out))
        .data(app)
        .with(poem::middleware::CookieJarManager::new())
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn page(body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Sample app · Pictor</title>\
         <style>body{{font:16px/1.5 system-ui,sans-serif;max-width:38rem;margin:2rem auto;padding:0 1rem}}img{{max-width:100%;border-radius:8px}}.error{{color:#b00020}}</style>\
         <h1>Sample app</h1>{body}</html>"
    ))
}

#[handler]
async fn home(app: Data<&Arc<SampleApp>>, jar: &CookieJar) -> Html<String> {
    let Some((_, person)) = app.person(jar) else {
        return page(
            "<p id=\"who\">Not signed in.</p><p><a id=\"sign-in\" href=\"/login\">Sign in with Pictor</a></p>",
        );
    };
    // The balance, read with the person's access token (`images:read`).
    let me: Value = match app
        .http
        .get(format!("{}/api/pictor/v1/me", app.issuer))
        .bearer_auth(&person.access_token)
        .send()
        .await
    {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    let balance = me["balance"]
        .as_i64()
        .map_or("?".to_string(), |b| b.to_string());
    let picture = person.last_picture.as_deref().map_or(String::new(), |url| {
        format!(
            "<p><img id=\"picture\" src=\"{}\" alt=\"The picture\"></p>",
            escape(url)
        )
    });
    let error = person.last_error.as_deref().map_or(String::new(), |e| {
        format!("<p class=\"error\" id=\"error\">{}</p>", escape(e))
    });
    page(&format!(
        "<p id=\"who\">Signed in as {}. Balance: <strong id=\"balance\">{balance}</strong> credits.</p>\
         <form method=\"post\" action=\"/generate\"><input name=\"prompt\" id=\"prompt\" value=\"a lighthouse on a cliff at dusk\" size=\"40\"> \
         <button id=\"generate\">Make a picture</button></form>{error}{picture}\
         <form method=\"post\" action=\"/logout\"><button id=\"sign-out\">Sign out</button></form>",
        escape(&person.name)
    ))
}

/// Starts the sign-in: PKCE (S256), a fresh `state` and `nonce`, kept here; the scopes ask for
/// reading the balance and making pictures.
#[handler]
async fn login(app: Data<&Arc<SampleApp>>) -> Response {
    let Ok(client) = app.client() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("profile".into()))
        .add_scope(Scope::new("images:read".into()))
        .add_scope(Scope::new("images:generate".into()))
        .set_pkce_challenge(challenge)
        .url();
    if let Ok(mut p) = app.pending.lock() {
        p.insert(
            state.secret().clone(),
            (verifier.secret().clone(), nonce.secret().clone()),
        );
    }
    Redirect::see_other(url.as_str()).into_response()
}

#[derive(Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// Pictor sends the browser back here with a code: the state must be one this app made; the code
/// is exchanged server to server with the secret and the PKCE verifier; the id_token is checked
/// (signature against Pictor's JWKS, issuer, audience, nonce).
#[handler]
async fn callback(
    app: Data<&Arc<SampleApp>>,
    jar: &CookieJar,
    Query(q): Query<Callback>,
) -> Response {
    if let Some(e) = q.error {
        return page(&format!(
            "<p class=\"error\">Pictor said: {}</p><p><a href=\"/\">Back</a></p>",
            escape(&e)
        ))
        .into_response();
    }
    let pending = q
        .state
        .as_ref()
        .and_then(|s| app.pending.lock().ok()?.remove(s));
    let (Some(code), Some((verifier, nonce))) = (q.code, pending) else {
        return (
            StatusCode::BAD_REQUEST,
            page("<p class=\"error\">Unknown sign-in (state).</p>"),
        )
            .into_response();
    };
    let Ok(client) = app.client() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let tokens = match client.exchange_code(AuthorizationCode::new(code)) {
        Ok(req) => {
            req.set_pkce_verifier(PkceCodeVerifier::new(verifier))
                .request_async(&app.http)
                .await
        }
        Err(e) => return (StatusCode::BAD_GATEWAY, page(&escape(&e.to_string()))).into_response(),
    };
    let tokens = match tokens {
        Ok(t) => t,
        Err(e) => return (StatusCode::BAD_GATEWAY, page(&escape(&e.to_string()))).into_response(),
    };
    let Some(id_token) = tokens.id_token() else {
        return (StatusCode::BAD_GATEWAY, page("no id_token")).into_response();
    };
    let claims = match id_token.claims(&client.id_token_verifier(), &Nonce::new(nonce)) {
        Ok(c) => c,
        Err(e) => return (StatusCode::BAD_GATEWAY, page(&escape(&e.to_string()))).into_response(),
    };
    let name = claims
        .name()
        .and_then(|n| n.get(None))
        .map_or_else(|| claims.subject().to_string(), |n| n.to_string());
    let session = openidconnect::CsrfToken::new_random().secret().clone();
    if let Ok(mut s) = app.sessions.lock() {
        s.insert(
            session.clone(),
            Person {
                name,
                access_token: tokens.access_token().secret().clone(),
                id_token: id_token.to_string(),
                last_picture: None,
                last_error: None,
            },
        );
    }
    let mut cookie = Cookie::new_with_str(COOKIE, session);
    cookie.set_http_only(true);
    cookie.set_same_site(SameSite::Lax);
    cookie.set_path("/");
    jar.add(cookie);
    Redirect::see_other("/").into_response()
}

#[derive(Deserialize)]
struct GenerateForm {
    prompt: String,
}

/// Makes a picture with the person's access token (`images:generate`), waits for it (long
/// poll) and shows it; a refusal (over the spending limit, no credits) is shown as Pictor words it.
#[handler]
async fn generate(
    app: Data<&Arc<SampleApp>>,
    jar: &CookieJar,
    Form(f): Form<GenerateForm>,
) -> Response {
    let Some((id, person)) = app.person(jar) else {
        return Redirect::see_other("/").into_response();
    };
    let created: Value = match app
        .http
        .post(format!("{}/api/pictor/v1/generate", app.issuer))
        .bearer_auth(&person.access_token)
        .json(&serde_json::json!({"prompt": f.prompt}))
        .send()
        .await
    {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(e) => serde_json::json!({"error": e.to_string()}),
    };
    let mut outcome = created.clone();
    if let Some(poll) = created["poll_url"].as_str() {
        for _ in 0..10 {
            let Ok(r) = app
                .http
                .get(format!("{poll}?wait=60"))
                .bearer_auth(&person.access_token)
                .send()
                .await
            else {
                break;
            };
            outcome = r.json().await.unwrap_or(Value::Null);
            if outcome["status"] == "done" || outcome["status"] == "failed" {
                break;
            }
        }
    }
    if let Ok(mut s) = app.sessions.lock()
        && let Some(p) = s.get_mut(&id)
    {
        p.last_picture = outcome["photo_url"].as_str().map(str::to_string);
        p.last_error = outcome["error"].as_str().map(|e| {
            format!(
                "{} ({})",
                e,
                outcome["error_code"].as_str().unwrap_or("error")
            )
        });
    }
    Redirect::see_other("/").into_response()
}

/// Forgets the person here, then sends the browser to Pictor's end_session_endpoint with the
/// id_token as the hint, so Pictor ends its session too and comes back to /signed-out.
#[handler]
async fn logout(app: Data<&Arc<SampleApp>>, jar: &CookieJar) -> Response {
    let Some((id, person)) = app.person(jar) else {
        return Redirect::see_other("/").into_response();
    };
    if let Ok(mut s) = app.sessions.lock() {
        s.remove(&id);
    }
    jar.remove(COOKIE);
    let query = serde_urlencoded::to_string([
        ("id_token_hint", person.id_token.as_str()),
        (
            "post_logout_redirect_uri",
            &format!("{}/signed-out", app.base),
        ),
        ("state", "bye"),
    ])
    .unwrap_or_default();
    Redirect::see_other(format!("{}/oauth/logout?{query}", app.issuer)).into_response()
}

#[handler]
async fn signed_out() -> Html<String> {
    page(
        "<p id=\"bye\">Signed out of the sample app and of Pictor.</p><p><a href=\"/\">Home</a></p>",
    )
}
