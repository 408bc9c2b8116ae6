//! Bounded reads of what remote servers send (the hub, render backends): every body is read
//! within a cap fitting its kind and refused as soon as it is known to pass it. Files are
//! bounded by `pictor_core::files`, re-exported here.
//!
//! | what | cap |
//! |---|---|
//! | the hub's revision listing | [`LISTING_MAX`] 16 MiB |
//! | a render backend's JSON answer (pictures in base64 included) | [`BACKEND_ANSWER_MAX`] 128 MiB |
//! | a render backend's small JSON answers (progress, queue, history) | [`BACKEND_STATUS_MAX`] 4 MiB |

pub use pictor_core::files::*;

/// The hub's listing of a revision's files (a few KiB to a few hundred for real repositories).
pub const LISTING_MAX: usize = 16 << 20;
/// A render backend's answer carrying pictures (A1111's and OpenAI's base64 JSON, ComfyUI's
/// `/view`): a 2048² PNG in base64 is ~16 MiB; batches of a few fit.
pub const BACKEND_ANSWER_MAX: usize = 128 << 20;
/// A render backend's status answers (progress, queue, history, a refusal's text).
pub const BACKEND_STATUS_MAX: usize = 4 << 20;

/// A remote answer's body that could not be read within its cap.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("{what} is larger than the {} Pictor reads", size_text(*cap as u64))]
    TooLarge { what: &'static str, cap: usize },
    #[error("{0}")]
    Transport(#[from] reqwest::Error),
}

impl BodyError {
    pub fn is_timeout(&self) -> bool {
        matches!(self, BodyError::Transport(e) if e.is_timeout())
    }
}

/// Reads an HTTP answer's body, refusing it as soon as it is known to pass `cap` bytes (by its
/// `Content-Length`, or as it streams in), so no more than `cap` bytes are ever held.
pub async fn body(
    mut resp: reqwest::Response,
    cap: usize,
    what: &'static str,
) -> Result<Vec<u8>, BodyError> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(BodyError::TooLarge { what, cap });
    }
    let mut out = Vec::with_capacity(resp.content_length().unwrap_or(0) as usize);
    while let Some(chunk) = resp.chunk().await? {
        if out.len() + chunk.len() > cap {
            return Err(BodyError::TooLarge { what, cap });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// [`body`] parsed as JSON of type `T`; parse errors are `Err(String)` naming `what`.
pub async fn json<T: serde::de::DeserializeOwned>(
    resp: reqwest::Response,
    cap: usize,
    what: &'static str,
) -> Result<T, String> {
    let bytes = body(resp, cap, what).await.map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{what} is not readable: {e}"))
}
