//! Diffusion models on the user's disk: what a folder or file is (its layout and architecture,
//! read from its configuration and tensor names, never from its file name). Fetching from the
//! Hugging Face hub is the server's (`pictor::models::hub`).
//!
//! Two layouts are understood:
//! - a **diffusers folder**: `model_index.json`, `unet/`, `vae/`, `text_encoder/` (+
//!   `text_encoder_2/` for SDXL), `tokenizer/` (+ `tokenizer_2/`), `scheduler/`, weights as
//!   `.safetensors`;
//! - a **single-file checkpoint** as AUTOMATIC1111 and ComfyUI users have them: one
//!   `.safetensors` with the original Stability key names (`model.diffusion_model.*`,
//!   `first_stage_model.*`, `cond_stage_model.*` / `conditioner.embedders.*`).
//!
//! Pickle weights (`.bin`, `.ckpt`, `.pt`) are refused: loading them can run code.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::files as bounded;

/// A Stable Diffusion architecture family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// SD 1.x (CLIP ViT-L text encoder, 768-wide context).
    Sd1,
    /// SD 2.x and SD-Turbo (OpenCLIP ViT-H, 1024-wide context).
    Sd2,
    /// SDXL and SDXL-Turbo (two text encoders, 2048-wide context, size conditioning).
    Sdxl,
    /// FLUX.1 (schnell, dev): CLIP-L + T5-XXL, a flow-matching transformer, a 16-channel VAE.
    Flux,
    /// Stable Diffusion 3 / 3.5 (Medium, Large, Large Turbo): CLIP-L + OpenCLIP-bigG + T5-XXL,
    /// the MMDiT (flow matching), a 16-channel VAE.
    Sd3,
}

impl Arch {
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Sd1 => "sd1",
            Arch::Sd2 => "sd2",
            Arch::Sdxl => "sdxl",
            Arch::Flux => "flux",
            Arch::Sd3 => "sd3",
        }
    }

    /// `sd1`, `sd2`, `sdxl`, `flux` or `sd3` (as [`as_str`](Self::as_str) writes them).
    pub fn parse(s: &str) -> Option<Arch> {
        [Arch::Sd1, Arch::Sd2, Arch::Sdxl, Arch::Flux, Arch::Sd3]
            .into_iter()
            .find(|a| a.as_str().eq_ignore_ascii_case(s.trim()))
    }

    /// How people name the architecture.
    pub fn title(self) -> &'static str {
        match self {
            Arch::Sd1 => "SD 1.x",
            Arch::Sd2 => "SD 2.x",
            Arch::Sdxl => "SDXL",
            Arch::Flux => "FLUX.1",
            Arch::Sd3 => "SD 3.x",
        }
    }

    /// A flow-matching transformer (FLUX.1, SD 3): one sampler, no UNet settings.
    pub fn is_transformer(self) -> bool {
        matches!(self, Arch::Flux | Arch::Sd3)
    }
}

/// What an installed model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A whole pipeline (text encoders, UNet, VAE): draws pictures.
    #[default]
    Pipeline,
    /// A tiny latent decoder (TAESD / TAESDXL, diffusers' `AutoencoderTiny`): attached to a
    /// pipeline's mapping to decode its pictures faster.
    TinyDecoder,
    /// A LoRA file (kohya/AUTOMATIC1111 or PEFT/diffusers): merged into a pipeline of its
    /// architecture for the jobs that ask for it (`<lora:name:weight>`, `loras`).
    Lora,
}

/// What a pipeline's UNet is made for, read off its input channels (the latents' 4, or 8 for
/// InstructPix2Pix, or 9 for inpainting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Draws from words (and edits by img2img).
    #[default]
    Text,
    /// Follows edit instructions (InstructPix2Pix): edits only.
    Instruct,
    /// Repaints a masked area (SD inpainting): edits only.
    Inpaint,
}

impl Role {
    /// The role of a UNet taking `in_channels` for `latent_channels`-channel latents.
    pub fn of(in_channels: u64, latent_channels: u64) -> Option<Role> {
        match in_channels {
            c if c == latent_channels => Some(Role::Text),
            c if c == 2 * latent_channels => Some(Role::Instruct),
            c if c == 2 * latent_channels + 1 => Some(Role::Inpaint),
            _ => None,
        }
    }

    pub fn is_text(&self) -> bool {
        *self == Role::Text
    }

    /// For people: "instruction editing (InstructPix2Pix)".
    pub fn title(self) -> &'static str {
        match self {
            Role::Text => "text to image",
            Role::Instruct => "instruction editing (InstructPix2Pix)",
            Role::Inpaint => "inpainting",
        }
    }
}

/// A model family: the architecture plus what its training asks of a run (Turbo models are
/// distilled for 1–4 steps without guidance). Decides the preset a tier mapping starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Family {
    #[serde(rename = "sd1")]
    Sd1,
    #[serde(rename = "sd2")]
    Sd2,
    #[serde(rename = "sd-turbo")]
    SdTurbo,
    #[serde(rename = "sdxl")]
    Sdxl,
    #[serde(rename = "sdxl-turbo")]
    SdxlTurbo,
    /// FLUX.1-schnell: timestep-distilled, 1–4 steps, no guidance input.
    #[serde(rename = "flux-schnell")]
    FluxSchnell,
    /// FLUX.1-dev: guidance-distilled (a guidance input, no negative prompt).
    #[serde(rename = "flux-dev")]
    FluxDev,
    /// SD 3 / 3.5 Medium and Large: classifier-free guidance with a negative prompt.
    #[serde(rename = "sd3")]
    Sd3,
    /// SD 3.5 Large Turbo: 4 steps, no guidance.
    #[serde(rename = "sd3-turbo")]
    Sd3Turbo,
}

/// How a family is run unless the operator says otherwise (values as the configuration file
/// writes them: see docs/models.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preset {
    pub steps: u32,
    pub guidance: f64,
    /// Pictor's sampler id (`euler_a`, `dpm++_2m`, …).
    pub sampler: &'static str,
    /// `automatic`, `karras` or `uniform`.
    pub schedule: &'static str,
    /// Long side rendered, pixels.
    pub size: u32,
    /// `trailing` where the model was distilled to start from the last timestep.
    pub timestep_spacing: Option<&'static str>,
    /// Whether a tiny decoder for the family is attached when one is installed.
    pub tiny_decoder: bool,
    pub negative_prompt: &'static str,
    /// InstructPix2Pix: how closely the edit keeps the source picture.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_guidance: Option<f64>,
}

