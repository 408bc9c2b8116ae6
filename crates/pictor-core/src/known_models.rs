//! The catalogue: models known to work with Pictor's engine, as the operator console and
//! `pictor models pull` offer them. Sizes are the downloads of the listed variant; memory is
//! what the engine holds while rendering (weights widened to float32, from the benchmark in
//! docs/benchmarks.md). Licences are linked, never paraphrased as permission: a model whose
//! licence forbids commercial use says so and its download needs the licence accepted.

use serde::Serialize;

use crate::models::{Arch, Family, Kind};

#[derive(Debug, Clone, Serialize)]
pub struct Licence {
    pub name: &'static str,
    pub url: &'static str,
    /// Whether pictures may be sold / used commercially under it (use restrictions apart).
    pub commercial: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct KnownModel {
    /// The name it is installed under.
    pub id: &'static str,
    pub title: &'static str,
    /// `owner/name` on the Hugging Face hub.
    pub repo: &'static str,
    /// Weight variant fetched (`fp16` halves the download; the engine widens to float32).
    pub variant: Option<&'static str>,
    pub kind: Kind,
    /// Pipelines: their family (and so their preset).
    pub family: Option<Family>,
    /// Tiny decoders: the architecture they decode for.
    pub arch: Arch,
    /// Bytes downloaded (about).
    pub download_bytes: u64,
    /// Memory while rendering at the preset's size (about).
    pub ram_bytes: u64,
    pub licence: Licence,
    pub summary: &'static str,
    /// Files of other repositories that take the place of some of `repo`'s (quantised
    /// transformer and T5 GGUFs), put into the folder; `repo`'s weights of those folders are
    /// not fetched.
    pub extras: &'static [ExtraFile],
}

/// A file of another hub repository (at `main`) and where it goes in the model's folder.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ExtraFile {
    pub repo: &'static str,
    pub file: &'static str,
    pub dest: &'static str,
}

/// city96's T5-XXL encoder in Q8_0 (5.06 GB), for FLUX's `text_encoder_2` and SD 3's
/// `text_encoder_3`.
const T5_Q8: &str = "t5-v1_1-xxl-encoder-Q8_0.gguf";
const T5_REPO: &str = "city96/t5-v1_1-xxl-encoder-gguf";

const GB: u64 = 1_000_000_000;
const MB: u64 = 1_000_000;

const OPENRAIL_M: Licence = Licence {
    name: "CreativeML OpenRAIL-M",
    url: "https://huggingface.co/spaces/CompVis/stable-diffusion-license",
    commercial: true,
};

