//! The built-in procedural renderer: draws a landscape (or space scene, or abstract piece)
//! from the words of the prompt, deterministically from the seed, on the CPU.
//!
//! The pipeline is: read the prompt ([`prompt`]) → plan the scene ([`scene`]) → paint layers
//! back to front (sky gradient and glow, stars, planet, moon, sun, clouds, terrain layers with
//! water between them, fog, snow) on a float canvas ([`canvas`]) → vignette and grain.
//! Models differ in the work spent: layers, noise octaves, texture, star and tree counts, and
//! supersampled silhouettes for `0.2plus`.

mod art;
mod atmosphere;
mod canvas;
mod noise;
mod prompt;
mod scene;
mod sky;
mod terrain;
mod water;

use sha2::{Digest, Sha256};

use super::decode::{self, DecodeLimits};
use super::{EditSpec, GenerateSpec, Model, Picture, Ratio, RenderError, Renderer, edit};
use canvas::Canvas;
use noise::{Field, Rng, fbm2};
use prompt::Theme;
use scene::Plan;

/// Draws pictures from prompts without any model weights: fast, deterministic, offline.
#[derive(Debug, Default, Clone)]
pub struct ProceduralRenderer;

impl Renderer for ProceduralRenderer {
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        Ok(Picture(render(
            &spec.prompt,
            spec.model,
            spec.ratio,
            spec.seed,
        )))
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        let img = decode::decode(&spec.source, &DecodeLimits::default())?;
        let ops = edit::parse_instruction(&spec.instruction)?;
        Ok(Picture(edit::apply(img, &ops)))
    }
}

/// Renders a prompt at exactly `model.dimensions(ratio)` (with `Auto` resolved from the prompt).
pub fn render(prompt: &str, model: Model, ratio: Ratio, seed: u64) -> image::RgbaImage {
    let ratio = ratio.resolve_auto(prompt);
    let (w, h) = model.dimensions(ratio);
    let theme = Theme::read(prompt);
    let mut rng = Rng::new(seed ^ prompt_hash(prompt));
    let plan = Plan::new(&theme, model, w as usize, h as usize, &mut rng);
    paint(&plan, &rng)
}

