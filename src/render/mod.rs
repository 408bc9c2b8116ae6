//! Rendering in the server: the engines' crates seen from one place, plus what is the server's
//! own — the bounded blocking pool ([`pool`]), inference servers ([`backends`]), what draws each
//! tier ([`tiers`]), avatars and the test hooks ([`faults`]).
//!
//! - `pictor-core` (re-exported here): the [`Renderer`] trait, pictures, specs, errors, upload
//!   decoding, PNG encoding, the watermark;
//! - `pictor-painter`: the procedural painter ([`procedural`], [`style`], [`edit`], [`text`],
//!   [`enhance`]);
//! - `pictor-diffusion` (feature `diffusion`): the Stable Diffusion engine ([`diffusion`]).
//!
//! Everything here is synchronous and CPU-bound; callers run it on the bounded blocking pool
//! (`render::pool`), never on async threads.

pub mod avatar;
pub mod backends;
pub mod faults;
pub mod pool;
pub mod tiers;

pub use pictor_core::*;
#[cfg(feature = "diffusion")]
pub use pictor_diffusion as diffusion;
pub use pictor_painter::{edit, enhance, procedural, style, text};

pub use pool::RenderPool;
pub use procedural::ProceduralRenderer;
pub use style::Style;
