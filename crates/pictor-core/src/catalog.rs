//! The model catalogue (ids, display names, aliases, default prices) and output ratios. Shared by
//! the store (prices keyed by model id), the job service and the renderers.

use std::fmt;

/// One of the three models of the API. Prices are settings (see `store::settings`); the
/// defaults here seed them on first start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    Fast,
    Artist,
    Plus,
}

impl Model {
    pub const ALL: [Model; 3] = [Model::Fast, Model::Artist, Model::Plus];

    /// The canonical id used in requests and responses.
    pub fn id(self) -> &'static str {
        match self {
            Model::Fast => "fast",
            Model::Artist => "artist",
            Model::Plus => "0.2plus",
        }
    }

    pub fn display_name(self) -> &'static str {
        match self {
            Model::Fast => "Standard",
            Model::Artist => "PRO",
            Model::Plus => "Premium",
        }
    }

    /// All names that select this model (case-insensitive), the id first.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Model::Fast => &["fast", "standard", "std"],
            Model::Artist => &["artist", "pro"],
            Model::Plus => &["0.2plus", "premium", "prem"],
        }
    }

    pub fn default_price(self) -> u32 {
        match self {
            Model::Fast => 1,
            Model::Artist => 5,
            Model::Plus => 10,
        }
    }

    /// Length in pixels of the long side of the output.
    pub fn long_side(self) -> u32 {
        match self {
            Model::Fast => 1024,
            Model::Artist => 1536,
            Model::Plus => 2048,
        }
    }

    /// Resolves an id or alias, ignoring case and surrounding whitespace.
    pub fn parse(name: &str) -> Option<Model> {
        let name = name.trim();
        Model::ALL
            .into_iter()
            .find(|m| m.aliases().iter().any(|a| a.eq_ignore_ascii_case(name)))
    }

    /// Exact output size for a ratio. `Ratio::Auto` must be resolved first; it is treated as 1:1.
    pub fn dimensions(self, ratio: Ratio) -> (u32, u32) {
        let (a, b) = ratio.parts();
        let long = self.long_side();
        // The short side is rounded to the nearest pixel, so 3:2 at 1024 is 1024x683.
        let short =
            ((long as u64 * a.min(b) as u64 * 2 + a.max(b) as u64) / (2 * a.max(b) as u64)) as u32;
        if a >= b { (long, short) } else { (short, long) }
    }
}

// Stored and sent as the model id; any alias is read back as its model.
impl serde::Serialize for Model {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

impl<'de> serde::Deserialize<'de> for Model {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Model::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown model {name:?}")))
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// Output aspect ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ratio {
    Square,
    Wide,
    Tall,
    Landscape32,
    Portrait23,
    Landscape43,
    Portrait34,
    /// Picked from the prompt by [`Ratio::resolve_auto`].
    Auto,
}

impl Ratio {
    pub const ALL: [Ratio; 8] = [
        Ratio::Square,
        Ratio::Wide,
        Ratio::Tall,
        Ratio::Landscape32,
        Ratio::Portrait23,
        Ratio::Landscape43,
        Ratio::Portrait34,
        Ratio::Auto,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Ratio::Square => "1:1",
            Ratio::Wide => "16:9",
            Ratio::Tall => "9:16",
            Ratio::Landscape32 => "3:2",
            Ratio::Portrait23 => "2:3",
            Ratio::Landscape43 => "4:3",
            Ratio::Portrait34 => "3:4",
            Ratio::Auto => "auto",
        }
    }