impl Family {
    pub const ALL: [Family; 9] = [
        Family::Sd1,
        Family::Sd2,
        Family::SdTurbo,
        Family::Sdxl,
        Family::SdxlTurbo,
        Family::FluxSchnell,
        Family::FluxDev,
        Family::Sd3,
        Family::Sd3Turbo,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Family::Sd1 => "sd1",
            Family::Sd2 => "sd2",
            Family::SdTurbo => "sd-turbo",
            Family::Sdxl => "sdxl",
            Family::SdxlTurbo => "sdxl-turbo",
            Family::FluxSchnell => "flux-schnell",
            Family::FluxDev => "flux-dev",
            Family::Sd3 => "sd3",
            Family::Sd3Turbo => "sd3-turbo",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        let s = s.trim().to_ascii_lowercase();
        Family::ALL.into_iter().find(|f| {
            f.id() == s
                || (s == "sd15" && *f == Family::Sd1)
                || (s == "turbo" && *f == Family::SdTurbo)
        })
    }

    /// How people call it.
    pub fn title(self) -> &'static str {
        match self {
            Family::Sd1 => "SD 1.x",
            Family::Sd2 => "SD 2.x",
            Family::SdTurbo => "SD-Turbo",
            Family::Sdxl => "SDXL",
            Family::SdxlTurbo => "SDXL-Turbo",
            Family::FluxSchnell => "FLUX.1-schnell",
            Family::FluxDev => "FLUX.1-dev",
            Family::Sd3 => "SD 3.5",
            Family::Sd3Turbo => "SD 3.5 Large Turbo",
        }
    }

    pub fn arch(self) -> Arch {
        match self {
            Family::Sd1 => Arch::Sd1,
            Family::Sd2 | Family::SdTurbo => Arch::Sd2,
            Family::Sdxl | Family::SdxlTurbo => Arch::Sdxl,
            Family::FluxSchnell | Family::FluxDev => Arch::Flux,
            Family::Sd3 | Family::Sd3Turbo => Arch::Sd3,
        }
    }

    /// Distilled to run in a few steps (the Turbo releases, FLUX.1-schnell).
    pub fn turbo(self) -> bool {
        matches!(
            self,
            Family::SdTurbo | Family::SdxlTurbo | Family::FluxSchnell | Family::Sd3Turbo
        )
    }

    /// The family of an architecture, Turbo or not.
    pub fn of(arch: Arch, turbo: bool) -> Family {
        match (arch, turbo) {
            (Arch::Sd1, _) => Family::Sd1,
            (Arch::Sd2, false) => Family::Sd2,
            (Arch::Sd2, true) => Family::SdTurbo,
            (Arch::Sdxl, false) => Family::Sdxl,
            (Arch::Sdxl, true) => Family::SdxlTurbo,
            (Arch::Flux, true) => Family::FluxSchnell,
            (Arch::Flux, false) => Family::FluxDev,
            (Arch::Sd3, false) => Family::Sd3,
            (Arch::Sd3, true) => Family::Sd3Turbo,
        }
    }

    /// The settings a mapping of this family starts from: the model makers' recommendations
    /// (Stability's Turbo cards: 1 step, no guidance, trailing timesteps; for the full models
    /// what AUTOMATIC1111 and diffusers users run: DPM++ 2M Karras, CFG 7).
    pub fn preset(self) -> Preset {
        let turbo = Preset {
            steps: 1,
            guidance: 0.0,
            sampler: "euler_a",
            schedule: "automatic",
            size: 512,
            timestep_spacing: Some("trailing"),
            tiny_decoder: true,
            negative_prompt: "",
            image_guidance: None,
        };
        let full = Preset {
            steps: 25,
            guidance: 7.0,
            sampler: "dpm++_2m",
            schedule: "karras",
            size: 512,
            timestep_spacing: None,
            tiny_decoder: false,
            negative_prompt: "blurry, low quality, deformed",
            image_guidance: None,
        };
        match self {
            Family::SdTurbo | Family::SdxlTurbo => turbo,
            Family::Sd1 => full,
            Family::Sd2 => Preset { size: 768, ..full },
            Family::Sdxl => Preset {
                steps: 30,
                size: 1024,
                ..full
            },
            // Black Forest Labs' model cards: schnell 4 steps without guidance, dev 28 steps
            // at guidance 3.5; the flow-matching Euler sampler is the models' only one, and
            // there is no negative prompt.
            Family::FluxSchnell => Preset {
                steps: 4,
                guidance: 0.0,
                sampler: "euler",
                schedule: "automatic",
                size: 1024,
                timestep_spacing: None,
                tiny_decoder: false,
                negative_prompt: "",
                image_guidance: None,
            },
            Family::FluxDev => Preset {
                steps: 28,
                guidance: 3.5,
                ..Family::FluxSchnell.preset()
            },
            // Stability AI's model cards: SD 3.5 Medium 40 steps at guidance 4.5 (Large: 28 at
            // 3.5, set per mapping), Large Turbo 4 steps without guidance; the flow-matching
            // Euler sampler as diffusers' pipeline; 1024² pictures.
            Family::Sd3 => Preset {
                steps: 40,
                guidance: 4.5,
                ..Family::FluxSchnell.preset()
            },
            Family::Sd3Turbo => Family::FluxSchnell.preset(),
        }
    }
}

impl Family {
    /// The preset of a model of this family made for `role`: an InstructPix2Pix model runs as
    /// its makers do (Euler a, text guidance 7.5, image guidance 1.5; 20 steps where they use
    /// 10–100), an inpainting one as its family.
    pub fn preset_for(self, role: Role) -> Preset {
        match role {
            Role::Instruct => Preset {
                steps: 20,
                guidance: 7.5,
                sampler: "euler_a",
                schedule: "automatic",
                timestep_spacing: None,
                tiny_decoder: false,
                negative_prompt: "",
                image_guidance: Some(1.5),
                ..self.preset()
            },
            Role::Text | Role::Inpaint => self.preset(),
        }
    }
}

/// The family of a pipeline: its architecture, Turbo when its scheduler starts from the last
/// timestep (`timestep_spacing = "trailing"`, as both Turbo releases ship) or its hub
/// repository or name says so.
pub fn family_of(info: &ModelInfo, name: &str, source: Option<&str>) -> Family {
    if info.arch == Arch::Flux {
        return Family::of(Arch::Flux, !info.guidance_distilled);
    }
    let says_turbo = |s: &str| s.to_ascii_lowercase().contains("turbo");
    let turbo = info.trailing || says_turbo(name) || source.is_some_and(says_turbo);
    Family::of(info.arch, turbo)
}

/// How the weights are laid out on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Diffusers,
    SingleFile,
}

/// What inspection found out about a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub layout: Layout,
    #[serde(default)]
    pub kind: Kind,
    /// For a tiny decoder, the architecture it decodes for (read from its hub repository or
    /// name: TAESD and TAESDXL have the same configuration).
    pub arch: Arch,
    /// The scheduler configuration asks for trailing timestep spacing (Turbo models).
    #[serde(default)]
    pub trailing: bool,
    /// `epsilon` or `v_prediction`, when the scheduler configuration says.
    pub prediction: Option<String>,
    /// What the UNet is made for.
    #[serde(default)]
    pub role: Role,
    /// Bytes of weights.
    pub weight_bytes: u64,
    /// Tensors in the weights.
    pub tensors: usize,
    /// FLUX: the transformer has a guidance input (FLUX.1-dev), read from its configuration.
    #[serde(default)]
    pub guidance_distilled: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |err| ModelError::Io {
        path: path.to_path_buf(),
        err,
    }
}

