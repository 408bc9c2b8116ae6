//! Rendering: the `Renderer` trait, the built-in procedural renderer, the model catalog,
//! upload decoding with limits, instruction edits, the watermark and PNG encoding.
//!
//! This is the only module that names the `image` crate. Everything here is synchronous and
//! CPU-bound; callers run it on the bounded blocking pool (`render::pool`), never on async threads.

pub mod avatar;
pub mod backends;
pub mod catalog;
pub mod decode;
pub mod edit;
pub mod encode;
pub mod enhance;
pub mod faults;
pub mod pool;
pub mod procedural;
pub mod style;
pub mod text;
pub mod watermark;

use std::fmt;

pub use catalog::{Model, Ratio};
pub use decode::{DecodeLimits, SourceInfo};
pub use pool::RenderPool;
pub use procedural::ProceduralRenderer;
pub use style::Style;

/// An RGBA picture produced by a renderer, before watermarking and encoding.
pub struct Picture(pub(crate) image::RgbaImage);

impl Picture {
    /// Builds a picture from raw RGBA8 pixels (`width * height * 4` bytes).
    pub fn from_rgba(width: u32, height: u32, pixels: Vec<u8>) -> Option<Picture> {
        image::RgbaImage::from_raw(width, height, pixels).map(Picture)
    }

    pub fn width(&self) -> u32 {
        self.0.width()
    }

    pub fn height(&self) -> u32 {
        self.0.height()
    }
}

impl fmt::Debug for Picture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Picture({}x{})", self.width(), self.height())
    }
}

/// What to draw for a text-to-image job.
#[derive(Debug, Clone)]
pub struct GenerateSpec {
    pub prompt: String,
    pub model: Model,
    pub ratio: Ratio,
    pub seed: u64,
}

/// What to do for an edit job: the stored upload and the instruction.
#[derive(Clone)]
pub struct EditSpec {
    /// The original uploaded bytes (PNG, JPEG or WebP), as received.
    pub source: Vec<u8>,
    pub instruction: String,
    pub seed: u64,
}

impl fmt::Debug for EditSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EditSpec")
            .field("source_len", &self.source.len())
            .field("instruction", &self.instruction)
            .field("seed", &self.seed)
            .finish()
    }
}

/// Why a render did not produce a picture. Each maps to a failed-job code in `jobs`.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The upload is not a PNG/JPEG/WebP we can decode, is broken, or exceeds the limits.
    #[error("invalid image: {0}")]
    InvalidImage(String),
    /// The edit instruction contains nothing we understand. The message lists what we do.
    #[error("{0}")]
    EditNotUnderstood(String),
    /// The backend is overloaded (queue full, 429/503 from a remote server).
    #[error("renderer overloaded: {0}")]
    Overloaded(String),
    /// Any other fault while generating or editing.
    #[error("render failed: {0}")]
    Failed(String),
}

/// A source of pictures. Implementations are synchronous and run on the blocking pool.
///
/// The built-in implementation is [`ProceduralRenderer`]; tests inject their own to make renders
/// fail or stall, and the model-backend work plugs remote inference servers in here.
pub trait Renderer: Send + Sync + 'static {
    /// Text to image. The picture must be exactly `spec.model.dimensions(spec.ratio)`.
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError>;
    /// Applies the instruction to the source image.
    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError>;
}

/// Metadata written into every PNG (`parameters` text chunk, AUTOMATIC1111 format).
#[derive(Debug, Clone)]
pub struct PngParameters {
    pub prompt: String,
    pub seed: u64,
    pub model: String,
    pub kind: &'static str,
}

/// Shrinks a picture so that its long side is at most `max_side` (never enlarges).
pub fn downscale(picture: Picture, max_side: u32) -> Picture {
    let (w, h) = (picture.width(), picture.height());
    let long = w.max(h);
    if max_side == 0 || long <= max_side {
        return picture;
    }
    let k = f64::from(max_side) / f64::from(long);
    let nw = ((f64::from(w) * k).round() as u32).max(1);
    let nh = ((f64::from(h) * k).round() as u32).max(1);
    Picture(image::imageops::resize(
        &picture.0,
        nw,
        nh,
        image::imageops::FilterType::Lanczos3,
    ))
}

/// Watermarks (when asked) and encodes the picture as PNG with a `parameters` chunk.
pub fn finish(
    mut picture: Picture,
    watermark: bool,
    params: &PngParameters,
) -> Result<Vec<u8>, RenderError> {
    if watermark {
        watermark::apply(&mut picture.0);
    }
    encode::png_with_parameters(&picture.0, params)
}
