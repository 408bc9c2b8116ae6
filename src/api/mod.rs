//! The image API of seed 000 under `/api/pictor/`: generate, edit, jobs, me, models, the map,
//! the generated OpenAPI document and its interactive page.

pub mod account;
pub mod body;
pub mod error;
pub mod images;
pub mod jobs;
pub mod openai;
pub mod schema;
pub mod security;

use poem::http::Method;
use poem::{Endpoint, EndpointExt, IntoResponse, Request, Response, Route};
use poem_openapi::{OpenApiService, Tags};
use serde_json::Value;

use self::account::{AccountApi, ApiMap, EndpointInfo};
use self::error::{codes, error_response, json_response};
use self::images::{EditFormApi, ImagesApi};
use self::jobs::JobsApi;
use self::openai::{OpenAiApi, OpenAiEditApi};

/// Longest prompt or instruction, in characters.
pub const MAX_PROMPT_CHARS: usize = 4000;
/// Largest photo accepted by `/v1/edit`: 20 MiB.
pub const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;
/// Largest request body: the photo plus room for the multipart framing and the prompt.
pub const MAX_BODY_BYTES: usize = MAX_IMAGE_BYTES + 256 * 1024;

pub const PREFIX: &str = "/api/pictor";

#[derive(Tags)]
pub enum ApiTags {
    /// Create generation and edit jobs.
    Images,
    /// Poll jobs.
    Jobs,
    /// Profile, models and the interface map.
    Account,
    /// OpenAI's Images API, served by Pictor: point an OpenAI client at
    /// `{server}/openai/v1` (or `{server}/api/pictor/openai/v1`) with a `vx_…` key as its API
    /// key. Errors here have OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`.
    #[oai(rename = "OpenAI-compatible")]
    OpenAi,
}

type Apis = (
    ImagesApi,
    EditFormApi,
    JobsApi,
    AccountApi,
    OpenAiApi,
    OpenAiEditApi,
);
/// The operations without a multipart body.
type PlainApis = (ImagesApi, JobsApi, AccountApi, OpenAiApi);

fn service(public_url: &str, map: ApiMap) -> OpenApiService<Apis, ()> {
    described(
        (
            ImagesApi,
            EditFormApi,
            JobsApi,
            AccountApi { map },
            OpenAiApi,
            OpenAiEditApi,
        ),
        public_url,
    )
}

/// The document without its multipart operation (`POST /v1/edit`; `POST /v1/edit/raw` does the
/// same job), for client generators that cannot send forms, such as progenitor.
fn plain_service(public_url: &str, map: ApiMap) -> OpenApiService<PlainApis, ()> {
    described(
        (ImagesApi, JobsApi, AccountApi { map }, OpenAiApi),
        public_url,
    )
}

fn described<T: poem_openapi::OpenApi>(apis: T, public_url: &str) -> OpenApiService<T, ()> {
    OpenApiService::new(apis, "Pictor image API", env!("CARGO_PKG_VERSION"))
        .description(include_str!("../../assets/api-description.md"))
        .server(format!("{public_url}{PREFIX}"))
}

/// Builds the map of the interface from the OpenAPI document itself, so it cannot drift.
fn build_map(spec: &str, public_url: &str) -> ApiMap {
    let mut endpoints = Vec::new();
    if let Ok(Value::Object(doc)) = serde_json::from_str::<Value>(spec)
        && let Some(Value::Object(paths)) = doc.get("paths")
    {
        for (path, ops) in paths {
            let Value::Object(ops) = ops else { continue };
            for (method, op) in ops {
                endpoints.push(EndpointInfo {
                    method: method.to_uppercase(),
                    path: format!("{PREFIX}{path}"),
                    summary: op
                        .get("summary")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    auth: op
                        .get("security")
                        .and_then(Value::as_array)
                        .is_some_and(|a| !a.is_empty()),
                });
            }
        }
    }
    for (method, path, summary) in [
        (
            "GET",
            "/api/pictor/openapi.json",
            "The OpenAPI 3 document of this interface",
        ),
        ("GET", "/api/pictor/docs", "Interactive documentation page"),
        (
            "GET",
            "/files/{name}.png",
            "A finished picture (direct, unguessable link from `photo_url`)",
        ),
    ] {
        endpoints.push(EndpointInfo {
            method: method.into(),
            path: path.into(),
            summary: summary.into(),
            auth: false,
        });
    }
    ApiMap {
        ok: true,
        name: "Pictor image API".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        openapi_url: format!("{public_url}{PREFIX}/openapi.json"),
        docs_url: format!("{public_url}{PREFIX}/docs"),
        endpoints,
    }
}

/// The OpenAPI document as served (used by the drift test and `pictor openapi`); with
/// `multipart: false`, without the operation whose body is a multipart form.
pub fn spec(public_url: &str, multipart: bool) -> String {
    let map = interface_map(public_url);
    if multipart {
        service(public_url, map).spec()
    } else {
        plain_service(public_url, map).spec()
    }
}