fn invalid(m: impl Into<String>) -> ModelError {
    ModelError::Invalid(m.into())
}

/// One tensor's entry in a safetensors header.
#[derive(Debug, Clone, Deserialize)]
pub struct TensorInfo {
    pub dtype: String,
    pub shape: Vec<u64>,
    pub data_offsets: [u64; 2],
}

impl TensorInfo {
    /// The number of elements (the shape's product; checked against the tensor's bytes when
    /// the header is read, so it cannot overflow).
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Bytes the tensor takes once widened to float32 (what the engine holds in memory).
    pub fn f32_bytes(&self) -> u64 {
        self.elements().saturating_mul(4)
    }
}

/// Largest safetensors header read. The format allows 100 MB; an SDXL checkpoint's header is
/// ~0.3 MB, a LoRA's with kohya's training metadata a few MB.
pub const MAX_HEADER: u64 = 16 << 20;
/// Most tensors in one safetensors file (an SDXL checkpoint with EMA weights has ~5,000).
pub const MAX_TENSORS: usize = 65_536;
/// Highest tensor rank accepted (real ones have at most 5 dimensions).
const MAX_RANK: usize = 16;

/// Bytes per element of the safetensors dtypes whose size is a whole number of bytes.
fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" | "F8_E8M0" => 1,
        "U16" | "I16" | "F16" | "BF16" => 2,
        "U32" | "I32" | "F32" => 4,
        "U64" | "I64" | "F64" => 8,
        _ => return None,
    })
}

/// Reads a safetensors header's JSON map straight into typed entries, stopping at
/// [`MAX_TENSORS`]: the memory held is what is kept, never a generic JSON tree of the header.
struct HeaderVisitor {
    data_len: u64,
}

impl<'de> serde::de::Visitor<'de> for HeaderVisitor {
    type Value = BTreeMap<String, TensorInfo>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a map of tensor names to their dtype, shape and data offsets")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut out = BTreeMap::new();
        while let Some(name) = map.next_key::<String>()? {
            if name == "__metadata__" {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            }
            if out.len() >= MAX_TENSORS {
                return Err(A::Error::custom(format!(
                    "more than {MAX_TENSORS} tensors, the most Pictor reads from one file"
                )));
            }
            let info: TensorInfo = map
                .next_value()
                .map_err(|e| A::Error::custom(format!("tensor {name}: {e}")))?;
            let [start, end] = info.data_offsets;
            if start > end || end > self.data_len {
                return Err(A::Error::custom(format!(
                    "tensor {name} lies outside the file (truncated download?)"
                )));
            }
            if info.shape.len() > MAX_RANK {
                return Err(A::Error::custom(format!(
                    "tensor {name} has {} dimensions",
                    info.shape.len()
                )));
            }
            let span = end - start;
            let elements = info.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
            let fits = match (elements, dtype_bytes(&info.dtype)) {
                (Some(n), Some(size)) => n.checked_mul(size) == Some(span),
                // Sub-byte dtypes (F4, F6): at least one bit an element.
                (Some(n), None) => n <= span.saturating_mul(8),
                (None, _) => false,
            };
            if !fits {
                return Err(A::Error::custom(format!(
                    "tensor {name}: shape {:?} of {} does not match its {span} bytes",
                    info.shape, info.dtype
                )));
            }
            match out.entry(name) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(info);
                }
                std::collections::btree_map::Entry::Occupied(e) => {
                    return Err(A::Error::custom(format!(
                        "tensor {} is listed twice",
                        e.key()
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// Reads the header of a `.safetensors` file (8-byte little-endian length, then JSON) and checks
/// that every tensor lies inside the file and matches its shape. Only the header is read; it is
/// refused over [`MAX_HEADER`] bytes or [`MAX_TENSORS`] tensors before being held whole.
pub fn safetensors_header(path: &Path) -> Result<BTreeMap<String, TensorInfo>, ModelError> {
    let (header, data_len) = header_bytes(path)?;
    parse_safetensors_header(&header, data_len).map_err(|e| {
        invalid(format!(
            "{} has an unreadable safetensors header: {e}",
            path.display()
        ))
    })
}

/// The `__metadata__` strings of a `.safetensors` file's header (empty when it has none), read
/// within the same bounds as [`safetensors_header`].
pub fn safetensors_metadata(path: &Path) -> Result<BTreeMap<String, String>, ModelError> {
    let (header, _) = header_bytes(path)?;
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "__metadata__", default)]
        metadata: BTreeMap<String, String>,
    }
    serde_json::from_slice::<Meta>(&header)
        .map(|m| m.metadata)
        .map_err(|e| {
            invalid(format!(
                "{} has an unreadable safetensors header: {e}",
                path.display()
            ))
        })
}

/// A `.safetensors` file's header JSON and the length of the tensor data after it.
fn header_bytes(path: &Path) -> Result<(Vec<u8>, u64), ModelError> {
    let (mut f, len) = bounded::open_regular(path).map_err(file_error)?;
    let mut n = [0u8; 8];
    f.read_exact(&mut n).map_err(io(path))?;
    let n = u64::from_le_bytes(n);
    if n > MAX_HEADER {
        return Err(invalid(format!(
            "{}: its safetensors header is {}, over the {} Pictor reads (not a model's weights?)",
            path.display(),
            bounded::size_text(n),
            bounded::size_text(MAX_HEADER)
        )));
    }
    if n.saturating_add(8) > len {
        return Err(invalid(format!(
            "{} is not a safetensors file (header length {n})",
            path.display()
        )));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).map_err(io(path))?;
    Ok((header, len - 8 - n))
}

/// Parses a safetensors header's JSON (`header`) for a file with `data_len` bytes of tensor
/// data after it: at most [`MAX_TENSORS`] tensors, each inside the data and matching its shape.
pub fn parse_safetensors_header(
    header: &[u8],
    data_len: u64,
) -> Result<BTreeMap<String, TensorInfo>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(header);
    let out = serde::Deserializer::deserialize_map(&mut de, HeaderVisitor { data_len })?;
    de.end()?;
    Ok(out)
}

fn file_error(e: bounded::FileError) -> ModelError {
    invalid(e.to_string())
}

/// Reads a model's JSON configuration file (at most [`bounded::CONFIG_MAX`]).
fn read_json(path: &Path) -> Result<Value, ModelError> {
    let text = bounded::read_file(path, bounded::CONFIG_MAX, "a model configuration file")
        .map_err(file_error)?;
    serde_json::from_slice(&text).map_err(|e| invalid(format!("{}: {e}", path.display())))
}

/// The tokenizer files of a folder, checked for kind and size without being read (the engine
/// reads them at the first render).
fn check_tokenizer(dir: &Path) -> Result<(), ModelError> {
    for (f, cap, what) in [
        (
            "vocab.json",
            bounded::TOKENIZER_MAX,
            "a tokenizer vocabulary",
        ),
        ("merges.txt", bounded::TOKENIZER_MAX, "a tokenizer's merges"),
        ("tokenizer.json", bounded::TOKENIZER_MAX, "a tokenizer"),
        (
            "tokenizer_config.json",
            bounded::CONFIG_MAX,
            "a model configuration file",
        ),
        (
            "special_tokens_map.json",
            bounded::CONFIG_MAX,
            "a model configuration file",
        ),
    ] {
        let p = dir.join(f);
        if std::fs::symlink_metadata(&p).is_ok() {
            bounded::check_file(&p, cap, what).map_err(file_error)?;
        }
    }
    Ok(())
}

fn refuse_pickle(path: &Path) -> Result<(), ModelError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if matches!(ext.as_str(), "bin" | "ckpt" | "pt" | "pth" | "pkl") {
        return Err(invalid(format!(
            "{} is a pickle file, which can run code when loaded; use a .safetensors version of the model",
            path.display()
        )));
    }
    Ok(())
}