    pub fn parse(s: &str) -> Option<Ratio> {
        let s = s.trim();
        Ratio::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s))
    }

    /// The concrete ratio nearest to a `width`×`height` picture's (in log space).
    pub fn closest(width: u32, height: u32) -> Ratio {
        let want = (f64::from(width.max(1)) / f64::from(height.max(1))).ln();
        Ratio::ALL
            .into_iter()
            .filter(|r| *r != Ratio::Auto)
            .min_by(|a, b| {
                let d = |r: &Ratio| {
                    let (w, h) = r.parts();
                    ((f64::from(w) / f64::from(h)).ln() - want).abs()
                };
                d(a).total_cmp(&d(b))
            })
            .unwrap_or(Ratio::Square)
    }

    /// (width part, height part); `Auto` counts as 1:1.
    pub fn parts(self) -> (u32, u32) {
        match self {
            Ratio::Square | Ratio::Auto => (1, 1),
            Ratio::Wide => (16, 9),
            Ratio::Tall => (9, 16),
            Ratio::Landscape32 => (3, 2),
            Ratio::Portrait23 => (2, 3),
            Ratio::Landscape43 => (4, 3),
            Ratio::Portrait34 => (3, 4),
        }
    }

    /// Turns `Auto` into a concrete ratio from words in the prompt; other ratios are returned as is.
    pub fn resolve_auto(self, prompt: &str) -> Ratio {
        if self != Ratio::Auto {
            return self;
        }
        let p = prompt.to_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| p.contains(w));
        if has(&[
            "panorama",
            "panoramic",
            "cinematic",
            "widescreen",
            "панорам",
            "кинематограф",
        ]) {
            Ratio::Wide
        } else if has(&[
            "phone wallpaper",
            "story",
            "stories",
            "вертикал",
            "обои на телефон",
        ]) {
            Ratio::Tall
        } else if has(&[
            "portrait",
            "poster",
            "book cover",
            "портрет",
            "постер",
            "плакат",
            "обложк",
        ]) {
            Ratio::Portrait23
        } else if has(&["landscape", "пейзаж"]) {
            Ratio::Landscape32
        } else {
            Ratio::Square
        }
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a seed's noise comes from (the diffusion engine's `noise` module draws it).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum NoiseKind {
    /// PyTorch's CPU generator: diffusers with a CPU generator, ComfyUI, A1111 "RNG: CPU".
    #[default]
    TorchCpu,
    /// NVIDIA-GPU Philox noise: AUTOMATIC1111's default ("RNG: GPU" on NVIDIA, "RNG: NV").
    A1111Gpu,
}

impl NoiseKind {
    /// `torch-cpu` or `a1111-gpu` (also the A1111 names `CPU`, `GPU`, `NV`).
    pub fn parse(name: &str) -> Option<NoiseKind> {
        match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "torch-cpu" | "cpu" => Some(NoiseKind::TorchCpu),
            "a1111-gpu" | "gpu" | "nv" | "cuda" => Some(NoiseKind::A1111Gpu),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NoiseKind::TorchCpu => "torch-cpu",
            NoiseKind::A1111Gpu => "a1111-gpu",
        }
    }

    /// AUTOMATIC1111's `RNG` infotext value for this noise.
    pub fn a1111_rng(self) -> &'static str {
        match self {
            NoiseKind::TorchCpu => "CPU",
            NoiseKind::A1111Gpu => "NV",
        }
    }
}

impl fmt::Display for NoiseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve_case_insensitively() {
        assert_eq!(Model::parse("PREM"), Some(Model::Plus));
        assert_eq!(Model::parse(" Std "), Some(Model::Fast));
        assert_eq!(Model::parse("Pro"), Some(Model::Artist));
        assert_eq!(Model::parse("0.2PLUS"), Some(Model::Plus));
        assert_eq!(Model::parse("dall-e"), None);
    }

    #[test]
    fn dimensions_are_exact() {
        assert_eq!(Model::Fast.dimensions(Ratio::Square), (1024, 1024));
        assert_eq!(Model::Fast.dimensions(Ratio::Wide), (1024, 576));
        assert_eq!(Model::Fast.dimensions(Ratio::Tall), (576, 1024));
        assert_eq!(Model::Fast.dimensions(Ratio::Landscape32), (1024, 683));
        assert_eq!(Model::Fast.dimensions(Ratio::Portrait34), (768, 1024));
        assert_eq!(Model::Artist.dimensions(Ratio::Landscape32), (1536, 1024));
        assert_eq!(Model::Plus.dimensions(Ratio::Wide), (2048, 1152));
        assert_eq!(Model::Plus.dimensions(Ratio::Portrait23), (1365, 2048));
    }

    #[test]
    fn auto_ratio_reads_the_prompt() {
        assert_eq!(
            Ratio::Auto.resolve_auto("a panorama of the Alps"),
            Ratio::Wide
        );
        assert_eq!(Ratio::Auto.resolve_auto("портрет кота"), Ratio::Portrait23);
        assert_eq!(Ratio::Auto.resolve_auto("a cat"), Ratio::Square);
        assert_eq!(Ratio::Wide.resolve_auto("portrait"), Ratio::Wide);
    }
}
