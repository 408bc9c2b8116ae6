//! Sign in with Pictor, end to end with a real relying-party library (`openidconnect`):
//! discovery → authorize (sign-in and consent forms over HTTP) → code exchange with PKCE →
//! id_token verified against the JWKS → userinfo → refresh rotation → revoke.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreProviderMetadata, CoreUserInfoClaims,
};
use openidconnect::{
    AccessTokenHash, AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce,
    OAuth2TokenResponse, PkceCodeChallenge, RedirectUrl, Scope, TokenResponse, reqwest,
};
use serde_json::Value;

const REDIRECT: &str = "http://127.0.0.1:9/callback";

fn http() -> reqwest::Client {
    reqwest::ClientBuilder::new()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_flow_with_a_certified_style_relying_party() {
    let s = TestServer::start().await;
    s.person("alice@example.com", "correct horse battery");
    let (app, secret) = s.oauth_client("sample-app", &[REDIRECT]);
    let http = http();

    let metadata =
        CoreProviderMetadata::discover_async(IssuerUrl::new(s.base.clone()).unwrap(), &http)
            .await
            .unwrap();
    let client = CoreClient::from_provider_metadata(
        metadata,
        ClientId::new(app.clone()),
        Some(ClientSecret::new(secret.clone())),
    )
    .set_redirect_uri(RedirectUrl::new(REDIRECT.into()).unwrap());

    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (auth_url, csrf, nonce) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("profile".into()))
        .add_scope(Scope::new("email".into()))
        .set_pkce_challenge(challenge)
        .url();

    let mut browser = Browser::new();
    let back = s
        .sign_in_and_consent(
            &mut browser,
            auth_url.as_str(),
            "alice@example.com",
            "correct horse battery",
        )
        .await;
    assert!(back.starts_with(REDIRECT), "{back}");
    let q = query_of(&back);
    assert_eq!(q["state"], *csrf.secret(), "state returned unchanged");
    assert_eq!(q["iss"], s.base);

    let tokens = client
        .exchange_code(AuthorizationCode::new(q["code"].clone()))
        .unwrap()
        .set_pkce_verifier(verifier)
        .request_async(&http)
        .await
        .unwrap();
    assert_eq!(tokens.expires_in().unwrap().as_secs(), 3600);
    let id_token = tokens.id_token().expect("id_token");
    let verifier = client.id_token_verifier();
    let claims = id_token.claims(&verifier, &nonce).unwrap();
    let sub = claims.subject().as_str().to_string();
    assert!(sub.starts_with("usr_"));
    assert_eq!(claims.email().unwrap().as_str(), "alice@example.com");
    assert!(claims.auth_time().is_some());
    let expected = claims.access_token_hash().expect("at_hash");
    let actual = AccessTokenHash::from_token(
        tokens.access_token(),
        id_token.signing_alg().unwrap(),
        id_token.signing_key(&verifier).unwrap(),
    )
    .unwrap();
    assert_eq!(&actual, expected);
    let scopes: Vec<String> = tokens
        .scopes()
        .unwrap()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(scopes, vec!["openid", "profile", "email"]);

    // The raw token response is exactly the seed's shape, uncacheable.
    let info: CoreUserInfoClaims = client
        .user_info(tokens.access_token().clone(), None)
        .unwrap()
        .request_async(&http)
        .await
        .unwrap();
    assert_eq!(info.subject().as_str(), sub);
    assert_eq!(info.email().unwrap().as_str(), "alice@example.com");
    assert_eq!(info.email_verified(), Some(false));
    assert_eq!(info.preferred_username().unwrap().as_str(), sub);
    assert_eq!(
        info.name().unwrap().get(None).unwrap().as_str(),
        "Test Person"
    );
    let picture = info.picture().unwrap().get(None).unwrap().to_string();
    let r = http.get(&picture).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert!(
        image::load_from_memory(&r.bytes().await.unwrap()).is_ok(),
        "picture is a real image"
    );

    // Refresh: rotation gives a new refresh token; the old one is dead, and reusing it kills the family.
    let old_refresh = tokens.refresh_token().unwrap().clone();
    let refreshed = client
        .exchange_refresh_token(&old_refresh)
        .unwrap()
        .request_async(&http)
        .await
        .unwrap();
    let new_refresh = refreshed.refresh_token().unwrap().clone();
    assert_ne!(new_refresh.secret(), old_refresh.secret());
    // No id_token on refresh (OIDC Core 12.2 allows it; the certified RP library accepts it).
    assert!(refreshed.id_token().is_none());
    let user_info_ok = |token: openidconnect::AccessToken| {
        let client = client.clone();
        let http = http.clone();
        async move {
            let r: Result<CoreUserInfoClaims, _> = client
                .user_info(token, None)
                .unwrap()
                .request_async(&http)
                .await;
            r.is_ok()
        }
    };
    assert!(user_info_ok(refreshed.access_token().clone()).await);
    let reuse = client
        .exchange_refresh_token(&old_refresh)
        .unwrap()
        .request_async(&http)
        .await;
    assert!(format!("{reuse:?}").contains("invalid_grant"), "{reuse:?}");
    let after_reuse = client
        .exchange_refresh_token(&new_refresh)
        .unwrap()
        .request_async(&http)
        .await;
    assert!(
        after_reuse.is_err(),
        "the whole family is revoked after reuse"
    );
    assert!(
        !user_info_ok(refreshed.access_token().clone()).await,
        "access tokens of the family end too"
    );

    // Consent is remembered: a second sign-in goes straight back with a code.
    let (auth_url, csrf, _) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("profile".into()))
        .url();
    let page = browser.get(auth_url.as_str()).await;
    assert_eq!(page.status, 303);
    let back = page.location.unwrap();
    assert!(
        back.starts_with(REDIRECT) && back.contains("code="),
        "{back}"
    );
    assert_eq!(query_of(&back)["state"], *csrf.secret());
    let tokens = client
        .exchange_code(AuthorizationCode::new(query_of(&back)["code"].clone()))
        .unwrap()
        .request_async(&http)
        .await
        .unwrap();

    // Revoke (RFC 7009): revoking the refresh token ends its access token.
    assert!(user_info_ok(tokens.access_token().clone()).await);
    // (openidconnect refuses revocation over plain http, so this is the raw RFC 7009 request.)
    let r = http
        .post(s.url("/oauth/revoke"))
        .basic_auth(&app, Some(&secret))
        .form(&[
            ("token", tokens.refresh_token().unwrap().secret().as_str()),
            ("token_type_hint", "refresh_token"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(!user_info_ok(tokens.access_token().clone()).await);
    assert!(
        client
            .exchange_refresh_token(tokens.refresh_token().unwrap())
            .unwrap()
            .request_async(&http)
            .await
            .is_err()
    );
    s.stop().await;
}

/// Authorize + sign in + consent with raw parameters; returns the redirect back to the client.
async fn code_for(
    s: &TestServer,
    browser: &mut Browser,
    app: &str,
    extra: &[(&str, &str)],
) -> String {
    let mut params = vec![
        ("response_type", "code"),
        ("client_id", app),
        ("redirect_uri", REDIRECT),
        ("state", "st-123"),
    ];
    params.extend_from_slice(extra);
    let url = authorize_url(&s.base, &params);
    let back = s
        .sign_in_and_consent(browser, &url, "bob@example.com", "bob's long password")
        .await;
    query_of(&back)
        .get("code")
        .cloned()
        .unwrap_or_else(|| panic!("no code: {back}"))
}

async fn token_call(
    s: &TestServer,
    fields: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut req = http().post(s.url("/oauth/token")).form(fields);
    if let Some((id, secret)) = basic {
        req = req.basic_auth(id, Some(secret));
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    assert_eq!(
        headers["cache-control"], "no-store",
        "every token response is no-store"
    );
    (status, r.json().await.unwrap_or(Value::Null), headers)
}

fn assert_oauth_error(got: &(u16, Value, reqwest::header::HeaderMap), status: u16, code: &str) {
    assert_eq!(got.0, status, "{}", got.1);
    assert_eq!(got.1["error"], code, "{}", got.1);
    assert!(
        got.1["error_description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_endpoint_errors() {
    let s = TestServer::start().await;
    s.person("bob@example.com", "bob's long password");
    let (app, secret) = s.oauth_client("app-one", &[REDIRECT]);
    let (other, other_secret) = s.oauth_client("app-two", &[REDIRECT]);
    let mut browser = Browser::new();
    let verifier = "v".repeat(50);
    let challenge = pictor::idp::crypto::b64url(&pictor::idp::crypto::sha256(&verifier));

    // Success with app_name/app_secret in the body; the body is exactly the seed's.
    let code = code_for(&s, &mut browser, &app, &[]).await;
    let ok = token_call(
        &s,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("app_name", &app),
            ("app_secret", &secret),
        ],
        None,
    )
    .await;
    assert_eq!(ok.0, 200, "{}", ok.1);
    let mut keys: Vec<&str> =
        ok.1.as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "access_token",
            "expires_in",
            "id_token",
            "refresh_token",
            "scope",
            "token_type"
        ]
    );
    assert_eq!(ok.1["token_type"], "Bearer");
    assert_eq!(ok.1["expires_in"], 3600);
    // Code reuse: invalid_grant, and what the code issued is revoked.
    let again = token_call(
        &s,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("client_id", &app),
            ("client_secret", &secret),
        ],
        None,
    )
    .await;
    assert_oauth_error(&again, 400, "invalid_grant");
    let r = http()
        .get(s.url("/oauth/userinfo"))
        .bearer_auth(ok.1["access_token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("error=\"invalid_token\"")
    );
    let refresh = token_call(
        &s,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", ok.1["refresh_token"].as_str().unwrap()),
        ],
        Some((&app, &secret)),
    )
    .await;
    assert_oauth_error(&refresh, 400, "invalid_grant");

    // Expired code (5-minute lifetime; time is a parameter).
    let code = code_for(&s, &mut browser, &app, &[]).await;
    s.clock.advance(5 * 60 * 1000 + 1000);
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
            ],
            Some((&app, &secret)),
        )
        .await,
        400,
        "invalid_grant",
    );

    // redirect_uri mismatch at the token endpoint.
    let code = code_for(&s, &mut browser, &app, &[]).await;
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", "http://127.0.0.1:9/other"),
            ],
            Some((&app, &secret)),
        )
        .await,
        400,
        "invalid_grant",
    );
    // Wrong secret, unknown client, no authentication: 401 invalid_client.
    let code = code_for(&s, &mut browser, &app, &[]).await;
    let wrong = token_call(
        &s,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
        ],
        Some((&app, "pcs_wrong")),
    )
    .await;
    assert_oauth_error(&wrong, 401, "invalid_client");
    assert!(wrong.2.contains_key("www-authenticate"));
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
            ],
            Some(("nope", "x")),
        )
        .await,
        401,
        "invalid_client",
    );
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", &app),
            ],
            None,
        )
        .await,
        401,
        "invalid_client",
    );
    // A code of another client.
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
            ],
            Some((&other, &other_secret)),
        )
        .await,
        400,
        "invalid_grant",
    );
    // The failed attempts did not burn the code for its own client.
    assert_eq!(
        token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT)
            ],
            Some((&app, &secret))
        )
        .await
        .0,
        200
    );

    // PKCE: missing verifier, wrong verifier, and downgrade (verifier for a code without challenge).
    let pkce = [
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let code = code_for(&s, &mut browser, &app, &pkce).await;
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
            ],
            Some((&app, &secret)),
        )
        .await,
        400,
        "invalid_grant",
    );
    let code = code_for(&s, &mut browser, &app, &pkce).await;
    let wrong_verifier = "w".repeat(50);
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", &wrong_verifier),
            ],
            Some((&app, &secret)),
        )
        .await,
        400,
        "invalid_grant",
    );
    let code = code_for(&s, &mut browser, &app, &pkce).await;
    assert_eq!(
        token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", &verifier)
            ],
            Some((&app, &secret))
        )
        .await
        .0,
        200
    );
    let code = code_for(&s, &mut browser, &app, &[]).await;
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", &verifier),
            ],
            Some((&app, &secret)),
        )
        .await,
        400,
        "invalid_grant",
    );

    // A refresh token works only for its own client.
    let code = code_for(&s, &mut browser, &app, &[]).await;
    let t = token_call(
        &s,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
        ],
        Some((&app, &secret)),
    )
    .await;
    let rt = t.1["refresh_token"].as_str().unwrap().to_string();
    assert_oauth_error(
        &token_call(
            &s,
            &[("grant_type", "refresh_token"), ("refresh_token", &rt)],
            Some((&other, &other_secret)),
        )
        .await,
        400,
        "invalid_grant",
    );
    let r2 = token_call(
        &s,
        &[("grant_type", "refresh_token"), ("refresh_token", &rt)],
        Some((&app, &secret)),
    )
    .await;
    assert_eq!(r2.0, 200, "still valid for its own client: {}", r2.1);
    assert!(
        r2.1.get("id_token").is_none() && r2.1["access_token"].is_string(),
        "a refresh returns no id_token (OIDC Core 12.2): {}",
        r2.1
    );
    // Refresh tokens last 30 days.
    s.clock.advance(31 * 86_400_000);
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", r2.1["refresh_token"].as_str().unwrap()),
            ],
            Some((&app, &secret)),
        )
        .await,
        400,
        "invalid_grant",
    );

    // Malformed requests.
    assert_oauth_error(
        &token_call(
            &s,
            &[("grant_type", "password"), ("username", "x")],
            Some((&app, &secret)),
        )
        .await,
        400,
        "unsupported_grant_type",
    );
    assert_oauth_error(
        &token_call(&s, &[("code", "x")], Some((&app, &secret))).await,
        400,
        "invalid_request",
    );
    assert_oauth_error(
        &token_call(
            &s,
            &[("grant_type", "authorization_code")],
            Some((&app, &secret)),
        )
        .await,
        400,
        "invalid_request",
    );
    assert_oauth_error(
        &token_call(
            &s,
            &[
                ("grant_type", "authorization_code"),
                ("code", "x"),
                ("client_secret", &secret),
            ],
            Some((&app, &secret)),
        )
        .await,
        400,
        "invalid_request",
    );
    let r = http()
        .post(s.url("/oauth/token"))
        .json(&serde_json::json!({"grant_type": "authorization_code"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Revoke: 200 for any token string, client authentication required.
    let r = http()
        .post(s.url("/oauth/revoke"))
        .basic_auth(&app, Some(&secret))
        .form(&[("token", "not-a-token")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http()
        .post(s.url("/oauth/revoke"))
        .form(&[("token", "not-a-token")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorize_errors_and_open_redirect_protection() {
    let s = TestServer::start().await;
    s.person("bob@example.com", "bob's long password");
    let (app, _) = s.oauth_client("app-one", &[REDIRECT, "https://good.example/cb"]);
    let mut browser = Browser::new();
    let authorize = |params: &[(&str, &str)]| {
        format!(
            "{}/oauth/authorize?{}",
            s.base,
            serde_urlencoded::to_string(params).unwrap()
        )
    };

    // Unknown client or a redirect_uri not byte-for-byte on the whitelist: a page on Pictor, never a redirect.
    for (client, uri) in [
        ("nope", REDIRECT),
        (app.as_str(), "https://evil.example/cb"),
        (app.as_str(), "https://good.example@evil.example/cb"),
        (app.as_str(), "https://good.example/cb/"),
        (app.as_str(), "https://good.example/cb?x=1"),
        (app.as_str(), "https://GOOD.example/cb"),
        (app.as_str(), "https://good.example/cb#frag"),
        (app.as_str(), "https://good.example.evil.example/cb"),
        (app.as_str(), ""),
    ] {
        let page = browser
            .get(&authorize(&[
                ("response_type", "code"),
                ("client_id", client),
                ("redirect_uri", uri),
                ("state", "s"),
            ]))
            .await;
        assert_eq!(page.status, 400, "{client} {uri}");
        assert!(page.location.is_none(), "redirected for {uri}");
        assert!(
            page.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        assert!(page.body.contains("<h1>"));
    }
    // Errors after the client is trusted go back to it, with the state.
    let cases = [
        (
            vec![("response_type", "token"), ("state", "s1")],
            "unsupported_response_type",
            Some("s1"),
        ),
        (
            vec![
                ("response_type", "code"),
                ("state", "s2"),
                ("scope", "openid admin"),
            ],
            "invalid_scope",
            Some("s2"),
        ),
        (vec![("response_type", "code")], "invalid_request", None),
        (
            vec![
                ("response_type", "code"),
                ("state", "s3"),
                (
                    "code_challenge",
                    "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                ),
                ("code_challenge_method", "plain"),
            ],
            "invalid_request",
            Some("s3"),
        ),
        (
            vec![
                ("response_type", "code"),
                ("state", "s4"),
                (
                    "code_challenge",
                    "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                ),
            ],
            "invalid_request",
            Some("s4"),
        ),
    ];
    for (extra, error, state) in cases {
        let mut params = vec![("client_id", app.as_str()), ("redirect_uri", REDIRECT)];
        params.extend(extra);
        let page = browser.get(&authorize(&params)).await;
        assert_eq!(page.status, 303, "{params:?}: {}", page.body);
        let loc = page.location.unwrap();
        assert!(loc.starts_with(REDIRECT), "{loc}");
        let q = query_of(&loc);
        assert_eq!(q["error"], error, "{params:?}");
        assert_eq!(q.get("state").map(String::as_str), state);
    }
    // Repeated parameters are refused without redirecting.
    let page = browser
        .get(&format!(
            "{}&client_id=x",
            authorize(&[
                ("response_type", "code"),
                ("client_id", &app),
                ("redirect_uri", REDIRECT),
                ("state", "s")
            ])
        ))
        .await;
    assert_eq!(page.status, 400);

    // Deny → access_denied with the state.
    let url = authorize(&[
        ("response_type", "code"),
        ("client_id", &app),
        ("redirect_uri", REDIRECT),
        ("state", "deny-me"),
        ("scope", "openid email"),
    ]);
    let consent = browser
        .through_login(&s.base, &url, "bob@example.com", "bob's long password")
        .await;
    assert!(
        consent.body.contains("See your e-mail address"),
        "scopes in plain words"
    );
    assert!(consent.body.contains("app-one"));
    let mut fields = form_fields(&consent.body, "/oauth/authorize");
    set_field(&mut fields, "decision", "deny");
    let r = browser.post(&s.url("/oauth/authorize"), &fields).await;
    let q = query_of(&r.location.unwrap());
    assert_eq!(q["error"], "access_denied");
    assert_eq!(q["state"], "deny-me");
    // Consent POST without the CSRF token is refused.
    fields.retain(|(k, _)| k != "csrf");
    set_field(&mut fields, "decision", "allow");
    let r = browser.post(&s.url("/oauth/authorize"), &fields).await;
    assert_eq!(r.status, 403);
    assert!(r.location.is_none());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_jwks_and_key_rotation() {
    let s = TestServer::start().await;
    s.person("bob@example.com", "bob's long password");
    let (app, secret) = s.oauth_client("app-one", &[REDIRECT]);
    let http = http();
    let doc: Value = http
        .get(s.url("/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["issuer"], s.base);
    for (k, v) in [
        ("authorization_endpoint", "/oauth/authorize"),
        ("token_endpoint", "/oauth/token"),
        ("userinfo_endpoint", "/oauth/userinfo"),
        ("revocation_endpoint", "/oauth/revoke"),
        ("jwks_uri", "/oauth/jwks"),
    ] {
        assert_eq!(doc[k], s.url(v));
    }
    assert_eq!(
        doc["code_challenge_methods_supported"],
        serde_json::json!(["S256"])
    );
    assert_eq!(
        doc["id_token_signing_alg_values_supported"],
        serde_json::json!(["RS256"])
    );
    assert_eq!(doc["response_types_supported"], serde_json::json!(["code"]));
    for k in [
        "scopes_supported",
        "claims_supported",
        "grant_types_supported",
        "subject_types_supported",
        "token_endpoint_auth_methods_supported",
    ] {
        assert!(doc[k].as_array().is_some_and(|a| !a.is_empty()), "{k}");
    }
    let jwks: Value = http
        .get(s.url("/oauth/jwks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    for private in ["d", "p", "q", "dp", "dq", "qi"] {
        assert!(keys[0].get(private).is_none(), "JWKS leaks {private}");
    }
    let first_kid = keys[0]["kid"].as_str().unwrap().to_string();
    // Both documents carry an ETag; sending it back answers 304 with no body.
    let etag_of = |path: &'static str, etag: Option<String>| {
        let (http, url) = (http.clone(), s.url(path));
        async move {
            let mut req = http.get(url);
            if let Some(e) = &etag {
                req = req.header("if-none-match", e);
            }
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            assert_eq!(
                r.headers()["cache-control"].to_str().unwrap(),
                "public, max-age=300"
            );
            let tag = r.headers()["etag"].to_str().unwrap().to_string();
            let body = r.bytes().await.unwrap();
            (status, tag, body.len())
        }
    };
    let mut jwks_etag = String::new();
    for path in ["/.well-known/openid-configuration", "/oauth/jwks"] {
        let (st, tag, len) = etag_of(path, None).await;
        assert!(st == 200 && len > 0 && tag.starts_with('"'), "{path}");
        let (st, again, len) = etag_of(path, Some(tag.clone())).await;
        assert_eq!((st, len), (304, 0), "{path}: not modified");
        assert_eq!(again, tag);
        let (st, _, _) = etag_of(path, Some("\"other\"".into())).await;
        assert_eq!(st, 200, "{path}: another tag gets the body");
        jwks_etag = tag;
    }

    let mut browser = Browser::new();
    let code = code_for(&s, &mut browser, &app, &[("nonce", "n-1")]).await;
    let t = token_call(
        &s,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
        ],
        Some((&app, &secret)),
    )
    .await;
    let old_token = t.1["id_token"].as_str().unwrap().to_string();
    let verify = |token: &str, jwks: &Value| {
        let header = jsonwebtoken::decode_header(token).unwrap();
        let kid = header.kid.clone().unwrap();
        let jwk = jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kid"] == kid.as_str())
            .expect("kid in JWKS");
        let key = jsonwebtoken::DecodingKey::from_rsa_components(
            jwk["n"].as_str().unwrap(),
            jwk["e"].as_str().unwrap(),
        )
        .unwrap();
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        validation.set_audience(&["app-one"]);
        validation.set_issuer(&[s.base.as_str()]);
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation).unwrap();
        (kid, data.claims)
    };
    let (kid, claims) = verify(&old_token, &jwks);
    assert_eq!(kid, first_kid);
    assert_eq!(claims["nonce"], "n-1");
    for c in [
        "iss",
        "sub",
        "aud",
        "exp",
        "iat",
        "auth_time",
        "at_hash",
        "email",
        "name",
    ] {
        assert!(claims.get(c).is_some(), "id_token lacks {c}");
    }

    // Rotation: new tokens use the new key; the old public key stays published.
    s.admin(pictor::ops::AdminRequest::KeysRotate);
    let jwks: Value = http
        .get(s.url("/oauth/jwks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2);
    let (st, tag, _) = etag_of("/oauth/jwks", Some(jwks_etag.clone())).await;
    assert!(
        st == 200 && tag != jwks_etag,
        "a rotation changes the JWKS and its tag"
    );
    let code = code_for(&s, &mut browser, &app, &[]).await;
    let t = token_call(
        &s,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
        ],
        Some((&app, &secret)),
    )
    .await;
    let (new_kid, _) = verify(t.1["id_token"].as_str().unwrap(), &jwks);
    assert_ne!(new_kid, first_kid);
    assert_eq!(
        verify(&old_token, &jwks).0,
        first_kid,
        "old tokens still verify"
    );
    // Once every token the old key signed has expired, it leaves the JWKS.
    s.clock.advance(2 * 86_400_000);
    s.store().purge_oauth(s.clock.now()).unwrap();
    let jwks: Value = http
        .get(s.url("/oauth/jwks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 1);
    assert_eq!(jwks["keys"][0]["kid"], new_kid.as_str());
    s.stop().await;
}