/// The `.safetensors` weights of one component folder (all shards of one variant).
fn component_weights(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
    let mut st = Vec::new();
    let mut pickles = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let p = entry.map_err(io(dir))?.path();
        match p.extension().and_then(|e| e.to_str()) {
            Some("safetensors") => st.push(p),
            Some("bin" | "ckpt" | "pt" | "pth") => pickles.push(p),
            _ => {}
        }
    }
    if st.is_empty() {
        return Err(match pickles.first() {
            Some(p) => refuse_pickle(p)
                .err()
                .unwrap_or_else(|| invalid("pickle weights")),
            None => invalid(format!("{} has no .safetensors weights", dir.display())),
        });
    }
    st.sort();
    Ok(st)
}

/// Tells what `path` is: a diffusers folder or a single-file checkpoint, and of which
/// architecture. Reads configuration files and safetensors headers only.
pub fn inspect(path: &Path) -> Result<ModelInfo, ModelError> {
    inspect_as(path, None)
}

/// [`inspect`], with the architecture a LoRA is for when its file does not tell (its layers
/// have widths of no published model, or it changes neither cross-attention nor text
/// encoder); a file that tells another one is refused.
pub fn inspect_as(path: &Path, lora_for: Option<Arch>) -> Result<ModelInfo, ModelError> {
    let meta = std::fs::metadata(path).map_err(io(path))?;
    if meta.is_dir() {
        inspect_diffusers(path)
    } else {
        refuse_pickle(path)?;
        if path.extension().and_then(|e| e.to_str()) == Some("safetensors")
            && let Some(info) = inspect_lora(path, meta.len(), lora_for)?
        {
            return Ok(info);
        }
        if path.extension().and_then(|e| e.to_str()) != Some("safetensors") {
            return Err(invalid(format!(
                "{} is neither a diffusers folder nor a .safetensors checkpoint",
                path.display()
            )));
        }
        inspect_single_file(path, meta.len())
    }
}

/// A TAESD folder: `config.json` of diffusers' `AutoencoderTiny` and its weights.
fn inspect_tiny_decoder(dir: &Path) -> Result<ModelInfo, ModelError> {
    let weights = dir.join("diffusion_pytorch_model.safetensors");
    if !weights.is_file() {
        return Err(invalid(format!(
            "{} is a tiny decoder's folder without diffusion_pytorch_model.safetensors",
            dir.display()
        )));
    }
    let header = safetensors_header(&weights)?;
    if !header.keys().any(|k| k.starts_with("decoder.layers.")) {
        return Err(invalid(format!(
            "{} has no decoder.layers.* tensors: not a TAESD decoder",
            weights.display()
        )));
    }
    Ok(ModelInfo {
        layout: Layout::Diffusers,
        kind: Kind::TinyDecoder,
        arch: Arch::Sd1,
        trailing: false,
        prediction: None,
        role: Role::Text,
        weight_bytes: std::fs::metadata(&weights).map_err(io(&weights))?.len(),
        tensors: header.len(),
        guidance_distilled: false,
    })
}

