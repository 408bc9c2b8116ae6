//! A JSON request body with field-by-field validation, so each bad field gets its own error code
//! (`invalid_prompt`, `invalid_model`, …) instead of a generic parse error. The published schema
//! is the `Object` type's; parsing goes through [`FromJsonBody`].

use poem::{Request, RequestBody};
use poem_openapi::payload::{ParsePayload, Payload};
use poem_openapi::registry::{MetaSchemaRef, Registry};
use poem_openapi::types::Type;
use serde_json::{Map, Value};

use super::error::{ApiFailure, codes};

pub trait FromJsonBody: Sized {
    fn from_json_body(object: &Map<String, Value>) -> Result<Self, ApiFailure>;
}

pub struct JsonBody<T>(pub T);

impl<T: Type + Send> Payload for JsonBody<T> {
    const CONTENT_TYPE: &'static str = "application/json";

    fn check_content_type(content_type: &str) -> bool {
        is_json_content_type(content_type)
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

impl<T: Type + FromJsonBody + Send> ParsePayload for JsonBody<T> {
    const IS_REQUIRED: bool = true;

    async fn from_request(_req: &Request, body: &mut RequestBody) -> poem::Result<Self> {
        let bytes = body.take()?.into_bytes().await?;
        let object = json_object(&bytes)?;
        T::from_json_body(&object).map(JsonBody).map_err(Into::into)
    }
}

/// Whether a `Content-Type` names JSON (`application/json` or `application/…+json`).
pub(crate) fn is_json_content_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A request body that must be one JSON object (shared by the API and the playground).
pub(crate) fn json_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiFailure> {
    if bytes.is_empty() {
        return Err(ApiFailure::new(
            codes::INVALID_REQUEST,
            "the request body is empty; send a JSON object",
        ));
    }
    // serde_json refuses nesting deeper than 128 levels, so hostile input stays bounded.
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiFailure::new(
            codes::INVALID_REQUEST,
            format!("the body is not valid JSON: {e}"),
        )
    })?;
    match value {
        Value::Object(object) => Ok(object),
        _ => Err(ApiFailure::new(
            codes::INVALID_REQUEST,
            "the body must be a JSON object",
        )),
    }
}

poem_openapi::impl_apirequest_for_payload!(JsonBody<T>, T: Type + FromJsonBody + Send);