/// A stable 64-bit hash of the prompt (SHA-256, first 8 bytes).
fn prompt_hash(prompt: &str) -> u64 {
    let digest = Sha256::digest(prompt.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

fn paint(plan: &Plan, rng: &Rng) -> image::RgbaImage {
    let mut c = Canvas::new(plan.w, plan.h);
    if plan.abstract_art {
        art::paint(&mut c, plan, &mut rng.fork("art"));
        return c.into_image(plan.detail.vignette, plan.detail.grain, plan.seed);
    }

    sky::gradient(&mut c, plan);
    sky::stars(&mut c, plan, &mut rng.fork("stars"));
    if let Some(p) = plan.planet {
        sky::planet(&mut c, plan, p);
    }
    if let Some(m) = plan.moon {
        sky::moon(&mut c, plan, m);
    }
    if let Some(s) = plan.sun {
        sky::sun(&mut c, plan, s);
    }
    sky::clouds(&mut c, plan);

    let texture = plan.detail.texture.then(|| {
        let u = plan.unit;
        let seed = plan.seed ^ 0x7E;
        let oct = plan.detail.field_octaves;
        Field::new(plan.w, plan.h, plan.detail.cell, |x, y| {
            fbm2(x / (u * 70.0), y / (u * 14.0), oct, 0.55, seed)
        })
    });
    let mut objects = rng.fork("objects");
    for (i, layer) in plan.layers.iter().enumerate() {
        if let Some(w) = plan.water
            && w.before == i
        {
            water::paint(&mut c, plan, w);
        }
        terrain::paint(&mut c, plan, layer, texture.as_ref(), &mut objects);
    }
    if let Some(w) = plan.water
        && w.before >= plan.layers.len()
    {
        water::paint(&mut c, plan, w);
    }

    atmosphere::fog(&mut c, plan);
    atmosphere::snowfall(&mut c, plan, &mut rng.fork("snow"));
    c.into_image(plan.detail.vignette, plan.detail.grain, plan.seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{PngParameters, finish};

    fn spec(prompt: &str, model: Model, ratio: Ratio, seed: u64) -> GenerateSpec {
        GenerateSpec {
            prompt: prompt.to_owned(),
            model,
            ratio,
            seed,
        }
    }

    fn png(prompt: &str, seed: u64) -> Vec<u8> {
        let pic = ProceduralRenderer
            .generate(&spec(prompt, Model::Fast, Ratio::Square, seed))
            .unwrap();
        let params = PngParameters {
            prompt: prompt.to_owned(),
            seed,
            model: "fast".to_owned(),
            kind: "generate",
        };
        finish(pic, false, &params).unwrap()
    }

    /// Mean of each channel.
    fn means(img: &image::RgbaImage) -> [f64; 3] {
        let mut sum = [0u64; 3];
        for p in img.pixels() {
            for (s, v) in sum.iter_mut().zip(p.0) {
                *s += u64::from(v);
            }
        }
        let n = (img.width() * img.height()) as f64;
        [sum[0] as f64 / n, sum[1] as f64 / n, sum[2] as f64 / n]
    }

    #[test]
    fn exact_dimensions_for_every_model_and_ratio() {
        for model in Model::ALL {
            for ratio in Ratio::ALL {
                let pic = ProceduralRenderer
                    .generate(&spec("hills", model, ratio, 1))
                    .unwrap();
                let expected = model.dimensions(ratio.resolve_auto("hills"));
                assert_eq!((pic.width(), pic.height()), expected, "{model} {ratio}");
            }
        }
    }

    #[test]
    fn auto_ratio_is_resolved_from_the_prompt() {
        let img = render("a panorama of the sea", Model::Fast, Ratio::Auto, 3);
        assert_eq!(img.dimensions(), (1024, 576));
    }

    #[test]
    fn same_inputs_give_identical_bytes() {
        let a = png("a red sunset over the sea", 42);
        let b = png("a red sunset over the sea", 42);
        assert_eq!(a, b);
    }

    #[test]
    fn seed_and_prompt_change_the_picture() {
        let base = png("mountains at night", 42);
        assert_ne!(base, png("mountains at night", 43));
        assert_ne!(base, png("mountains at night, a cat", 42));
    }

    #[test]
    fn red_prompt_is_redder_than_blue_prompt() {
        for seed in [1, 2, 3, 4, 5] {
            for (red, blue) in [
                ("a red landscape", "a blue landscape"),
                ("красный закат над морем", "синий закат над морем"),
            ] {
                let r = means(&render(red, Model::Fast, Ratio::Square, seed));
                let b = means(&render(blue, Model::Fast, Ratio::Square, seed));
                assert!(
                    r[0] - r[2] > b[0] - b[2] + 10.0,
                    "seed {seed}: {red} {r:?} vs {blue} {b:?}"
                );
            }
        }
    }

    #[test]
    fn night_is_darker_than_day() {
        for seed in [1, 2, 3] {
            let night = means(&render(
                "mountains at night",
                Model::Fast,
                Ratio::Square,
                seed,
            ));
            let day = means(&render(
                "mountains by day",
                Model::Fast,
                Ratio::Square,
                seed,
            ));
            assert!(night.iter().sum::<f64>() < day.iter().sum::<f64>() * 0.6);
        }
    }

    #[test]
    fn models_share_the_composition_but_differ_in_detail() {
        let fast = render("forest lake", Model::Fast, Ratio::Square, 9);
        let plus = render("forest lake", Model::Artist, Ratio::Square, 9);
        let small =
            image::imageops::resize(&plus, 1024, 1024, image::imageops::FilterType::Triangle);
        let (f, p) = (means(&fast), means(&small));
        assert!(
            f.iter().zip(&p).all(|(a, b)| (a - b).abs() < 25.0),
            "{f:?} vs {p:?}"
        );
        assert_ne!(fast.as_raw(), small.as_raw());
    }

    #[test]
    fn every_scene_kind_renders() {
        for prompt in [
            "",
            "a cat",
            "sunset over the ocean",
            "ночной город",
            "snowy mountains in winter",
            "desert dunes",
            "outer space nebula with a planet",
            "forest with a lake at dawn",
            "tropical beach",
            "foggy hills",
            "storm over the sea",
            "abstract purple and gold",
            "луна и звёзды над лесом",
        ] {
            let img = render(prompt, Model::Fast, Ratio::Wide, 5);
            assert_eq!(img.dimensions(), (1024, 576), "{prompt}");
            // Not a flat colour.
            let first = *img.get_pixel(0, 0);
            assert!(img.pixels().any(|p| *p != first), "{prompt}");
        }
    }

    fn sample_png() -> Vec<u8> {
        let img = image::RgbaImage::from_fn(30, 20, |x, y| {
            image::Rgba([(x * 8) as u8, (y * 12) as u8, 90, 255])
        });
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn edit_decodes_parses_and_applies() {
        let pic = ProceduralRenderer
            .edit(&EditSpec {
                source: sample_png(),
                instruction: "make it black and white and rotate it 90 degrees".to_owned(),
                seed: 1,
            })
            .unwrap();
        assert_eq!((pic.width(), pic.height()), (20, 30));
        assert!(pic.0.pixels().all(|p| p[0] == p[1] && p[1] == p[2]));
    }

    #[test]
    fn edit_errors_are_reported() {
        let bad_image = ProceduralRenderer.edit(&EditSpec {
            source: b"GIF89a".to_vec(),
            instruction: "blur".to_owned(),
            seed: 1,
        });
        assert!(matches!(bad_image, Err(RenderError::InvalidImage(_))));
        let bad_text = ProceduralRenderer.edit(&EditSpec {
            source: sample_png(),
            instruction: "qwerty".to_owned(),
            seed: 1,
        });
        assert!(matches!(bad_text, Err(RenderError::EditNotUnderstood(_))));
    }

    /// Writes sample renders to /tmp/pictor-samples for looking at them, with timings.
    /// `cargo test --lib render::procedural::tests::write_samples -- --ignored --nocapture`
    /// Environment: `PICTOR_MODEL=artist|plus`, `PICTOR_SAMPLE=<name>` for one of the built-in
    /// prompts, or `PICTOR_PROMPTS="a|b|c"` for your own.
    #[test]
    #[ignore]
    fn write_samples() {
        let dir = std::path::Path::new("/tmp/pictor-samples");
        std::fs::create_dir_all(dir).unwrap();
        let only = std::env::var("PICTOR_SAMPLE").ok();
        let model = match std::env::var("PICTOR_MODEL").ok().as_deref() {
            Some("artist") => Model::Artist,
            Some("plus") => Model::Plus,
            _ => Model::Fast,
        };
        let prompts = [
            ("sunset_sea", "a red sunset over the sea"),
            ("night_city", "ночной город у моря"),
            ("snow_mountains", "snowy mountains in winter"),
            ("desert", "desert dunes at noon"),
            ("space", "outer space nebula with a planet"),
            ("forest_lake", "forest with a lake at dawn"),
            ("beach", "tropical beach"),
            ("fog_hills", "foggy green hills"),
            ("cat", "a cat"),
            ("blue", "a blue landscape"),
            ("red", "a red landscape"),
            ("moon_forest", "луна и звёзды над лесом"),
            ("abstract", "abstract purple and gold"),
            ("storm", "storm over the sea"),
            ("city_day", "city skyline by day"),
        ];
        // PICTOR_PROMPTS="a|b|c" renders those prompts instead (as p0.png, p1.png, …).
        let custom: Vec<(String, String)> = std::env::var("PICTOR_PROMPTS")
            .map(|list| {
                list.split('|')
                    .enumerate()
                    .map(|(i, p)| (format!("p{i}"), p.to_owned()))
                    .collect()
            })
            .unwrap_or_else(|_| {
                prompts
                    .iter()
                    .map(|(n, p)| (n.to_string(), p.to_string()))
                    .collect()
            });
        for (name, prompt) in &custom {
            let (name, prompt) = (name.as_str(), prompt.as_str());
            if only.as_deref().is_some_and(|o| o != name) {
                continue;
            }
            let t = std::time::Instant::now();
            let pic = ProceduralRenderer
                .generate(&spec(prompt, model, Ratio::Square, 7))
                .unwrap();
            let rendered = t.elapsed();
            let params = PngParameters {
                prompt: prompt.to_owned(),
                seed: 7,
                model: model.id().to_owned(),
                kind: "generate",
            };
            let bytes = finish(pic, true, &params).unwrap();
            println!(
                "{name}: render {rendered:?}, total {:?}, {} KiB",
                t.elapsed(),
                bytes.len() / 1024
            );
            std::fs::write(dir.join(format!("{name}.png")), bytes).unwrap();
        }
    }
}