fn inspect_diffusers(dir: &Path) -> Result<ModelInfo, ModelError> {
    let index_path = dir.join("model_index.json");
    let config_path = dir.join("config.json");
    if !index_path.is_file()
        && config_path.is_file()
        && read_json(&config_path)?
            .get("_class_name")
            .and_then(Value::as_str)
            == Some("AutoencoderTiny")
    {
        return inspect_tiny_decoder(dir);
    }
    if !index_path.is_file() {
        return Err(invalid(format!(
            "{} has no model_index.json: not a diffusers model folder",
            dir.display()
        )));
    }
    let index = read_json(&index_path)?;
    if index.get("_class_name").and_then(Value::as_str) == Some("FluxPipeline") {
        return inspect_flux(dir, &index);
    }
    if index.get("_class_name").and_then(Value::as_str) == Some("StableDiffusion3Pipeline") {
        return inspect_sd3(dir, &index);
    }
    let unet_config = read_json(&dir.join("unet").join("config.json"))?;
    let context = unet_config
        .get("cross_attention_dim")
        .and_then(Value::as_u64);
    let text_time = unet_config
        .get("addition_embed_type")
        .and_then(Value::as_str)
        == Some("text_time");
    let arch = match (context, text_time) {
        (_, true) | (Some(2048), _) => Arch::Sdxl,
        (Some(1024), _) => Arch::Sd2,
        (Some(768), _) => Arch::Sd1,
        // Other widths (distilled or test models): the text encoder tells the family, OpenCLIP
        // (SD 2) using the exact GELU and CLIP ViT-L (SD 1) the quick one.
        (Some(_), _) if dir.join("text_encoder/config.json").is_file() => {
            let text = read_json(&dir.join("text_encoder").join("config.json"))?;
            if text.get("hidden_act").and_then(Value::as_str) == Some("gelu") {
                Arch::Sd2
            } else {
                Arch::Sd1
            }
        }
        (other, _) => {
            return Err(invalid(format!(
                "{}: unsupported UNet (cross_attention_dim {other:?}); Stable Diffusion 1.x, 2.x and SDXL are supported",
                dir.display()
            )));
        }
    };
    let latent_channels = read_json(&dir.join("vae").join("config.json"))
        .ok()
        .and_then(|v| v.get("latent_channels").and_then(Value::as_u64))
        .unwrap_or(4);
    let in_channels = unet_config
        .get("in_channels")
        .and_then(Value::as_u64)
        .unwrap_or(4);
    let role = unet_role(dir, in_channels, latent_channels, arch)?;
    let mut components = vec!["unet", "vae", "text_encoder", "tokenizer", "scheduler"];
    if arch == Arch::Sdxl {
        components.extend(["text_encoder_2", "tokenizer_2"]);
    }
    for c in &components {
        if !dir.join(c).is_dir() {
            return Err(invalid(format!("{} has no {c}/ folder", dir.display())));
        }
        if index.get(*c).is_none() {
            return Err(invalid(format!(
                "{}: model_index.json does not name a {c}",
                dir.display()
            )));
        }
    }
    for c in ["tokenizer", "tokenizer_2"] {
        if components.contains(&c) {
            check_tokenizer(&dir.join(c))?;
        }
    }
    for f in [
        "text_encoder/config.json",
        "text_encoder_2/config.json",
        "vae/config.json",
    ] {
        let p = dir.join(f);
        if std::fs::symlink_metadata(&p).is_ok() {
            bounded::check_file(&p, bounded::CONFIG_MAX, "a model configuration file")
                .map_err(file_error)?;
        }
    }
    let (mut bytes, mut tensors) = (0u64, 0usize);
    for c in ["unet", "vae", "text_encoder", "text_encoder_2"] {
        if !components.contains(&c) {
            continue;
        }
        for w in component_weights(&dir.join(c))? {
            let header = safetensors_header(&w)?;
            tensors += header.len();
            bytes = bytes.saturating_add(std::fs::metadata(&w).map_err(io(&w))?.len());
        }
    }
    // Absent or not JSON: the engine's defaults; a device, a FIFO or a file over the cap is
    // refused here rather than at the first render.
    let scheduler = dir.join("scheduler").join("scheduler_config.json");
    let scheduler = if std::fs::symlink_metadata(&scheduler).is_ok() {
        let bytes = bounded::read_file(
            &scheduler,
            bounded::CONFIG_MAX,
            "a model configuration file",
        )
        .map_err(file_error)?;
        serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let prediction = scheduler
        .get("prediction_type")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(ModelInfo {
        layout: Layout::Diffusers,
        kind: Kind::Pipeline,
        trailing: scheduler.get("timestep_spacing").and_then(Value::as_str) == Some("trailing"),
        arch,
        prediction,
        role,
        weight_bytes: bytes,
        tensors,
        guidance_distilled: false,
    })
}

/// Bytes and tensors of the components' weights that are present (each header checked): a
/// transformer folder's big parts may be left out for single files named by the mapping.
fn present_weights(dir: &Path, components: &[&str]) -> Result<(u64, usize), ModelError> {
    let (mut bytes, mut tensors) = (0u64, 0usize);
    for c in components {
        let sub = dir.join(c);
        if !sub.is_dir() {
            continue;
        }
        // A GGUF in the component's folder stands for its weights (what `pictor models pull`
        // fetches for FLUX / SD 3: city96's quantised transformer and T5).
        if let Some(g) = component_gguf(&sub)? {
            bytes = bytes.saturating_add(std::fs::metadata(&g).map_err(io(&g))?.len());
            continue;
        }
        // A component left out (its weights come as a file named in the mapping).
        let has_weights = std::fs::read_dir(&sub)
            .map_err(io(&sub))?
            .filter_map(Result::ok)
            .any(|e| {
                e.path()
                    .extension()
                    .is_some_and(|x| x != "json" && x != "txt")
            });
        if !has_weights {
            continue;
        }
        for w in component_weights(&sub)? {
            let header = safetensors_header(&w)?;
            tensors += header.len();
            bytes = bytes.saturating_add(std::fs::metadata(&w).map_err(io(&w))?.len());
        }
    }
    Ok((bytes, tensors))
}

/// The GGUF file that holds a FLUX / SD 3 component's weights in its folder
/// (`transformer/flux1-schnell-Q4_K_S.gguf`, `text_encoder_2/t5-v1_1-xxl-encoder-Q8_0.gguf`),
/// if there is one; two are refused (which one would be meant?).
pub fn component_gguf(dir: &Path) -> Result<Option<PathBuf>, ModelError> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
        })
        .collect();
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(invalid(format!(
            "{} holds {} GGUF files; keep the one to use",
            dir.display(),
            found.len()
        ))),
    }
}

/// A diffusers FLUX.1 folder (`FluxPipeline`): CLIP-L, T5 (`text_encoder_2`, which may be
/// left out when the mapping names a T5 file), the transformer (which may likewise be left out
/// for a single file or GGUF), the 16-channel VAE, the flow-matching scheduler.
fn inspect_flux(dir: &Path, index: &Value) -> Result<ModelInfo, ModelError> {
    for c in [
        "text_encoder",
        "tokenizer",
        "tokenizer_2",
        "vae",
        "scheduler",
    ] {
        if !dir.join(c).is_dir() || index.get(c).is_none() {
            return Err(invalid(format!(
                "{}: a FLUX folder needs {c}/ (named in model_index.json)",
                dir.display()
            )));
        }
    }
    check_tokenizer(&dir.join("tokenizer"))?;
    let t5_tok = dir.join("tokenizer_2").join("tokenizer.json");
    bounded::check_file(&t5_tok, 16 * bounded::CONFIG_MAX, "a tokenizer file")
        .map_err(file_error)?;
    let transformer = dir.join("transformer").join("config.json");
    let guidance_distilled = if transformer.is_file() {
        read_json(&transformer)?
            .get("guidance_embeds")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    } else {
        false
    };
    let (bytes, tensors) = present_weights(
        dir,
        &["transformer", "vae", "text_encoder", "text_encoder_2"],
    )?;
    Ok(ModelInfo {
        layout: Layout::Diffusers,
        kind: Kind::Pipeline,
        arch: Arch::Flux,
        trailing: false,
        prediction: Some("flow".into()),
        role: Role::Text,
        weight_bytes: bytes,
        tensors,
        guidance_distilled,
    })
}

/// A diffusers SD 3 / 3.5 folder (`StableDiffusion3Pipeline`): CLIP-L and OpenCLIP-bigG with
/// their tokenizers, T5 (`text_encoder_3`, optional: diffusers runs without it, and a mapping
/// may name a T5 file), the MMDiT (which may be left out for a single file or GGUF), the
/// 16-channel VAE, the flow-matching scheduler.
fn inspect_sd3(dir: &Path, index: &Value) -> Result<ModelInfo, ModelError> {
    for c in [
        "text_encoder",
        "text_encoder_2",
        "tokenizer",
        "tokenizer_2",
        "vae",
        "scheduler",
    ] {
        if !dir.join(c).is_dir() || index.get(c).is_none() {
            return Err(invalid(format!(
                "{}: an SD3 folder needs {c}/ (named in model_index.json)",
                dir.display()
            )));
        }
    }
    check_tokenizer(&dir.join("tokenizer"))?;
    check_tokenizer(&dir.join("tokenizer_2"))?;
    if dir.join("text_encoder_3").is_dir() {
        let t5_tok = dir.join("tokenizer_3").join("tokenizer.json");
        bounded::check_file(&t5_tok, 16 * bounded::CONFIG_MAX, "a tokenizer file")
            .map_err(file_error)?;
    }
    let (bytes, tensors) = present_weights(
        dir,
        &[
            "transformer",
            "vae",
            "text_encoder",
            "text_encoder_2",
            "text_encoder_3",
        ],
    )?;
    Ok(ModelInfo {
        layout: Layout::Diffusers,
        kind: Kind::Pipeline,
        arch: Arch::Sd3,
        trailing: false,
        prediction: Some("flow".into()),
        role: Role::Text,
        weight_bytes: bytes,
        tensors,
        guidance_distilled: false,
    })
}