/// Every entry, pipelines first (the recommended CPU model first).
pub fn known_models() -> Vec<KnownModel> {
    vec![
        KnownModel {
            id: "sd-turbo",
            title: "SD-Turbo",
            repo: "stabilityai/sd-turbo",
            variant: Some("fp16"),
            kind: Kind::Pipeline,
            family: Some(Family::SdTurbo),
            arch: Arch::Sd2,
            download_bytes: 2_580 * MB,
            ram_bytes: 6 * GB,
            licence: Licence {
                name: "Stability AI Non-Commercial Research Community License",
                url: "https://huggingface.co/stabilityai/sd-turbo/blob/main/LICENSE.md",
                commercial: false,
            },
            summary: "A picture in one step: the quickest real pictures on a CPU (512×512).",
            extras: &[],
        },
        KnownModel {
            id: "flux1-schnell",
            title: "FLUX.1-schnell (GGUF Q4_K)",
            repo: "black-forest-labs/FLUX.1-schnell",
            variant: None,
            kind: Kind::Pipeline,
            family: Some(Family::FluxSchnell),
            arch: Arch::Flux,
            download_bytes: 12_300 * MB,
            ram_bytes: 13 * GB,
            licence: Licence {
                name: "Apache-2.0",
                url: "https://huggingface.co/black-forest-labs/FLUX.1-schnell/blob/main/README.md",
                commercial: true,
            },
            summary: "Black Forest Labs' 12B model in 4 steps: pictures that follow long prompts and draw text; the permissive licence. Transformer in Q4_K and T5 in Q8_0 (city96's GGUFs). Slow on a CPU: minutes per picture.",
            extras: &[
                ExtraFile {
                    repo: "city96/FLUX.1-schnell-gguf",
                    file: "flux1-schnell-Q4_K_S.gguf",
                    dest: "transformer/flux1-schnell-Q4_K_S.gguf",
                },
                ExtraFile {
                    repo: T5_REPO,
                    file: T5_Q8,
                    dest: "text_encoder_2/t5-v1_1-xxl-encoder-Q8_0.gguf",
                },
            ],
        },
        KnownModel {
            id: "sd35-medium",
            title: "Stable Diffusion 3.5 Medium",
            repo: "stabilityai/stable-diffusion-3.5-medium",
            variant: None,
            kind: Kind::Pipeline,
            family: Some(Family::Sd3),
            arch: Arch::Sd3,
            download_bytes: 11_700 * MB,
            ram_bytes: 20 * GB,
            licence: Licence {
                name: "Stability AI Community License",
                url: "https://huggingface.co/stabilityai/stable-diffusion-3.5-medium/blob/main/LICENSE.md",
                commercial: true,
            },
            summary: "Stability's 2.5B MMDiT with three text encoders, 40 steps with guidance. Commercial use is free below US$1M yearly revenue (see the licence); the repository is gated: accept its licence on the hub and set HF_TOKEN. T5 in Q8_0 (city96's GGUF).",
            extras: &[ExtraFile {
                repo: T5_REPO,
                file: T5_Q8,
                dest: "text_encoder_3/t5-v1_1-xxl-encoder-Q8_0.gguf",
            }],
        },
        KnownModel {
            id: "sdxl-turbo",
            title: "SDXL-Turbo",
            repo: "stabilityai/sdxl-turbo",
            variant: Some("fp16"),
            kind: Kind::Pipeline,
            family: Some(Family::SdxlTurbo),
            arch: Arch::Sdxl,
            download_bytes: 6_940 * MB,
            ram_bytes: 13 * GB,
            licence: Licence {
                name: "Stability AI Non-Commercial Research Community License",
                url: "https://huggingface.co/stabilityai/sdxl-turbo/blob/main/LICENSE.md",
                commercial: false,
            },
            summary: "SDXL quality in one step; best with a GPU.",
            extras: &[],
        },
        KnownModel {
            id: "sd15",
            title: "Stable Diffusion 1.5",
            repo: "stable-diffusion-v1-5/stable-diffusion-v1-5",
            variant: Some("fp16"),
            kind: Kind::Pipeline,
            family: Some(Family::Sd1),
            arch: Arch::Sd1,
            download_bytes: 2_130 * MB,
            ram_bytes: 5 * GB,
            licence: OPENRAIL_M,
            summary: "The classic: thousands of fine-tunes and LoRAs are made for it. 25 steps.",
            extras: &[],
        },
        KnownModel {
            id: "dreamshaper-8",
            title: "DreamShaper 8",
            repo: "Lykon/dreamshaper-8",
            variant: Some("fp16"),
            kind: Kind::Pipeline,
            family: Some(Family::Sd1),
            arch: Arch::Sd1,
            download_bytes: 2_130 * MB,
            ram_bytes: 5 * GB,
            licence: OPENRAIL_M,
            summary: "A popular SD 1.5 fine-tune for illustration and portraits.",
            extras: &[],
        },
        KnownModel {
            id: "sdxl-base",
            title: "SDXL 1.0 base",
            repo: "stabilityai/stable-diffusion-xl-base-1.0",
            variant: Some("fp16"),
            kind: Kind::Pipeline,
            family: Some(Family::Sdxl),
            arch: Arch::Sdxl,
            download_bytes: 6_940 * MB,
            ram_bytes: 13 * GB,
            licence: Licence {
                name: "CreativeML OpenRAIL++-M",
                url: "https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0/blob/main/LICENSE.md",
                commercial: true,
            },
            summary: "Stability's 1024×1024 model: detailed, slow on a CPU.",
            extras: &[],
        },
        KnownModel {
            id: "instruct-pix2pix",
            title: "InstructPix2Pix (edits that follow the instruction)",
            repo: "timbrooks/instruct-pix2pix",
            variant: Some("fp16"),
            kind: Kind::Pipeline,
            family: Some(Family::Sd1),
            arch: Arch::Sd1,
            download_bytes: 4_300 * MB,
            ram_bytes: 6 * GB,
            licence: Licence {
                name: "MIT",
                url: "https://huggingface.co/timbrooks/instruct-pix2pix",
                commercial: true,
            },
            summary: "For the edit tier: does what an instruction says (\"make it winter\", \"add fireworks\") and keeps the rest of the photo. SD 1.5-sized, runs on a CPU.",
            extras: &[],
        },
        KnownModel {
            id: "sd15-inpainting",
            title: "Stable Diffusion 1.5 inpainting",
            repo: "stable-diffusion-v1-5/stable-diffusion-inpainting",
            variant: Some("fp16"),
            kind: Kind::Pipeline,
            family: Some(Family::Sd1),
            arch: Arch::Sd1,
            download_bytes: 2_130 * MB,
            ram_bytes: 5 * GB,
            licence: OPENRAIL_M,
            summary: "For the edit tier with masks: repaints the masked area to match the rest of the photo.",
            extras: &[],
        },
        KnownModel {
            id: "taesd",
            title: "TAESD tiny decoder (SD 1.x / 2.x)",
            repo: "madebyollin/taesd",
            variant: None,
            kind: Kind::TinyDecoder,
            family: None,
            arch: Arch::Sd1,
            download_bytes: 10 * MB,
            ram_bytes: 350 * MB,
            licence: Licence {
                name: "MIT",
                url: "https://github.com/madebyollin/taesd/blob/main/LICENSE",
                commercial: true,
            },
            summary: "Decodes SD 1.x/2.x pictures in about a sixth of the time, a little less detail.",
            extras: &[],
        },
        KnownModel {
            id: "taesdxl",
            title: "TAESDXL tiny decoder (SDXL)",
            repo: "madebyollin/taesdxl",
            variant: None,
            kind: Kind::TinyDecoder,
            family: None,
            arch: Arch::Sdxl,
            download_bytes: 10 * MB,
            ram_bytes: 350 * MB,
            licence: Licence {
                name: "MIT",
                url: "https://github.com/madebyollin/taesd/blob/main/LICENSE",
                commercial: true,
            },
            summary: "The tiny decoder for SDXL and SDXL-Turbo.",
            extras: &[],
        },
    ]
}