/// The map of the interface, built from a first rendering of the document.
fn interface_map(public_url: &str) -> ApiMap {
    build_map(&service(public_url, placeholder_map()).spec(), public_url)
}

fn placeholder_map() -> ApiMap {
    ApiMap {
        ok: true,
        name: String::new(),
        version: String::new(),
        openapi_url: String::new(),
        docs_url: String::new(),
        endpoints: vec![],
    }
}

/// All routes under `/api/pictor` (absolute paths), with body limits and JSON errors.
pub fn routes(public_url: &str) -> impl Endpoint<Output = Response> + use<> {
    let map = interface_map(public_url);
    let allow = std::sync::Arc::new(AllowTable::from_map(&map));
    // Both documents are made once; each request sends a shared copy.
    let plain = bytes::Bytes::from(plain_service(public_url, map.clone()).spec());
    let api = service(public_url, map);
    let full = bytes::Bytes::from(api.spec());
    let spec = poem::endpoint::make_sync(move |req| {
        let multipart = req
            .uri()
            .query()
            .unwrap_or_default()
            .split('&')
            .all(|pair| pair != "multipart=false");
        let text = if multipart { &full } else { &plain };
        poem::Body::from(text.clone())
            .with_header(
                poem::http::header::CONTENT_TYPE,
                "application/json; charset=utf-8",
            )
            .into_response()
    });
    // The documentation page: Swagger UI with Pictor's title, icon and a way back to the site,
    // in the visitor's language, made per request around the signed-in person.
    let page = std::sync::Arc::new(DocsPage::new(&api.swagger_ui_html()));
    let docs = api.swagger_ui().around(move |ep, req| {
        let page = page.clone();
        async move {
            if matches!(req.uri().path(), "" | "/") {
                return Ok(page.render(&req));
            }
            ep.call(req).await.map(IntoResponse::into_response)
        }
    });
    Route::new()
        .at(format!("{PREFIX}/openapi.json"), spec)
        .nest(format!("{PREFIX}/docs"), docs)
        .nest(PREFIX, api)
        .around(move |ep, req| {
            let allow = allow.clone();
            async move {
                let path = req.uri().path().to_string();
                let mut resp = guard(ep, req).await;
                // RFC 9110 §15.5.6: a 405 lists the methods the resource supports.
                if resp.status() == poem::http::StatusCode::METHOD_NOT_ALLOWED
                    && let Some(methods) = allow.methods(&path)
                    && let Ok(v) = poem::http::HeaderValue::from_str(&methods)
                {
                    resp.headers_mut().insert(poem::http::header::ALLOW, v);
                }
                Ok(resp)
            }
        })
}

/// Swagger UI's page, made Pictor's: its title, icon, viewport, a bar that links back to the site
/// (the playground, the account page where API keys are made) with the language switch, a note
/// in the visitor's language on how to call the API from here, and the picture of the last
/// finished job "Try it out" fetched. Signed in, "Try it out" runs as that person: the page
/// carries the session's CSRF token and adds it as `X-CSRF-Token` to its own requests that bring
/// no key (see `security::session_principal`).
struct DocsPage {
    /// Swagger UI's page up to where the per-request part goes, and after it.
    head: String,
    tail: String,
}