fn inspect_single_file(path: &Path, len: u64) -> Result<ModelInfo, ModelError> {
    let header = safetensors_header(path)?;
    let has = |prefix: &str| header.keys().any(|k| k.starts_with(prefix));
    if !has("model.diffusion_model.") {
        return Err(invalid(format!(
            "{} has no model.diffusion_model.* tensors: not a Stable Diffusion checkpoint",
            path.display()
        )));
    }
    let arch = if has("conditioner.embedders.1.") {
        Arch::Sdxl
    } else if has("cond_stage_model.model.") {
        Arch::Sd2
    } else if has("cond_stage_model.transformer.") {
        Arch::Sd1
    } else {
        return Err(invalid(format!(
            "{}: no text encoder weights (cond_stage_model.* or conditioner.embedders.*)",
            path.display()
        )));
    };
    if !has("first_stage_model.") {
        return Err(invalid(format!(
            "{}: no autoencoder weights (first_stage_model.*)",
            path.display()
        )));
    }
    let in_channels = header
        .get("model.diffusion_model.input_blocks.0.0.weight")
        .and_then(|t| t.shape.get(1).copied())
        .unwrap_or(4);
    let latent_channels = header
        .get("first_stage_model.post_quant_conv.weight")
        .and_then(|t| t.shape.first().copied())
        .unwrap_or(4);
    let role = unet_role(path, in_channels, latent_channels, arch)?;
    Ok(ModelInfo {
        layout: Layout::SingleFile,
        kind: Kind::Pipeline,
        trailing: false,
        arch,
        prediction: None,
        role,
        weight_bytes: len,
        tensors: header.len(),
        guidance_distilled: false,
    })
}

/// The role of a UNet, or why it is refused (an unknown input width; SDXL edit models, which
/// the engine does not run yet).
fn unet_role(path: &Path, in_channels: u64, latent: u64, arch: Arch) -> Result<Role, ModelError> {
    let role = Role::of(in_channels, latent).ok_or_else(|| {
        invalid(format!(
            "{}: the UNet takes {in_channels} input channels; Pictor runs {latent} (text to image), {} (InstructPix2Pix) and {} (inpainting)",
            path.display(),
            2 * latent,
            2 * latent + 1
        ))
    })?;
    if arch == Arch::Sdxl && role != Role::Text {
        return Err(invalid(format!(
            "{}: SDXL {} models are not supported yet (SD 1.x and 2.x ones are)",
            path.display(),
            role.title()
        )));
    }
    Ok(role)
}

/// A model name as used in `pictor models …` and the configuration: 1–64 of `a-z 0-9 . _ -`.
/// SHA-256 of a whole file, hex (AUTOMATIC1111's model hash is its first 10 digits).
/// Whether a tensor name is a LoRA layer's (any format Pictor reads: kohya's `lora_down`/
/// `lora_up`/`alpha`, PEFT's `lora_A`/`lora_B`, diffusers' older `lora.down`,
/// `lora_linear_layer.down` and attention-processor `to_q_lora.down`).
fn is_lora_tensor(name: &str) -> bool {
    name.contains(".lora_down.")
        || name.contains(".lora_up.")
        || name.contains(".lora_A.")
        || name.contains(".lora_B.")
        || name.contains(".lora.down.")
        || name.contains(".lora.up.")
        || name.contains(".lora_linear_layer.")
        || name.contains("_lora.down.")
        || name.contains("_lora.up.")
        || name.ends_with(".alpha")
        || name.contains(".hada_")
        || name.contains(".lokr_")
        || name.ends_with(".dora_scale")
        || name.contains(".lora_magnitude_vector")
}

/// A `.safetensors` file of LoRA layers: which architecture it is for, read off the width of
/// its cross-attention keys (768: SD 1.x, 1024: SD 2.x, 2048: SDXL), its second text encoder
/// (SDXL) or its text encoder's width. `None` when the file is not a LoRA.
fn inspect_lora(
    path: &Path,
    len: u64,
    lora_for: Option<Arch>,
) -> Result<Option<ModelInfo>, ModelError> {
    let header = safetensors_header(path)?;
    if header.is_empty() || !header.keys().all(|k| is_lora_tensor(k)) {
        return Ok(None);
    }
    let has = |s: &str| header.keys().any(|k| k.contains(s));
    for (marker, what) in [
        (".hada_", "LoHa (LyCORIS)"),
        (".lokr_", "LoKr (LyCORIS)"),
        ("dora_scale", "DoRA"),
        ("lora_magnitude_vector", "DoRA"),
    ] {
        if has(marker) {
            return Err(invalid(format!(
                "{}: {what} LoRAs are not supported (plain LoRA and LoCon are)",
                path.display()
            )));
        }
    }
    if let Some(told) = transformer_lora_arch(&header) {
        if let Some(a) = lora_for.filter(|a| !a.is_transformer()) {
            return Err(invalid(format!(
                "{}: a LoRA for a transformer model (FLUX / SD 3), not {}",
                path.display(),
                a.title()
            )));
        }
        let arch = settle_lora_arch(path, told, lora_for, || {
            "whose layers do not tell FLUX from SD 3; say which with --for flux or sd3".into()
        })?;
        return Ok(Some(lora_info(arch, len, header.len())));
    }
    let down_width = |pred: &dyn Fn(&str) -> bool| {
        header.iter().find_map(|(k, t)| {
            let down = k.contains("lora_down") || k.contains("lora_A") || k.contains(".down.");
            (down && pred(k)).then(|| t.shape.get(1).copied()).flatten()
        })
    };
    let context = down_width(&|k| k.contains("attn2") && k.contains("to_k"));
    let text = down_width(&|k| k.contains("q_proj"));
    let told = if has("lora_te2_") || has("text_encoder_2.") || context == Some(2048) {
        Some(Arch::Sdxl)
    } else {
        match (context, text) {
            (Some(768), _) | (None, Some(768)) => Some(Arch::Sd1),
            (Some(1024), _) | (None, Some(1024)) => Some(Arch::Sd2),
            _ => None,
        }
    };
    let arch = settle_lora_arch(path, told, lora_for, || {
        format!(
            "whose layers do not tell which model family it is for (cross-attention {}, text encoder {}); say which with --for sd1, sd2 or sdxl",
            context.map_or("absent".into(), |w| format!("{w} wide")),
            text.map_or("absent".into(), |w| format!("{w} wide")),
        )
    })?;
    Ok(Some(lora_info(arch, len, header.len())))
}

/// The family a LoRA is for: what its layers tell (`told`), checked against `--for`, or `--for`
/// when they tell nothing (else the error `untold` describes).
fn settle_lora_arch(
    path: &Path,
    told: Option<Arch>,
    lora_for: Option<Arch>,
    untold: impl FnOnce() -> String,
) -> Result<Arch, ModelError> {
    match (told, lora_for) {
        (Some(a), Some(b)) if a != b => Err(invalid(format!(
            "{}: a LoRA for {}, not {}",
            path.display(),
            a.title(),
            b.title()
        ))),
        (Some(a), _) | (None, Some(a)) => Ok(a),
        (None, None) => Err(invalid(format!("{}: a LoRA {}", path.display(), untold()))),
    }
}

