//! The built-in procedural renderer: draws the prompt's scene and things from its words,
//! deterministically from the seed, on the CPU, without model weights.
//!
//! The pipeline is: read the prompt ([`prompt`]) → plan the scene ([`scene`]: palette, sky,
//! terrain layers, water) and place its things ([`compose`]) → paint back to front on a float
//! canvas ([`canvas`]): sky ([`sky`]), aurora and rainbow, terrain ([`terrain`]) with water
//! ([`water`]) between the layers, rivers, roads and flowers ([`features`]), the objects
//! ([`objects`], drawn with [`shapes`]), atmosphere ([`atmosphere`]) → vignette → the style pass
//! (`render::style`) → quoted text (`render::text`). A still life and the underwater world are
//! painted by [`features`] instead of sky and terrain. Models differ in the work spent: layers,
//! noise octaves, texture, star and object counts, supersampled silhouettes for `0.2plus`, and
//! the finishing pass for `artist` and `0.2plus`.

mod art;
mod atmosphere;
mod canvas;
mod compose;
mod features;
mod library;
pub mod noise;
mod objects;
mod prompt;
pub mod retouch;
mod scene;
mod shapes;
mod sky;
mod terrain;
mod water;

use sha2::{Digest, Sha256};

use super::decode::{self, DecodeLimits};
use super::style;
use super::text;
use super::{
    EditSpec, GenerateSpec, Model, Picture, Ratio, RenderControl, RenderError, Renderer,
    SceneReport, edit,
};
use canvas::{Canvas, mix, rgb};
use compose::{Setting, Spot};
use noise::{Field, Rng, fbm2};
use prompt::{TextMode, Theme};
use scene::Plan;

pub use prompt::vocabulary_size;