impl DocsPage {
    fn new(html: &str) -> DocsPage {
        let style = r#"<meta name="viewport" content="width=device-width, initial-scale=1">
    <link rel="icon" href="/static/icon.svg" type="image/svg+xml">
    <title>Pictor image API · Pictor</title>
    <style>
      .pictor-bar { display: flex; gap: .5rem 1.25rem; align-items: center; flex-wrap: wrap; padding: .75rem 1.25rem; border-bottom: 1px solid #d9dce3; font-family: system-ui, sans-serif; background: #f5f6f9; }
      .pictor-bar a { color: #4338ca; }
      .pictor-bar .brand { font-weight: 700; color: #111827; text-decoration: none; font-size: 1.1rem; }
      .pictor-bar .spacer { flex: 1; }
      .pictor-intro { max-width: 1460px; margin: 1rem auto 0; padding: .75rem 1.25rem; font-family: system-ui, sans-serif; border-left: 4px solid #4338ca; background: #eef0fb; box-sizing: border-box; }
      .pictor-intro p { margin: .25rem 0; }
      .pictor-picture { position: fixed; right: 1rem; bottom: 1rem; z-index: 10; background: #fff; border: 1px solid #d9dce3; border-radius: 8px; padding: .5rem; box-shadow: 0 4px 16px rgba(0,0,0,.15); font-family: system-ui, sans-serif; font-size: .9rem; max-width: min(22rem, 45vw); }
      .pictor-picture img { display: block; max-width: 100%; max-height: 40vh; margin-top: .35rem; }
      .pictor-picture button { float: right; border: 0; background: none; font-size: 1.1rem; cursor: pointer; }
    </style>"#;
        // The title comes before the inlined script; the page's `<div id="ui">` after it (the
        // script's own text may contain either string, so the insert goes before the last one).
        let html = html.replacen("<title>Swagger UI</title>", style, 1);
        // Swagger UI's own options: the request and response hooks this page defines (the curl
        // line it shows is the request as written, without the session's CSRF header).
        let html = html.replacen(
            "deepLinking: true,",
            "deepLinking: true,\n        requestInterceptor: window.pictorRequest,\n        responseInterceptor: window.pictorResponse,\n        showMutatedRequest: false,",
            1,
        );
        let marker = r#"<div id="ui"></div>"#;
        match html.rfind(marker) {
            Some(i) => DocsPage {
                head: html[..i].to_owned(),
                tail: html[i..].to_owned(),
            },
            None => DocsPage {
                head: html,
                tail: String::new(),
            },
        }
    }

    fn render(&self, req: &Request) -> Response {
        use crate::web::i18n::{Lang, negotiate, tr_in};
        let lang = negotiate(req.headers());
        let t = |key: &str| tr_in(lang, key);
        let state = req.data::<crate::state::AppState>();
        let signed_in = state.and_then(|st| {
            let jar = req.cookie();
            crate::auth::session::principal(st, jar)
                .map(|p| (p.user.email, crate::auth::session::csrf_token(st, jar)))
        });
        let esc = |s: &str| {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
        };
        let other = Lang::ALL
            .into_iter()
            .find(|l| *l != lang)
            .unwrap_or(Lang::En);
        let switch = format!(
            r#"<a href="/lang?to={}&amp;back=/api/pictor/docs" lang="{}" hreflang="{}">{}</a>"#,
            other.code(),
            other.code(),
            other.code(),
            other.name()
        );
        let (how, csrf) = match &signed_in {
            Some((email, csrf)) => (
                t("docs.signed_in").replacen("{}", &format!("<strong>{}</strong>", esc(email)), 1),
                csrf.as_str(),
            ),
            None => (t("docs.signed_out").to_owned(), ""),
        };
        let english = match lang {
            Lang::En => String::new(),
            _ => format!("<p>{}</p>", t("docs.reference_english")),
        };
        let dynamic = format!(
            r#"<header class="pictor-bar" lang="{code}"><a class="brand" href="/">Pictor</a><span>{api}</span><span class="spacer"></span><a href="/playground">{playground}</a><a href="/account">{account}</a><a href="/api/pictor/openapi.json">openapi.json</a>{switch}</header>
<section class="pictor-intro" id="pictor-intro" lang="{code}" data-csrf="{csrf}"><p>{how}</p>{english}</section>
<aside class="pictor-picture" id="pictor-picture" lang="{code}" hidden><button type="button" aria-label="{close}">×</button><span>{picture}</span> <a id="pictor-picture-link" href="" target="_blank" rel="noopener"><img id="pictor-picture-img" alt="{picture}"></a></aside>
<script>
  (function () {{
    const csrf = document.getElementById('pictor-intro').dataset.csrf;
    const box = document.getElementById('pictor-picture');
    box.querySelector('button').addEventListener('click', () => {{ box.hidden = true; }});
    // Signed in: the page's own requests without a key go as this person.
    window.pictorRequest = (req) => {{
      const url = new URL(req.url, window.location.href);
      const h = req.headers || {{}};
      const keyed = Object.keys(h).some((k) => /^(authorization|x-api-key)$/i.test(k));
      if (csrf && url.origin === window.location.origin && !keyed) {{
        h['X-CSRF-Token'] = csrf;
        req.headers = h;
      }}
      return req;
    }};
    // A finished job's picture is shown, not only linked.
    window.pictorResponse = (res) => {{
      try {{
        const body = res.body && typeof res.body === 'object' ? res.body : JSON.parse(res.text || 'null');
        const url = body && body.photo_url;
        if (typeof url === 'string' && /^https?:\/\//.test(url)) {{
          document.getElementById('pictor-picture-img').src = url;
          document.getElementById('pictor-picture-link').href = url;
          box.hidden = false;
        }}
      }} catch (e) {{ /* not JSON */ }}
      return res;
    }};
  }})();
</script>
"#,
            code = lang.code(),
            api = t("docs.image_api"),
            playground = t("nav.playground"),
            account = t("docs.account"),
            close = t("docs.close"),
            picture = t("docs.picture"),
        );
        let mut resp =
            poem::web::Html(format!("{}{dynamic}{}", self.head, self.tail)).into_response();
        let h = resp.headers_mut();
        // One person's page (their CSRF token): never stored by a cache.
        h.insert(
            poem::http::header::CACHE_CONTROL,
            poem::http::HeaderValue::from_static("no-store"),
        );
        h.insert(
            poem::http::header::VARY,
            poem::http::HeaderValue::from_static("Cookie, Accept-Language"),
        );
        h.insert(
            "x-frame-options",
            poem::http::HeaderValue::from_static("DENY"),
        );
        h.insert(
            poem::http::header::CONTENT_LANGUAGE,
            poem::http::HeaderValue::from_static(lang.code()),
        );
        resp
    }
}

/// The methods of each path of the interface, from the map (and so from the OpenAPI document).
struct AllowTable(Vec<(Vec<String>, String)>);

impl AllowTable {
    fn from_map(map: &ApiMap) -> AllowTable {
        let mut by_path: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for e in &map.endpoints {
            let methods = by_path.entry(e.path.clone()).or_default();
            methods.push(e.method.clone());
            if e.method == "GET" {
                methods.push("HEAD".into());
            }
        }
        AllowTable(
            by_path
                .into_iter()
                .map(|(path, methods)| {
                    (
                        path.split('/').map(str::to_string).collect(),
                        methods.join(", "),
                    )
                })
                .collect(),
        )
    }

    fn methods(&self, path: &str) -> Option<String> {
        let segments: Vec<&str> = path.split('/').collect();
        self.0
            .iter()
            .find(|(template, _)| {
                template.len() == segments.len()
                    && template
                        .iter()
                        .zip(&segments)
                        .all(|(t, s)| t == s || (t.starts_with('{') && t.ends_with('}')))
            })
            .map(|(_, m)| m.clone())
    }
}

/// Bodies larger than this are not drained before the 413 (the connection is just closed).
const DRAIN_CAP: u64 = 64 * 1024 * 1024;
/// How long a refused upload may go on sending before the connection is closed.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(60);

/// Body limit + uniform JSON errors for everything under `/api/pictor`.
async fn guard<E: Endpoint>(ep: std::sync::Arc<E>, mut req: Request) -> Response {
    let path = req.uri().path().to_string();
    if req.method() != Method::GET && req.method() != Method::HEAD {
        if crate::app::limits::declared_length(&req).is_some_and(|n| n > DRAIN_CAP) {
            return if is_openai(&path) {
                openai::translate(too_large()).await
            } else {
                too_large()
            };
        }
        // Chunked bodies have no length up front: both kinds are read with a cap, so both get the
        // JSON 413. Past the limit the rest is read and dropped (up to 64 MiB) so the client,
        // still sending, gets to read the 413 instead of a broken pipe.
        use crate::app::limits::{BodyRead, read_capped_draining};
        let refused = match read_capped_draining(
            req.take_body(),
            MAX_BODY_BYTES,
            DRAIN_CAP,
            DRAIN_TIME,
        )
        .await
        {
            BodyRead::Ok(bytes) => {
                req.set_body(bytes);
                None
            }
            BodyRead::TooLarge => Some(too_large()),
            BodyRead::Failed(message) => Some(json_response(codes::INVALID_REQUEST, &message)),
        };
        if let Some(resp) = refused {
            return if is_openai(&path) {
                openai::translate(resp).await
            } else {
                resp
            };
        }
    }
    let resp = match ep.call(req).await {
        Ok(resp) => resp.into_response(),
        Err(err) => error_response(err, &path),
    };
    if is_openai(&path) {
        openai::translate(resp).await
    } else {
        resp
    }
}

/// Whether a path is one of the OpenAI-compatible operations (errors in OpenAI's shape).
fn is_openai(path: &str) -> bool {
    path.starts_with(&format!("{PREFIX}{}/", openai::PATH))
}

/// `/openai/v1/…` as `/api/pictor/openai/v1/…`: OpenAI clients are given a base URL ending in
/// `/v1`, and `{server}/openai/v1` is the short one to type.
pub struct OpenAiAlias<E>(pub std::sync::Arc<E>);

impl<E: Endpoint> Endpoint for OpenAiAlias<E> {
    type Output = E::Output;

    async fn call(&self, mut req: Request) -> poem::Result<Self::Output> {
        let rest = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        *req.uri_mut() = format!("{PREFIX}{rest}")
            .parse()
            .map_err(|_| poem::Error::from_status(poem::http::StatusCode::BAD_REQUEST))?;
        self.0.call(req).await
    }
}

/// 413 for a body we stopped reading: the connection is closed after the answer, since the rest
/// of the body may still be in flight and the connection cannot be reused.
fn too_large() -> Response {
    let mut resp = json_response(codes::IMAGE_TOO_LARGE, "the request body is over 20 MiB");
    resp.headers_mut().insert(
        poem::http::header::CONNECTION,
        poem::http::HeaderValue::from_static("close"),
    );
    resp
}