fn lora_info(arch: Arch, len: u64, tensors: usize) -> ModelInfo {
    ModelInfo {
        layout: Layout::SingleFile,
        kind: Kind::Lora,
        arch,
        trailing: false,
        prediction: None,
        role: Role::Text,
        weight_bytes: len,
        tensors,
        guidance_distilled: false,
    }
}

/// Whether a LoRA's layers are a transformer model's (FLUX's or SD 3's), and if so which one
/// when they tell: `None` for a UNet's LoRA, `Some(None)` when only the width could say and it
/// is not a known one.
fn transformer_lora_arch(header: &BTreeMap<String, TensorInfo>) -> Option<Option<Arch>> {
    let has = |s: &str| header.keys().any(|k| k.contains(s));
    // Original layouts' names (kohya, ComfyUI) and FLUX's single blocks under diffusers' names.
    if has("double_blocks") || has("single_blocks") || has("single_transformer_blocks") {
        return Some(Some(Arch::Flux));
    }
    if has("joint_blocks") {
        return Some(Some(Arch::Sd3));
    }
    let diffusers = header.keys().any(|k| {
        k.starts_with("transformer.")
            || k.starts_with("diffusion_model.")
            || k.starts_with("lora_transformer_")
    });
    if !diffusers {
        return None;
    }
    // SD 3 has a second CLIP (FLUX's second text encoder is T5, whose layers are named
    // `SelfAttention.q`, not `q_proj`).
    let second_clip = header.keys().any(|k| {
        (k.starts_with("text_encoder_2.") || k.starts_with("lora_te2_")) && k.contains("q_proj")
    });
    if second_clip {
        return Some(Some(Arch::Sd3));
    }
    // The attention's width: FLUX.1 3072; SD 3.5 Medium 1536, Large 2432.
    let width = header.iter().find_map(|(k, t)| {
        let down = k.contains("lora_A") || k.contains("lora_down");
        (down && k.contains("attn.to_q")).then(|| t.shape.get(1).copied())?
    });
    Some(match width {
        Some(3072) => Some(Arch::Flux),
        Some(1536 | 2432) => Some(Arch::Sd3),
        _ => None,
    })
}

/// AUTOMATIC1111's and kohya's hash of a `.safetensors` LoRA (the "addnet" hash): SHA-256 of
/// the tensor data after the header, in hex; the infotext's `Lora hashes` show its first 12
/// digits.
pub fn addnet_hash(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let mut n = [0u8; 8];
    f.read_exact(&mut n)?;
    f.seek(SeekFrom::Start(8u64.saturating_add(u64::from_le_bytes(n))))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
    }
    Ok(hex::encode(h.finalize()))
}

/// The hash AUTOMATIC1111 records for a single file: a LoRA's addnet hash
/// ([`addnet_hash`]), a checkpoint's SHA-256 ([`sha256_file`]).
pub fn a1111_hash(path: &Path) -> std::io::Result<String> {
    let lora = safetensors_header(path)
        .is_ok_and(|h| !h.is_empty() && h.keys().all(|k| is_lora_tensor(k)));
    if lora {
        addnet_hash(path)
    } else {
        sha256_file(path)
    }
}

pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