/// Splits the first quoted text ("…", «…», “…”) out of `text`: (the rest, the quoted text).
pub fn quoted_text(text: &str) -> (String, Option<String>) {
    prompt::extract_quoted(text)
}

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

    /// Reports its stages (plan, paint, style, text) as progress and stops between them when
    /// cancelled.
    fn generate_with(
        &self,
        spec: &GenerateSpec,
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        render_controlled(
            &spec.prompt,
            spec.model,
            spec.ratio,
            spec.seed,
            None,
            control,
        )
        .map(Picture)
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        self.edit_with(spec, &RenderControl::default())
    }

    /// Reports, as the scene (`drawn`: what was done, `not_drawn`: what it understood but
    /// cannot do, such as "next to the girl"), so the job, the PNG and the playground say what
    /// was and was not done rather than passing a substitute off as the edit.
    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        let edit::Reading { ops, not_done } = edit::read_instruction(&spec.instruction)?;
        let picture = self.edit_ops(spec, &ops)?;
        control.set_scene(SceneReport {
            drawn: {
                let ru = edit::is_russian(&spec.instruction);
                ops.iter().map(|op| op.describe_in(ru)).collect()
            },
            not_drawn: not_done,
        });
        Ok(picture)
    }

    fn exact_edit(&self, instruction: &str) -> Result<bool, RenderError> {
        match edit::parse_instruction(instruction) {
            Ok(ops) => Ok(!ops.iter().any(edit::EditOp::is_content)),
            Err(RenderError::EditNotUnderstood(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The instruction's pixel operations (rotate, crop, black and white…), in its order; what
    /// changes the content is left to the model that painted `picture`.
    fn apply_exact(
        &self,
        picture: Picture,
        instruction: &str,
        seed: u64,
    ) -> Result<(Picture, Vec<String>), RenderError> {
        let ops: Vec<edit::EditOp> = match edit::parse_instruction(instruction) {
            Ok(ops) => ops.into_iter().filter(|op| !op.is_content()).collect(),
            Err(RenderError::EditNotUnderstood(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        if ops.is_empty() {
            return Ok((picture, Vec::new()));
        }
        let done = ops.iter().map(edit::EditOp::describe).collect();
        Ok((
            Picture(edit::apply_seeded(picture.0, &ops, seed as u32)),
            done,
        ))
    }
}

/// Renders a prompt at exactly `model.dimensions(ratio)` (with `Auto` resolved from the prompt).
pub fn render(prompt: &str, model: Model, ratio: Ratio, seed: u64) -> image::RgbaImage {
    render_styled(prompt, model, ratio, seed, None)
}

/// What the prompt enhancer needs to know about a prompt.
#[derive(Debug, Clone)]
pub struct Summary {
    pub main_subject: Option<&'static str>,
    /// Names any landscape element.
    pub landscape: bool,
    /// "day", "golden" or "night" when the prompt names a time.
    pub time: Option<&'static str>,
    pub indoor: bool,
    pub underwater: bool,
    /// Says where things go (left, right, centre).
    pub placed: bool,
}

/// Reads a prompt the way the renderer does, for the prompt enhancer.
pub fn theme_summary(prompt: &str) -> Summary {
    let theme = Theme::read(prompt);
    let setting = compose::Setting::choose(&theme);
    Summary {
        main_subject: theme.subjects.first().map(|s| thing_name(s.thing)),
        landscape: !theme.elements.is_empty(),
        time: theme.time.map(|t| match t {
            prompt::Time::Day => "day",
            prompt::Time::Golden => "golden",
            prompt::Time::Night => "night",
        }),
        indoor: setting == Setting::StillLife,
        underwater: setting == Setting::Underwater,
        placed: theme.place.is_some(),
    }
}

/// A [`Picture`] in a forced style (`pictor render --style`).
pub fn render_picture(
    prompt: &str,
    model: Model,
    ratio: Ratio,
    seed: u64,
    style: Option<style::Style>,
) -> Picture {
    Picture(render_styled(prompt, model, ratio, seed, style))
}

/// Like [`render`], with the style forced (`pictor render --style`).
pub fn render_styled(
    prompt: &str,
    model: Model,
    ratio: Ratio,
    seed: u64,
    style: Option<style::Style>,
) -> image::RgbaImage {
    let control = RenderControl::default();
    match render_controlled(prompt, model, ratio, seed, style, &control) {
        Ok(img) => img,
        // Nobody else holds this control, so it is never cancelled.
        Err(_) => image::RgbaImage::new(1, 1),
    }
}

/// Paints a picture the painter made again, with `changes` to its plan (things removed or
/// replaced), after checking from its `parameters` chunk and its pixels that it is that picture.
/// The error is the message for the client, in the instruction's language.
fn repaint(
    source: &[u8],
    changes: &[retouch::Change],
    ru: bool,
) -> Result<image::RgbaImage, String> {
    let msg = |en: &str, ru_text: &str| {
        if ru {
            ru_text.to_owned()
        } else {
            en.to_owned()
        }
    };
    let not_ours = || {
        msg(
            "remove and replace work on pictures the built-in painter made, with their PNG parameters intact; this picture has none",
            "убрать или заменить можно только на картинке, которую нарисовал встроенный художник Pictor (PNG с её параметрами); у этой картинки их нет",
        )
    };
    let text = super::encode::read_parameters(source).ok_or_else(not_ours)?;
    let info = super::infotext::Infotext::parse(&text);
    if info.get("Sampler") != Some("procedural") || info.get("Edit").is_some() {
        return Err(not_ours());
    }
    let model = info
        .get("Model")
        .and_then(Model::parse)
        .ok_or_else(not_ours)?;
    let seed: u64 = info
        .get("Seed")
        .and_then(|s| s.parse().ok())
        .ok_or_else(not_ours)?;
    let size = info.size("Size").ok_or_else(not_ours)?;
    let ratio = Ratio::ALL
        .into_iter()
        .find(|r| model.dimensions(*r) == size)
        .ok_or_else(not_ours)?;
    if info.get("Version") != Some(concat!("pictor ", env!("CARGO_PKG_VERSION"))) {
        return Err(msg(
            "this picture was painted by another version of Pictor, whose painter may place things differently; remove and replace need a picture from this version",
            "эту картинку нарисовала другая версия Pictor, её художник может расставлять всё иначе; убрать или заменить можно на картинке этой версии",
        ));
    }
    let picture = decode::decode(source, &DecodeLimits::default()).map_err(|e| e.to_string())?;
    let changed = || {
        msg(
            "this picture was changed after Pictor painted it, so what it placed can no longer be removed or replaced",
            "эту картинку изменили после того, как Pictor её нарисовал, поэтому убрать или заменить нарисованное уже нельзя",
        )
    };
    // Cheap checks before painting anything.
    if picture.dimensions() != size {
        return Err(changed());
    }
    let control = RenderControl::default();
    let original = render_planned(&info.prompt, model, ratio, seed, None, &control, |_| Ok(()))
        .map_err(|e| e.to_string())??;
    let mut marked = original.clone();
    super::watermark::apply(&mut marked);
    if !same_picture(&picture, &original) && !same_picture(&picture, &marked) {
        return Err(changed());
    }
    render_planned(&info.prompt, model, ratio, seed, None, &control, |plan| {
        retouch::change_plan(plan, changes, ru)
    })
    .map_err(|e| e.to_string())?
}

/// Whether two pictures are the same: the painter is deterministic, so its own PNG comes back
/// exact; allowed are a mean difference under half a level and at most one pixel in 10,000
/// off by more than 8 levels (a signature or a small patch painted over is more).
fn same_picture(a: &image::RgbaImage, b: &image::RgbaImage) -> bool {
    if a.dimensions() != b.dimensions() {
        return false;
    }
    let mut total = 0u64;
    let mut off = 0u64;
    for (p, q) in a.pixels().zip(b.pixels()) {
        let d = (0..4).map(|k| p[k].abs_diff(q[k])).max().unwrap_or(0);
        total += (0..4).map(|k| u64::from(p[k].abs_diff(q[k]))).sum::<u64>();
        off += u64::from(d > 8);
    }
    let pixels = u64::from(a.width()) * u64::from(a.height());
    (total as f64) < a.as_raw().len() as f64 * 0.5 && off * 10_000 <= pixels
}

impl ProceduralRenderer {
    /// Applies the ops read from `spec.instruction`: removing or replacing what the painter
    /// placed paints the picture again from its own `parameters`; every other op works on the
    /// pixels.
    fn edit_ops(&self, spec: &EditSpec, ops: &[edit::EditOp]) -> Result<Picture, RenderError> {
        let changes: Vec<retouch::Change> = ops
            .iter()
            .filter_map(|op| match op {
                edit::EditOp::Remove(c) => Some(retouch::Change::Remove(c)),
                edit::EditOp::Replace(c) => Some(retouch::Change::Replace(c)),
                _ => None,
            })
            .collect();
        let img = if changes.is_empty() {
            decode::decode(&spec.source, &DecodeLimits::default())?
        } else {
            let ru = edit::is_russian(&spec.instruction);
            repaint(&spec.source, &changes, ru).map_err(RenderError::EditNotUnderstood)?
        };
        let out = edit::apply_seeded(img, ops, spec.seed as u32);
        // A mask keeps the rest of the photo as it was (when the edit kept its size).
        Ok(Picture(match &spec.mask {
            Some(bytes) => {
                let source = decode::decode(&spec.source, &DecodeLimits::default())?;
                let (w, h) = source.dimensions();
                let mask = decode::mask(bytes, w, h, &DecodeLimits::default())?;
                decode::keep_outside_mask(out, &source, &mask)
            }
            None => out,
        }))
    }
}

/// [`render_styled`] reporting each stage's end to `control` and stopping between stages once
/// it is cancelled.
fn render_controlled(
    prompt: &str,
    model: Model,
    ratio: Ratio,
    seed: u64,
    style: Option<style::Style>,
    control: &RenderControl,
) -> Result<image::RgbaImage, RenderError> {
    // The unchanged plan cannot fail to change.
    render_planned(prompt, model, ratio, seed, style, control, |_| Ok(()))?
        .map_err(RenderError::EditNotUnderstood)
}

/// Renders with `change` applied to the plan before painting; its error comes back as the
/// inner `Err`.
fn render_planned(
    prompt: &str,
    model: Model,
    ratio: Ratio,
    seed: u64,
    style: Option<style::Style>,
    control: &RenderControl,
    change: impl FnOnce(&mut Plan) -> Result<(), String>,
) -> Result<Result<image::RgbaImage, String>, RenderError> {
    let stage = |done: f64| {
        if control.is_cancelled() {
            return Err(RenderError::Cancelled);
        }
        control.set_progress(done);
        Ok(())
    };
    let ratio = ratio.resolve_auto(prompt);
    let (w, h) = model.dimensions(ratio);
    let mut theme = Theme::read(prompt);
    if style.is_some() {
        theme.style = style;
    }
    let mut rng = Rng::new(seed ^ prompt_hash(prompt));
    let mut plan = Plan::new(&theme, model, w as usize, h as usize, &mut rng);
    if let Err(m) = change(&mut plan) {
        return Ok(Err(m));
    }
    control.set_scene(scene_report(&theme, &plan));
    stage(0.1)?;
    let sign = (theme.text_mode == Some(TextMode::Sign)).then(|| sign_box(&plan, &theme));
    let mut img = paint(&plan, &rng, sign);
    stage(0.7)?;
    style::apply(&mut img, plan.style, plan.seed, model != Model::Fast);
    stage(0.85)?;
    if let (Some(t), Some(mode)) = (&theme.text, theme.text_mode) {
        match (mode, sign) {
            (TextMode::Sign, Some(b)) => {
                let pad = b.3 * 0.14;
                text::draw_in_box(
                    &mut img,
                    t,
                    (b.0 + pad, b.1 + pad, b.2 - 2.0 * pad, b.3 - 2.0 * pad),
                    text::Look::Ink,
                );
            }
            (TextMode::Neon, _) => {
                text::draw_at(
                    &mut img,
                    t,
                    text::Position::Center,
                    text::Look::Neon([255, 60, 200]),
                );
            }
            _ => {
                let pos = if plan.setting == Setting::StillLife {
                    text::Position::Top
                } else if plan
                    .subjects
                    .iter()
                    .any(|p| p.spot == Spot::Sky && p.y < plan.h as f32 * 0.35)
                {
                    text::Position::Bottom
                } else {
                    text::Position::Top
                };
                text::draw_at(&mut img, t, pos, text::Look::Auto);
            }
        }
    }
    Ok(Ok(img))
}

/// What the painter draws of `prompt` (at `fast`, seed 0, the prompt's own ratio): the content
/// words it draws and those it cannot.
pub fn describe(prompt: &str) -> SceneReport {
    let ratio = Ratio::Auto.resolve_auto(prompt);
    let (w, h) = Model::Fast.dimensions(ratio);
    let theme = Theme::read(prompt);
    let mut rng = Rng::new(prompt_hash(prompt));
    let plan = Plan::new(&theme, Model::Fast, w as usize, h as usize, &mut rng);
    scene_report(&theme, &plan)
}

/// Sorts the prompt's content words into drawn and not drawn by what the plan contains.
fn scene_report(theme: &Theme, plan: &Plan) -> SceneReport {
    use prompt::{Element as E, Mention, Pose};
    let placed = |k: usize| plan.subjects.iter().any(|p| p.subject == k);
    let subject_drawn = |t: prompt::Thing| {
        theme.subjects.iter().enumerate().any(|(k, s)| {
            s.thing == t
                && (placed(k)
                    || theme
                        .subjects
                        .iter()
                        .enumerate()
                        .any(|(j, holder)| holder.holds == Some(k) && placed(j)))
        })
    };
    let landscape = plan.setting == Setting::Landscape;
    let element_drawn = |e: E| match plan.setting {
        Setting::StillLife => match (e, &plan.room) {
            (E::Table, None) => true,
            (E::Table, Some(r)) => r.table.is_some(),
            (E::Room, Some(_)) => true,
            (E::Window, Some(r)) => r.window.is_some(),
            (E::Fireplace, Some(r)) => r.fireplace.is_some(),
            (E::Library, Some(r)) => r.shelves,
            (E::Kitchen, Some(r)) => r.kitchen,
            _ => false,
        },
        Setting::Underwater => matches!(e, E::Underwater | E::Sea),
        Setting::Landscape => match e {
            E::Sun => plan.sun.is_some() || plan.synthwave,
            E::Moon => plan.moon.is_some(),
            E::Stars => plan.stars > 0.0,
            E::Planet => plan.planet.is_some(),
            E::Sea | E::Lake | E::Beach => plan.water.is_some(),
            E::River => plan.river,
            E::Island => plan.islands > 0,
            E::Flowers => plan.flowers.is_some(),
            E::Road => plan.road,
            E::Clouds => plan.clouds > 0.0,
            E::Rain => plan.rain > 0.0,
            E::Fog => plan.fog > 0.0,
            E::Aurora => plan.aurora,
            E::Rainbow => plan.rainbow,
            E::Neon => plan.neon || plan.style == style::Style::Neon,
            E::Abstract => plan.abstract_art,
            E::Table | E::Underwater | E::Room | E::Fireplace | E::Library | E::Kitchen => false,
            // Out of doors a window is a building's.
            E::Window => plan.subjects.iter().any(|p| {
                use prompt::Thing as T;
                matches!(
                    p.thing,
                    T::House
                        | T::Cabin
                        | T::Castle
                        | T::Lighthouse
                        | T::Church
                        | T::Tower
                        | T::Pagoda
                        | T::Windmill
                )
            }),
            _ => landscape,
        },
    };
    let mut report = SceneReport::default();
    let mut put = |name: String, drawn: bool| {
        let list = if drawn {
            &mut report.drawn
        } else {
            &mut report.not_drawn
        };
        if !list.contains(&name) {
            list.push(name);
        }
    };
    for m in &theme.mentions {
        match m {
            Mention::Thing(t) => put(t.name().into(), subject_drawn(*t)),
            Mention::Element(e) => put(e.name().into(), element_drawn(*e)),
            Mention::Garment(g) => {
                let worn = theme.subjects.iter().enumerate().any(|(k, s)| {
                    s.thing.is_person() && placed(k) && s.wear.iter().any(|(w, _)| w == g)
                });
                put(g.name().into(), worn)
            }
            // A pose word with nobody to take it is about a thing ("the train goes").
            Mention::Pose(_) if !theme.subjects.iter().any(|s| s.thing.is_person()) => {}
            Mention::Pose(p) => {
                let shown = theme.subjects.iter().enumerate().any(|(k, s)| {
                    s.thing.is_person()
                        && placed(k)
                        && (s.pose == Some(*p) || *p == Pose::Stand && s.pose.is_none())
                        && (*p != Pose::Ride || s.rides.is_some())
                });
                put(p.name().into(), shown)
            }
            Mention::Concept(name) => put((*name).into(), false),
            Mention::Unknown(word) => put(word.clone(), false),
        }
    }
    // Quoted text is always lettered (on a title, a sign or in neon).
    if let Some(t) = &theme.text {
        put(format!("text \"{t}\""), true);
    }
    report
}

/// The names the scene report gives the content words of `prompt` (as in
/// [`SceneReport`]'s lists): what a person asked for, to tell it from words the prompt enhancer
/// added ("clear silhouette" must not become "could not draw: clear sky").
pub fn mentioned(prompt: &str) -> Vec<String> {
    use prompt::Mention;
    Theme::read(prompt)
        .mentions
        .iter()
        .map(|m| match m {
            Mention::Thing(t) => t.name().to_owned(),
            Mention::Element(e) => e.name().to_owned(),
            Mention::Garment(g) => g.name().to_owned(),
            Mention::Pose(p) => p.name().to_owned(),
            Mention::Concept(name) => (*name).to_owned(),
            Mention::Unknown(word) => word.clone(),
        })
        .collect()
}

/// A stable 64-bit hash of the prompt (SHA-256, first 8 bytes).
fn prompt_hash(prompt: &str) -> u64 {
    let digest = Sha256::digest(prompt.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// Where a signboard stands: the foreground, away from the main subject.
fn sign_box(plan: &Plan, _theme: &Theme) -> (f32, f32, f32, f32) {
    let (w, h) = (plan.w as f32, plan.h as f32);
    let main_x = plan
        .subjects
        .iter()
        .find(|p| p.spot != Spot::Sky)
        .map(|p| p.x);
    let cx = match main_x {
        Some(x) if x < w * 0.5 => w * 0.72,
        Some(_) => w * 0.28,
        None => w * 0.5,
    };
    let bw = w * 0.4;
    let bh = (bw * 0.42).min(h * 0.24);
    let ground = match plan.setting {
        Setting::Landscape => compose::stage_ground(plan, cx).min(h * 0.97),
        _ => h * 0.92,
    };
    let y = ground - h * 0.12 - bh;
    (cx - bw / 2.0, y.max(h * 0.05), bw, bh)
}

fn paint(plan: &Plan, rng: &Rng, sign: Option<(f32, f32, f32, f32)>) -> image::RgbaImage {
    let mut c = Canvas::new(plan.w, plan.h);
    if plan.abstract_art && plan.subjects.is_empty() {
        art::paint(&mut c, plan, &mut rng.fork("art"));
        return c.into_image(plan.detail.vignette, plan.detail.grain, plan.seed);
    }
    match plan.setting {
        Setting::StillLife => {
            match &plan.room {
                Some(room) => features::room(&mut c, plan, room, &mut rng.fork("room")),
                None => features::interior(&mut c, plan, &mut rng.fork("interior")),
            }
            compose::paint(&mut c, plan, |_| true);
        }
        Setting::Underwater => {
            features::underwater(&mut c, plan, &mut rng.fork("underwater"));
            compose::paint(&mut c, plan, |_| true);
        }
        Setting::Landscape => landscape(&mut c, plan, rng),
    }
    if let Some(b) = sign {
        signboard(&mut c, plan, b);
    }
    c.into_image(plan.detail.vignette, plan.detail.grain, plan.seed)
}

fn landscape(c: &mut Canvas, plan: &Plan, rng: &Rng) {
    sky::gradient(c, plan);
    sky::stars(c, plan, &mut rng.fork("stars"));
    if plan.aurora {
        features::aurora(c, plan);
    }
    if let Some(p) = plan.planet {
        sky::planet(c, plan, p);
    }
    if let Some(m) = plan.moon {
        sky::moon(c, plan, m);
    }
    if let Some(s) = plan.sun {
        sky::sun(c, plan, s);
        if plan.synthwave {
            features::sun_stripes(c, plan);
        }
    }
    sky::clouds(c, plan);
    if plan.rainbow {
        features::rainbow(c, plan, &mut rng.fork("rainbow"));
    }
    if plan.lightning {
        features::lightning(c, plan, &mut rng.fork("lightning"));
    }

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
            water::paint(c, plan, w);
            features::islands(c, plan, &mut rng.fork("islands"));
        }
        terrain::paint(c, plan, layer, texture.as_ref(), &mut objects);
    }
    if let Some(w) = plan.water
        && w.before >= plan.layers.len()
    {
        water::paint(c, plan, w);
        features::islands(c, plan, &mut rng.fork("islands"));
    }
    if plan.synthwave && plan.water.is_none() {
        features::grid_floor(c, plan);
    }
    if let Some(colors) = &plan.flowers {
        features::flowers(c, plan, colors, &mut rng.fork("flowers"));
    }
    if plan.river {
        features::river(c, plan, &mut rng.fork("river"));
    }
    if plan.road {
        features::road(
            c,
            plan,
            &mut rng.fork("road"),
            plan.neon
                || plan
                    .layers
                    .iter()
                    .any(|l| matches!(l.objects, scene::Objects::City { .. })),
        );
    }
    compose::paint(c, plan, |_| true);
    if plan.fireflies {
        features::fireflies(c, plan, &mut rng.fork("fireflies"));
    }
    atmosphere::fog(c, plan);
    features::rain(c, plan, &mut rng.fork("rain"));
    atmosphere::snowfall(c, plan, &mut rng.fork("snow"));
}

/// A wooden signboard on two posts; the text is written on it after the style pass.
fn signboard(c: &mut Canvas, plan: &Plan, b: (f32, f32, f32, f32)) {
    use shapes::{Light, Part, Xform, rect};
    let (x, y, w, h) = b;
    let ground = y + h + plan.h as f32 * 0.12;
    let wood = rgb(176, 128, 80);
    let parts = vec![
        Part::new(rect(0.12, 0.0, 0.17, 1.0, 0.0), rgb(110, 76, 48)),
        Part::new(rect(0.83, 0.0, 0.88, 1.0, 0.0), rgb(110, 76, 48)),
        Part::new(
            rect(0.0, 1.0 - h / (ground - y), 1.0, 1.0, 0.01),
            mix(wood, rgb(230, 200, 150), 0.4),
        )
        .shade(0.3)
        .tex(0.08, 20.0),
    ];
    let t = Xform {
        ox: x,
        oy: ground,
        s: w,
        flip: 1.0,
    };
    // Scale y: the drawing is one unit wide; posts reach the ground.
    let k = (ground - y) / w;
    let parts: Vec<Part> = parts
        .into_iter()
        .map(|p| Part {
            sdf: scale_y(p.sdf, k),
            ..p
        })
        .collect();
    shapes::draw(c, &parts, t, &Light::plain(), None);
}

fn scale_y(s: shapes::Sdf, k: f32) -> shapes::Sdf {
    match s {
        shapes::Sdf::Rect(c, hw, hh, r) => {
            shapes::Sdf::Rect(shapes::V(c.0, c.1 * k), hw, hh * k, r)
        }
        other => other,
    }
}

/// The vocabulary's size and the things, for the README and `pictor render --list`.
pub fn things() -> Vec<&'static str> {
    prompt::Thing::ALL.iter().map(|t| thing_name(*t)).collect()
}

fn thing_name(t: prompt::Thing) -> &'static str {
    t.name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PngParameters, finish};

    /// The painter reports its stages as progress and stops at the first checkpoint once
    /// cancelled.
    #[test]
    fn progress_by_stages_and_cancel_at_a_checkpoint() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let control = RenderControl::observed(Box::new(move |p| log.lock().unwrap().push(p)));
        let spec = spec("a castle on a hill", Model::Fast, Ratio::Square, 1);
        ProceduralRenderer.generate_with(&spec, &control).unwrap();
        assert_eq!(*seen.lock().unwrap(), [0.1, 0.7, 0.85]);
        let cancelled = RenderControl::default();
        cancelled.cancel();
        assert!(matches!(
            ProceduralRenderer.generate_with(&spec, &cancelled),
            Err(RenderError::Cancelled)
        ));
        assert_eq!(
            cancelled.progress(),
            0.0,
            "stopped before the first stage ended"
        );
    }

    /// Rooms: named interiors get walls, a floor and what is named on the wall; small things
    /// stand on the counter or a low table, furniture and animals on the floor; a window out of
    /// doors is a house's, not a room.
    #[test]
    fn rooms_are_furnished_as_named() {
        for seed in 0..8 {
            let p = plan_of("a kitchen with a teapot", seed);
            let room = p.room.expect("a kitchen is a room");
            assert!(room.kitchen && room.table.is_some());
            let pot = p
                .subjects
                .iter()
                .find(|s| s.thing == prompt::Thing::Teapot)
                .unwrap();
            let top = room.table.unwrap().2;
            assert!(
                (pot.y - top).abs() < p.h as f32 * 0.03,
                "on the counter: {} vs {top} ({:?})",
                pot.y,
                pot.spot
            );
            let p = plan_of("a cat by the fireplace in a library", seed);
            let room = p.room.unwrap();
            assert!(room.fireplace.is_some() && room.shelves);
            let cat = p
                .subjects
                .iter()
                .find(|s| s.thing == prompt::Thing::Cat)
                .unwrap();
            assert!(cat.y > room.floor_y, "on the floor");
            let p = plan_of("a piano by the window", seed);
            assert!(p.room.is_some_and(|r| r.window.is_some()));
            assert!(
                plan_of("a house with a red door by the lake", seed)
                    .room
                    .is_none()
            );
        }
        let r = describe("a cozy room with a sofa by the window and a fireplace");
        for word in ["room", "sofa", "window", "fireplace"] {
            assert!(r.drawn.contains(&word.to_string()), "{word}: {r:?}");
        }
        let r = describe("уютная комната с камином");
        assert!(
            r.drawn.contains(&"room".to_string()) && r.drawn.contains(&"fireplace".to_string()),
            "{r:?}"
        );
        let r = describe("a house with a window in the forest");
        assert!(
            r.drawn.contains(&"window".to_string()),
            "a house's window: {r:?}"
        );
    }

    /// "next to", "in front of", "behind" (and Russian) place the two things against each
    /// other; viewpoint words move the horizon.
    #[test]
    fn relations_and_viewpoints_compose_the_picture() {
        use prompt::Thing as T;
        let find = |p: &Plan, t: T| p.subjects.iter().position(|s| s.thing == t).unwrap();
        for seed in 0..8 {
            for prompt in ["a dog next to a cat", "собака рядом с кошкой"] {
                let p = plan_of(prompt, seed);
                let (d, c) = (&p.subjects[find(&p, T::Dog)], &p.subjects[find(&p, T::Cat)]);
                assert!((d.y - c.y).abs() < 1.0, "{prompt}: one ground line");
                let gap = (d.x - c.x).abs();
                assert!(
                    gap > c.height * 0.5 && gap < (c.height + d.height) * 1.5,
                    "{prompt}: side by side, {gap}"
                );
            }
            let p = plan_of("a girl in front of a castle", seed);
            let (g, c) = (find(&p, T::Person), find(&p, T::Castle));
            assert!(
                p.subjects[g].y > p.subjects[c].y && g > c,
                "in front: nearer and drawn after"
            );
            assert!(
                (p.subjects[g].x - p.subjects[c].x).abs() < p.subjects[c].height,
                "overlapping"
            );
            let p = plan_of("a tree behind a house", seed);
            let (t, h) = (find(&p, T::Tree), find(&p, T::House));
            assert!(
                p.subjects[t].y < p.subjects[h].y && t < h,
                "behind: farther and drawn before"
            );
            assert!(plan_of("aerial view of a village by a lake", seed).horizon < p.h as f32 * 0.3);
            assert!(plan_of("a lighthouse from below", seed).horizon > p.h as f32 * 0.75);
        }
    }

    /// Small animals sit on the seat they are put on (EN and RU), several side by side; a
    /// rider whose mount is removed stands where the mount stood; "one of the cats" removes one.
    #[test]
    fn animals_on_seats_and_what_removal_leaves() {
        use prompt::Thing as T;
        let extent = |p: &compose::Placed| {
            let m = objects::build(p.thing, &p.look);
            let half = p.height * m.half_width / m.height;
            (p.x - half, p.x + half)
        };
        for seed in 0..8 {
            for (prompt, animal, seat) in [
                ("a cat on a sofa", T::Cat, T::Sofa),
                ("кошка на диване", T::Cat, T::Sofa),
                (
                    "a dog sitting on a chair in a living room",
                    T::Dog,
                    T::Chair,
                ),
                ("two cats on a bench in a park", T::Cat, T::Bench),
            ] {
                let p = plan_of(prompt, seed);
                let s = p.subjects.iter().position(|q| q.thing == seat).unwrap();
                let (x0, x1) = extent(&p.subjects[s]);
                let on: Vec<_> = p.subjects.iter().filter(|q| q.thing == animal).collect();
                let want = if prompt.starts_with("two") { 2 } else { 1 };
                assert_eq!(on.len(), want, "{prompt} {seed}");
                for a in on {
                    assert!(a.on.is_some(), "{prompt} {seed}: not on the seat");
                    assert!((x0..=x1).contains(&a.x), "{prompt} {seed}: beside the seat");
                    let seat_y = &p.subjects[s];
                    assert!(
                        a.y < seat_y.y - seat_y.height * 0.2 && a.y > seat_y.y - seat_y.height,
                        "{prompt} {seed}: at seat height, {} vs base {}",
                        a.y,
                        seat_y.y
                    );
                    let at = p.subjects.iter().position(|q| std::ptr::eq(q, a)).unwrap();
                    assert!(at > s, "{prompt} {seed}: drawn over the seat");
                }
            }
            // A cat on a horse is not a rider.
            assert!(
                plan_of("a cat on a horse", seed)
                    .subjects
                    .iter()
                    .all(|q| q.on.is_none())
            );

            let mut p = plan_of("a knight riding a horse", seed);
            let horse_y = p.subjects.iter().find(|q| q.thing == T::Horse).unwrap().y;
            let rode = p
                .subjects
                .iter()
                .find(|q| q.thing == T::Knight)
                .unwrap()
                .height;
            retouch::change_plan(&mut p, &[retouch::Change::Remove("the horse")], false).unwrap();
            let k = p.subjects.iter().find(|q| q.thing == T::Knight).unwrap();
            assert!(k.on.is_none() && k.spot == compose::Spot::Ground);
            assert_eq!(k.y, horse_y, "stands where the horse stood");
            assert!(k.look.figure.pose.is_none() && !k.look.figure.seated);
            assert!(
                k.height >= rode * 0.99,
                "standing is not shorter than riding"
            );

            let mut p = plan_of("three cats in a garden", seed);
            let cats = |p: &Plan| p.subjects.iter().filter(|q| q.thing == T::Cat).count();
            assert_eq!(cats(&p), 3);
            let nearest = p
                .subjects
                .iter()
                .filter(|q| q.thing == T::Cat)
                .map(|q| q.y)
                .fold(f32::MIN, f32::max);
            retouch::change_plan(&mut p, &[retouch::Change::Remove("one of the cats")], false)
                .unwrap();
            assert_eq!(cats(&p), 2, "one of three");
            assert!(
                p.subjects
                    .iter()
                    .all(|q| q.y < nearest || q.thing != T::Cat)
            );
            retouch::change_plan(&mut p, &[retouch::Change::Remove("одну кошку")], true).unwrap();
            assert_eq!(cats(&p), 1);
            retouch::change_plan(&mut p, &[retouch::Change::Remove("the cats")], false).unwrap();
            assert_eq!(cats(&p), 0);
        }
    }

    /// Boats float where the water shows in front of any bank or headland (so neither they nor
    /// their reflections lie on the land), and a stormy sky is a grey day or night, never the
    /// brown of a low sun behind overcast.
    #[test]
    fn boats_float_clear_of_the_bank_and_storms_are_grey() {
        let mut checked = 0;
        for seed in 0..40 {
            for prompt in [
                "a boat on a lake, cloudy day",
                "a red boat on a forest lake",
            ] {
                let p = plan_of(prompt, seed);
                for b in p.subjects.iter().filter(|q| q.spot == compose::Spot::Water) {
                    let land = compose::land_over_water(&p, b.x);
                    assert!(
                        b.y < land,
                        "{prompt} {seed}: afloat at {} but the land starts at {land}",
                        b.y
                    );
                    checked += usize::from(land < p.h as f32);
                }
            }
            for prompt in ["a stormy sea", "rain over the lake", "a ship in a storm"] {
                let p = plan_of(prompt, seed);
                assert_ne!(p.time, prompt::Time::Golden, "{prompt} {seed}");
            }
        }
        assert!(
            checked > 5,
            "some scenes have land in front of the water: {checked}"
        );
    }

    fn plan_of(prompt: &str, seed: u64) -> Plan {
        let theme = Theme::read(prompt);
        let mut rng = Rng::new(seed ^ prompt_hash(prompt));
        Plan::new(&theme, Model::Fast, 1024, 683, &mut rng)
    }

    /// The layering rules: an overcast sky shows no stars and no sun or moon unless they are
    /// named; a sun or moon over water stays above the water line (else the water mirrors a
    /// body the sea hides); islands carry palms only in a warm scene.
    #[test]
    fn overcast_skies_low_suns_and_island_props() {
        for seed in 0..24 {
            for prompt in [
                "a storm at sea",
                "snowfall at night in a village",
                "rain at night over the lake",
            ] {
                let p = plan_of(prompt, seed);
                assert!(
                    p.sun.is_none() && p.moon.is_none(),
                    "{prompt} {seed}: a body in an overcast sky"
                );
                assert_eq!(p.stars, 0.0, "{prompt} {seed}: stars through the clouds");
            }
            let p = plan_of("a storm at night with the moon", seed);
            assert!(p.moon.is_some(), "a named moon stays");
            for prompt in [
                "sunset over the sea",
                "the sun setting into the ocean",
                "a beach at night with the moon",
            ] {
                let p = plan_of(prompt, seed);
                let line = p.water.map_or(f32::MAX, |w| w.y);
                for b in p.sun.iter().chain(p.moon.iter().map(|m| &m.body)) {
                    assert!(
                        b.y + b.r < line,
                        "{prompt} {seed}: a body below the water line"
                    );
                }
            }
            assert!(!plan_of("an island in a storm", seed).island_palms);
            assert!(plan_of("a tropical island in a storm", seed).island_palms);
            assert!(plan_of("an island in the sea", seed).island_palms);
        }
        assert_eq!(
            plan_of("the sun setting into the ocean", 1).time,
            prompt::Time::Golden
        );
    }

    fn spec(prompt: &str, model: Model, ratio: Ratio, seed: u64) -> GenerateSpec {
        GenerateSpec {
            noise: None,
            loras: Vec::new(),
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
            details: None,
            scene: None,
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
                mask: None,
                loras: Vec::new(),
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
            mask: None,
            loras: Vec::new(),
        });
        assert!(matches!(bad_image, Err(RenderError::InvalidImage(_))));
        let bad_text = ProceduralRenderer.edit(&EditSpec {
            source: sample_png(),
            instruction: "qwerty".to_owned(),
            seed: 1,
            mask: None,
            loras: Vec::new(),
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
                details: None,
                scene: None,
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
