//! Pictor's procedural painter: a picture of the prompt's scene from its words, deterministic by
//! seed, on the CPU without model weights ([`procedural`]); the style passes ([`style`]), text in
//! pictures ([`text`]), instruction edits done as exact pixel operations and content edits
//! ([`edit`]) and the rule-based prompt enhancer ([`enhance`]).
//!
//! Depends on `pictor-core` only (the `Renderer` trait and the job-facing types); it knows
//! nothing of HTTP, accounts or the store.

pub mod edit;
pub mod enhance;
pub mod procedural;
pub mod style;
pub mod text;

pub use procedural::ProceduralRenderer;
pub use style::Style;

// What the painter's modules use of the shared crate, under the names they use (`super::…`).
use pictor_core::{
    EditSpec, GenerateSpec, Model, Picture, Ratio, RenderControl, RenderError, Renderer,
    SceneReport, decode, encode, infotext, watermark,
};
#[cfg(test)]
use pictor_core::{PngParameters, finish};