pub fn check_name(name: &str) -> Result<(), ModelError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "model name {name:?}: use 1-64 lower-case letters, digits, '.', '_' or '-'"
        )))
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Tiny model files with real headers (zero-filled tensors), for the tests of inspection.
    use std::path::Path;

    pub fn write_safetensors(path: &Path, tensors: &[(&str, &[u64])]) {
        let mut header = serde_json::Map::new();
        let mut offset = 0u64;
        for (name, shape) in tensors {
            let bytes = shape.iter().product::<u64>() * 4;
            header.insert(
                name.to_string(),
                serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes]}),
            );
            offset += bytes;
        }
        let text = serde_json::to_vec(&header).unwrap_or_default();
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend(text);
        out.extend(vec![0u8; offset as usize]);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(path, out);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::testing::write_safetensors;
    use super::*;

    fn diffusers(dir: &Path, context: u64) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("model_index.json"),
            r#"{"_class_name":"StableDiffusionPipeline","unet":["diffusers","UNet2DConditionModel"],"vae":["diffusers","AutoencoderKL"],"text_encoder":["transformers","CLIPTextModel"],"tokenizer":["transformers","CLIPTokenizer"],"scheduler":["diffusers","EulerDiscreteScheduler"]}"#,
        )
        .unwrap();
        for c in ["unet", "vae", "text_encoder", "tokenizer", "scheduler"] {
            std::fs::create_dir_all(dir.join(c)).unwrap();
        }
        std::fs::write(
            dir.join("unet/config.json"),
            format!(r#"{{"cross_attention_dim": {context}}}"#),
        )
        .unwrap();
        std::fs::write(
            dir.join("scheduler/scheduler_config.json"),
            r#"{"prediction_type":"v_prediction"}"#,
        )
        .unwrap();
        write_safetensors(
            &dir.join("unet/diffusion_pytorch_model.safetensors"),
            &[("conv_in.weight", &[4, 4, 3, 3])],
        );
        write_safetensors(
            &dir.join("vae/diffusion_pytorch_model.safetensors"),
            &[("decoder.conv_in.weight", &[4, 4, 3, 3])],
        );
        write_safetensors(
            &dir.join("text_encoder/model.safetensors"),
            &[("text_model.embeddings.token_embedding.weight", &[16, 8])],
        );
    }

    #[test]
    fn diffusers_folders_by_their_unet_config() {
        let d = tempfile::tempdir().unwrap();
        diffusers(d.path(), 1024);
        let info = inspect(d.path()).unwrap();
        assert_eq!((info.layout, info.arch), (Layout::Diffusers, Arch::Sd2));
        assert_eq!(info.prediction.as_deref(), Some("v_prediction"));
        assert_eq!(info.tensors, 3);
        // Pickle-only weights are refused, with the reason.
        std::fs::remove_file(d.path().join("vae/diffusion_pytorch_model.safetensors")).unwrap();
        std::fs::write(d.path().join("vae/diffusion_pytorch_model.bin"), b"x").unwrap();
        let e = inspect(d.path()).unwrap_err().to_string();
        assert!(e.contains("pickle"), "{e}");
    }

    #[test]
    fn single_files_by_their_tensor_names() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("model.safetensors");
        write_safetensors(
            &p,
            &[
                (
                    "model.diffusion_model.input_blocks.0.0.weight",
                    &[4, 4, 3, 3],
                ),
                ("first_stage_model.decoder.conv_in.weight", &[4, 4, 3, 3]),
                (
                    "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight",
                    &[16, 8],
                ),
            ],
        );
        assert_eq!(inspect(&p).unwrap().arch, Arch::Sd1);
        // A truncated file is caught from its header.
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
        assert!(
            inspect(&p)
                .unwrap_err()
                .to_string()
                .contains("outside the file")
        );
        let ckpt = d.path().join("model.ckpt");
        std::fs::write(&ckpt, b"x").unwrap();
        assert!(inspect(&ckpt).unwrap_err().to_string().contains("pickle"));
    }

    #[test]
    fn safetensors_headers_are_checked_as_they_are_parsed() {
        let parse = |h: &str, len| parse_safetensors_header(h.as_bytes(), len);
        let ok = r#"{"__metadata__":{"a":"b"},"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},"s":{"dtype":"F32","shape":[],"data_offsets":[12,16]}}"#;
        let t = parse(ok, 16).unwrap();
        assert_eq!((t.len(), t["w"].elements(), t["w"].f32_bytes()), (2, 6, 24));
        for (bad, why) in [
            (
                r#"{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}}"#,
                "does not match",
            ),
            (
                r#"{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}"#,
                "does not match",
            ),
            (
                r#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,40]}}"#,
                "outside the file",
            ),
            (
                r#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}"#,
                "outside the file",
            ),
            (
                r#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
                "listed twice",
            ),
            (
                r#"{"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}"#,
                "dimensions",
            ),
            (
                r#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x"#,
                "trailing",
            ),
            (r#"[1,2]"#, "a map"),
        ] {
            let e = parse(bad, 16).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let many: String = (0..=MAX_TENSORS)
            .map(|i| format!(r#""t{i}":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#))
            .collect::<Vec<_>>()
            .join(",");
        let e = parse(&format!("{{{many}}}"), 1).unwrap_err().to_string();
        assert!(e.contains("more than 65536 tensors"), "{e}");
    }

    #[test]
    fn names() {
        assert!(check_name("sd-turbo").is_ok());
        assert!(check_name("SD").is_err());
        assert!(check_name("../x").is_err());
        assert!(check_name(".hidden").is_err());
    }
}

#[cfg(test)]
mod lora_tests {
    use super::*;

    /// A `.safetensors` file of float32 zeros with these names and shapes.
    fn file(dir: &Path, tensors: &[(&str, &[u64])]) -> std::path::PathBuf {
        let mut header = serde_json::Map::new();
        let mut at = 0u64;
        for (name, shape) in tensors {
            let n = shape.iter().product::<u64>() * 4;
            header.insert(
                (*name).into(),
                serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [at, at + n]}),
            );
            at += n;
        }
        let h = serde_json::to_vec(&header).unwrap();
        let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
        bytes.extend(h);
        bytes.extend(vec![0u8; at as usize]);
        let p = dir.join("lora.safetensors");
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn a_loras_family_is_read_off_its_widths() {
        let dir = tempfile::tempdir().unwrap();
        let k = "lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn2_to_k";
        for (width, arch) in [(768, Arch::Sd1), (1024, Arch::Sd2), (2048, Arch::Sdxl)] {
            let p = file(
                dir.path(),
                &[
                    (&format!("{k}.lora_down.weight"), &[4, width]),
                    (&format!("{k}.lora_up.weight"), &[640, 4]),
                    (&format!("{k}.alpha"), &[]),
                ],
            );
            let info = inspect(&p).unwrap();
            assert_eq!((info.kind, info.arch), (Kind::Lora, arch));
        }
        let q = "text_encoder.text_model.encoder.layers.0.self_attn.q_proj";
        let p = file(
            dir.path(),
            &[
                (&format!("{q}.lora_A.weight"), &[4, 1024]),
                (&format!("{q}.lora_B.weight"), &[1024, 4]),
            ],
        );
        assert_eq!(inspect(&p).unwrap().arch, Arch::Sd2);
        let e = inspect_as(&p, Some(Arch::Sd1)).unwrap_err().to_string();
        assert!(e.contains("a LoRA for SD 2.x, not SD 1.x"), "{e}");
        let p = file(
            dir.path(),
            &[(
                "transformer.single_transformer_blocks.0.attn.to_q.lora_A.weight",
                &[4, 8],
            )],
        );
        let info = inspect(&p).unwrap();
        assert_eq!((info.kind, info.arch), (Kind::Lora, Arch::Flux));
        let e = inspect_as(&p, Some(Arch::Sd3)).unwrap_err().to_string();
        assert!(e.contains("a LoRA for FLUX.1, not SD 3"), "{e}");
        for (key, arch) in [
            (
                "lora_unet_double_blocks_0_img_attn_qkv.lora_down.weight",
                Arch::Flux,
            ),
            (
                "diffusion_model.single_blocks.0.linear1.lora_A.weight",
                Arch::Flux,
            ),
            (
                "lora_unet_joint_blocks_0_x_block_attn_qkv.lora_down.weight",
                Arch::Sd3,
            ),
            (
                "text_encoder_2.encoder.layers.0.self_attn.q_proj.lora_A.weight",
                Arch::Sd3,
            ),
        ] {
            let extra = "transformer.transformer_blocks.0.attn.to_k.lora_A.weight";
            let p = file(dir.path(), &[(key, &[4, 8]), (extra, &[4, 8])]);
            assert_eq!(inspect(&p).unwrap().arch, arch, "{key}");
        }
        // Diffusers' names shared by FLUX and SD 3: the width tells, else --for must.
        let q = "transformer.transformer_blocks.0.attn.to_q.lora_A.weight";
        let p = file(dir.path(), &[(q, &[4, 3072])]);
        assert_eq!(inspect(&p).unwrap().arch, Arch::Flux);
        let p = file(dir.path(), &[(q, &[4, 1536])]);
        assert_eq!(inspect(&p).unwrap().arch, Arch::Sd3);
        let p = file(dir.path(), &[(q, &[4, 8])]);
        let e = inspect(&p).unwrap_err().to_string();
        assert!(e.contains("--for flux or sd3"), "{e}");
        assert_eq!(inspect_as(&p, Some(Arch::Sd3)).unwrap().arch, Arch::Sd3);
        let e = inspect_as(&p, Some(Arch::Sd1)).unwrap_err().to_string();
        assert!(
            e.contains("transformer model (FLUX / SD 3), not SD 1.x"),
            "{e}"
        );
        // FLUX's text_encoder_2 is T5: its layers do not make the LoRA an SD 3 one.
        let t5 = "text_encoder_2.encoder.block.0.layer.0.SelfAttention.q.lora_A.weight";
        let p = file(dir.path(), &[(q, &[4, 3072]), (t5, &[4, 4096])]);
        assert_eq!(inspect(&p).unwrap().arch, Arch::Flux);
        let p = file(dir.path(), &[("lora_unet_x.hada_w1_a", &[4, 8])]);
        let e = inspect(&p).unwrap_err().to_string();
        assert!(e.contains("LoHa"), "{e}");
        assert!(addnet_hash(&p).unwrap() != sha256_file(&p).unwrap());
    }
}