/// The catalogue entry with this id or hub repository.
pub fn known(id_or_repo: &str) -> Option<KnownModel> {
    known_models()
        .into_iter()
        .find(|m| m.id == id_or_repo || m.repo.eq_ignore_ascii_case(id_or_repo))
}

/// The architecture a tiny decoder decodes for: the catalogue's word for its repository, else
/// SDXL when its repository or name says `xl` (TAESD and TAESDXL share one configuration).
pub fn tiny_decoder_arch(name: &str, source: Option<&str>) -> Arch {
    let repo = source.map(|s| s.split('@').next().unwrap_or(s));
    if let Some(k) = repo.and_then(known) {
        return k.arch;
    }
    let xl = |s: &str| s.to_ascii_lowercase().contains("xl");
    if xl(name) || repo.is_some_and(xl) {
        Arch::Sdxl
    } else {
        Arch::Sd1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_unique_and_consistent() {
        let all = known_models();
        for (i, m) in all.iter().enumerate() {
            assert!(crate::models::check_name(m.id).is_ok(), "{}", m.id);
            assert!(
                all[i + 1..]
                    .iter()
                    .all(|o| o.id != m.id && o.repo != m.repo)
            );
            assert_eq!(m.kind == Kind::Pipeline, m.family.is_some(), "{}", m.id);
            if let Some(f) = m.family {
                assert_eq!(f.arch(), m.arch, "{}", m.id);
            }
            assert!(m.licence.url.starts_with("https://"));
        }
        assert_eq!(
            known("stabilityai/SD-Turbo").map(|m| m.id),
            Some("sd-turbo")
        );
        assert_eq!(
            tiny_decoder_arch("x", Some("madebyollin/taesdxl@abc")),
            Arch::Sdxl
        );
        assert_eq!(tiny_decoder_arch("my-taesd", None), Arch::Sd1);
    }
}
