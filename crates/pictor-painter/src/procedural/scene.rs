//! Scene planning: turns a [`Theme`], a model and a seed into a [`Plan`], a complete
//! description of what to paint (palette, sky, celestial bodies, terrain layers back to front,
//! water, atmosphere). Painting it is the job of the layer modules; keeping the two apart lets
//! the planner grow (new scene kinds, remote models' compositions) without touching pixel code.
//!
//! Lengths are planned in "units" of a thousandth of the picture's long side, so one prompt and
//! seed give the same composition at every model's resolution.

use super::canvas::{Rgb, hue_rotate, mix, rgb, scale, tint};
use super::compose::{Placed, Setting, Stage};
use super::noise::Rng;
use super::prompt::{Element, Habitat, Mood, Phase, Season, Target, Theme, Time, View};
use crate::Model;
use crate::style::Style;

/// How much work a model spends on a picture.
#[derive(Debug, Clone, Copy)]
pub struct Detail {
    /// Terrain layers in a land scene.
    pub layers: usize,
    /// Octaves of the 1D ridge noise.
    pub ridge_octaves: u32,
    /// Octaves of the 2D fields (clouds, water, texture).
    pub field_octaves: u32,
    /// Grid step of the 2D fields, in pixels.
    pub cell: usize,
    /// Silhouette samples per pixel column (2 = supersampled edges).
    pub supersample: usize,
    /// Surface texture on terrain.
    pub texture: bool,
    pub star_factor: f32,
    pub object_factor: f32,
    /// Amplitude of film grain (0 keeps PNGs about half the size).
    pub grain: f32,
    pub vignette: f32,
}

impl Detail {
    pub fn for_model(model: Model) -> Detail {
        match model {
            Model::Fast => Detail {
                layers: 3,
                ridge_octaves: 5,
                field_octaves: 3,
                cell: 8,
                supersample: 1,
                texture: true,
                star_factor: 1.0,
                object_factor: 0.7,
                grain: 0.0,
                vignette: 0.22,
            },
            Model::Artist => Detail {
                layers: 5,
                ridge_octaves: 7,
                field_octaves: 5,
                cell: 6,
                supersample: 1,
                texture: true,
                star_factor: 1.6,
                object_factor: 1.0,
                grain: 0.0,
                vignette: 0.28,
            },
            Model::Plus => Detail {
                layers: 6,
                ridge_octaves: 8,
                field_octaves: 6,
                cell: 5,
                supersample: 2,
                texture: true,
                star_factor: 2.2,
                object_factor: 1.3,
                grain: 0.0,
                vignette: 0.3,
            },
        }
    }
}

/// All colours of a scene, after the prompt's colour words were applied.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    pub sky_top: Rgb,
    pub sky_mid: Rgb,
    pub sky_low: Rgb,
    pub glow: Rgb,
    pub sun: Rgb,
    pub cloud_light: Rgb,
    pub cloud_dark: Rgb,
    pub haze: Rgb,
    pub land_far: Rgb,
    pub land_near: Rgb,
    pub foliage: Rgb,
    pub water: Rgb,
    pub snow: Rgb,
    pub sand: Rgb,
    pub building: Rgb,
    pub window: Rgb,
    /// Probability that a window is lit.
    pub window_lit: f32,
    pub nebula: [Rgb; 2],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sky {
    Earth,
    Space,
}

#[derive(Debug, Clone, Copy)]
pub struct Body {
    pub x: f32,
    pub y: f32,
    pub r: f32,
}

#[derive(Debug, Clone, Copy)]
pub struct Moon {
    pub body: Body,
    /// Centre offset of the shadow disc in radii; `None` is a full moon.
    pub shadow: Option<(f32, f32)>,
}

#[derive(Debug, Clone, Copy)]
pub struct Planet {
    pub body: Body,
    pub colors: [Rgb; 2],
    /// Direction the light comes from (x, y), roughly unit length.
    pub light: (f32, f32),
    /// Ring tilt in radians, if the planet has rings.
    pub ring: Option<f32>,
    pub seed: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct Glow {
    pub x: f32,
    pub y: f32,
    /// Radius of the wide halo and its strength.
    pub radius: f32,
    pub strength: f32,
}

#[derive(Debug, Clone)]
pub enum Objects {
    None,
    Trees {
        count: usize,
        height: f32,
        /// Share of conifers (the rest are round deciduous trees).
        conifers: f32,
        color: Rgb,
    },
    City {
        min_height: f32,
        max_height: f32,
        color: Rgb,
        window: Rgb,
        lit: f32,
        /// Window grid step in pixels.
        window_step: f32,
    },
}

/// One terrain silhouette, filled from its ridge line down to the bottom of the picture.
#[derive(Debug, Clone)]
pub struct Layer {
    /// 0 = farthest, 1 = nearest.
    pub depth: f32,
    /// Mean ground line in pixels, and how much the ground rises above it.
    pub base: f32,
    pub amp: f32,
    /// Change of the ground line from the left edge to the right edge, in pixels.
    pub tilt: f32,
    /// Noise frequency per pixel.
    pub freq: f32,
    /// 0 = rolling hills, 1 = jagged peaks.
    pub sharp: f32,
    pub seed: u32,
    pub top: Rgb,
    pub bottom: Rgb,
    /// Snow above this line (pixels), with this colour.
    pub snowline: Option<f32>,
    pub snow: Rgb,
    /// A lit rim along the ridge (sunset edges, surf on a beach): colour, width in pixels.
    pub rim: Option<(Rgb, f32)>,
    /// Strength of slope shading and the side the light comes from (-1 left, 1 right).
    pub relief: f32,
    pub light_side: f32,
    /// Cap on ridge noise octaves (dunes are smooth whatever the model).
    pub max_octaves: u32,
    /// Strength of the surface texture.
    pub texture: f32,
    pub objects: Objects,
}

#[derive(Debug, Clone, Copy)]
pub struct Water {
    /// The water line in pixels.
    pub y: f32,
    /// Water is painted before `layers[before]` (the layers from there on are foreground).
    pub before: usize,
    pub seed: u32,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub w: usize,
    pub h: usize,
    /// Pixels per unit (a thousandth of the long side).
    pub unit: f32,
    pub detail: Detail,
    pub pal: Palette,
    /// Where the sky gradient reaches its horizon colour.
    pub horizon: f32,
    pub glow: Option<Glow>,
    pub clouds: f32,
    pub stars: f32,
    pub milky_way: Option<(f32, f32)>,
    pub nebula: bool,
    pub sun: Option<Body>,
    pub moon: Option<Moon>,
    pub planet: Option<Planet>,
    pub layers: Vec<Layer>,
    pub water: Option<Water>,
    pub fog: f32,
    pub snowfall: f32,
    pub abstract_art: bool,
    /// Colour ramp of an abstract picture, dark to light.
    pub art_ramp: [Rgb; 4],
    pub seed: u32,
    pub time: Time,
    pub setting: Setting,
    pub style: Style,
    /// Things to draw, back to front.
    pub subjects: Vec<Placed>,
    /// The terrain layer ground things stand on.
    pub stage: Stage,
    pub aurora: bool,
    pub rainbow: bool,
    pub river: bool,
    pub road: bool,
    pub flowers: Option<Vec<Rgb>>,
    pub rain: f32,
    pub lightning: bool,
    pub fireflies: bool,
    /// Retro synthwave: striped sun and a neon grid floor.
    pub synthwave: bool,
    /// Neon city lights.
    pub neon: bool,
    pub islands: usize,
    /// Islands carry a palm or two.
    pub island_palms: bool,
    /// Indoors: the room's walls, floor and furnishings (a still life without one is a table).
    pub room: Option<Room>,
}

/// A room: the back wall down to `floor_y`, a wooden floor in front, and what the prompt names
/// on the wall (a window, a fireplace, bookshelves, a kitchen's cabinets and counter).
#[derive(Debug, Clone, Copy)]
pub struct Room {
    pub floor_y: f32,
    /// Left, top, width, height.
    pub window: Option<(f32, f32, f32, f32)>,
    /// Centre x and width.
    pub fireplace: Option<(f32, f32)>,
    pub shelves: bool,
    pub kitchen: bool,
    /// What small things stand on: the kitchen counter, or a low table under them (left,
    /// right, top), set once they are placed.
    pub table: Option<(f32, f32, f32)>,
    pub wall: Rgb,
}

impl Room {
    fn plan(theme: &Theme, time: Time, w: f32, h: f32, r: &mut Rng) -> Room {
        let kitchen = theme.has(Element::Kitchen);
        let shelves = theme.has(Element::Library);
        let fireplace = theme.has(Element::Fireplace);
        let side = if r.chance(0.5) { 0.0 } else { 1.0 };
        let fireplace = fireplace.then(|| {
            let cx = if shelves {
                0.5
            } else {
                0.62 + 0.1 * side - 0.1
            };
            (w * cx, w * 0.3)
        });
        // A window when named, and in a plain room for its light; not behind a full wall of
        // shelves unless named.
        let window = (theme.has(Element::Window)
            || (!shelves && !kitchen && fireplace.is_none())
            || (kitchen && r.chance(0.7)))
        .then(|| {
            let ww = w * r.range(0.2, 0.26);
            let x = match fireplace {
                Some((fx, _)) if fx > w * 0.5 => w * r.range(0.08, 0.16),
                Some(_) => w - ww - w * r.range(0.08, 0.16),
                None => w * (0.14 + 0.5 * side) + w * r.range(-0.04, 0.04),
            };
            let top = h * if kitchen { 0.12 } else { 0.14 };
            (x, top, ww, h * if kitchen { 0.3 } else { 0.4 })
        });
        let wall = match time {
            Time::Night => rgb(84, 66, 58),
            Time::Golden => rgb(222, 190, 150),
            Time::Day => rgb(226, 214, 192),
        };
        let wall = theme
            .color_for(super::prompt::Target::Land)
            .map_or(wall, |c| mix(wall, c, 0.5));
        Room {
            floor_y: h * 0.66,
            window,
            fireplace,
            shelves,
            kitchen,
            table: None,
            wall,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Land {
    None,
    Hills,
    Mountains,
    Dunes,
}

impl Plan {
    pub fn new(theme: &Theme, model: Model, w: usize, h: usize, rng: &mut Rng) -> Plan {
        let detail = Detail::for_model(model);
        let unit = w.max(h) as f32 / 1000.0;
        let (wf, hf) = (w as f32, h as f32);
        let mut r = rng.fork("layout");

        let space = theme.has(Element::Space);
        let style = theme.style();
        let preferred = if theme.has(Element::Aurora) || style == Style::Neon {
            Some(Time::Night)
        } else if style == Style::Poster {
            Some(Time::Golden)
        } else if theme.has(Element::Rainbow)
            || theme.has(Element::Table)
            || theme.has(Element::Underwater)
        {
            Some(Time::Day)
        } else {
            match theme.mood {
                Some(Mood::Cheerful) | Some(Mood::Gloomy) => Some(Time::Day),
                Some(Mood::Romantic) | Some(Mood::Cozy) => Some(Time::Golden),
                _ => None,
            }
        };
        let time = theme.time.or(preferred).unwrap_or_else(|| {
            if space || theme.has(Element::Moon) || theme.has(Element::Stars) {
                Time::Night
            } else if theme.has(Element::Storm) || theme.has(Element::Rain) {
                // Under an overcast sky there is no low sun to colour it: grey day or night.
                if r.chance(0.25) {
                    Time::Night
                } else {
                    Time::Day
                }
            } else if theme.has(Element::Sun) {
                if r.chance(0.3) {
                    Time::Golden
                } else {
                    Time::Day
                }
            } else {
                let p = r.unit();
                // Things read best in daylight; empty landscapes may be moody.
                let (day, golden) = if theme.subjects.is_empty() {
                    (0.5, 0.8)
                } else {
                    (0.6, 0.9)
                };
                if p < day {
                    Time::Day
                } else if p < golden {
                    Time::Golden
                } else {
                    Time::Night
                }
            }
        });
        let sky = if space { Sky::Space } else { Sky::Earth };

        let setting = Setting::choose(theme);
        let named_land = theme.has(Element::Mountains)
            || theme.has(Element::Hills)
            || theme.has(Element::Forest)
            || theme.has(Element::City)
            || theme.has(Element::Desert)
            || theme.has(Element::Flowers)
            || theme.has(Element::Road)
            || theme.has(Element::Snow);
        // Boats, swans and whale tails need water; an island is in the sea.
        let wet_things = theme
            .subjects
            .iter()
            .any(|s| matches!(s.thing.habitat(), Habitat::Water | Habitat::Underwater));
        let named_water = theme.has(Element::Sea)
            || theme.has(Element::Lake)
            || theme.has(Element::Beach)
            || theme.has(Element::Island)
            || (theme.has(Element::Cliff) && !theme.has(Element::Mountains))
            || wet_things;
        let land = if theme.has(Element::Desert) {
            Land::Dunes
        } else if theme.has(Element::Mountains) {
            Land::Mountains
        } else if theme.has(Element::Hills) || theme.has(Element::Forest) {
            Land::Hills
        } else if theme.has(Element::City) {
            Land::None
        } else if space {
            if theme.has(Element::Snow) {
                Land::Mountains
            } else {
                Land::None
            }
        } else if named_land {
            Land::Hills
        } else if named_water {
            match r.below(3) {
                0 => Land::Mountains,
                1 => Land::Hills,
                _ => Land::None,
            }
        } else if r.chance(0.5) {
            Land::Mountains
        } else {
            Land::Hills
        };
        let water =
            named_water || (!named_land && !space && theme.subjects.is_empty() && r.chance(0.3));
        let synthwave = style == Style::Neon && !space && setting == Setting::Landscape;
        let abstract_art = theme.has(Element::Abstract) && !named_land && !named_water;

        let mut pal = palette(theme, time, sky, &mut rng.fork("palette"));
        season_and_mood(&mut pal, theme, time, synthwave);

        let horizon = if sky == Sky::Space && land == Land::None && !theme.has(Element::City) {
            hf * 1.05
        } else if water {
            hf * r.range(0.52, 0.64)
        } else {
            hf * r.range(0.5, 0.62)
        };
        // A viewpoint moves the horizon: high when seen from above, low when seen from below.
        let horizon = match (theme.view, sky) {
            (Some(View::Aerial), Sky::Earth) => hf * 0.24,
            (Some(View::Low), Sky::Earth) => hf * 0.8,
            _ => horizon,
        };

        // Light: the sun by day and at golden hour, the moon at night.
        let mut sun = None;
        let mut moon = None;
        let show_sun = sky == Sky::Earth
            && (synthwave
                || match time {
                    Time::Golden => true,
                    Time::Day => theme.has(Element::Sun) || r.chance(0.5),
                    Time::Night => false,
                });
        if show_sun {
            let radius = unit
                * if time == Time::Golden {
                    r.range(38.0, 58.0)
                } else {
                    r.range(26.0, 38.0)
                };
            let radius = if synthwave { unit * 150.0 } else { radius };
            let y = if synthwave {
                horizon - radius * 0.75
            } else if time == Time::Golden {
                horizon - radius * r.range(-0.3, 2.2)
            } else {
                horizon * r.range(0.16, 0.42)
            };
            sun = Some(Body {
                x: wf * r.range(0.2, 0.8),
                y,
                r: radius,
            });
        }
        let show_moon = theme.has(Element::Moon)
            || (time == Time::Night && sky == Sky::Earth && !synthwave && r.chance(0.8));
        if show_moon {
            let radius = unit * r.range(30.0, 48.0);
            let shadow = if r.chance(0.35) {
                None
            } else {
                let side = if r.chance(0.5) { 1.0 } else { -1.0 };
                Some((side * r.range(0.6, 1.4), r.range(-0.2, 0.2)))
            };
            let shadow = match theme.phase {
                Some(Phase::Full) => None,
                Some(Phase::Half) => Some((1.0, 0.0)),
                Some(Phase::Crescent) => Some((0.45, -0.15)),
                None => shadow,
            };
            moon = Some(Moon {
                body: Body {
                    x: wf * r.range(0.15, 0.85),
                    y: horizon.min(hf) * r.range(0.14, 0.4),
                    r: radius,
                },
                shadow,
            });
        }
        let glow = match (sun, moon) {
            (Some(s), _) => {
                let golden = time == Time::Golden;
                Some(Glow {
                    x: s.x,
                    y: s.y,
                    radius: unit * if golden { 380.0 } else { 170.0 },
                    strength: if golden { 0.9 } else { 0.55 },
                })
            }
            (None, Some(m)) => Some(Glow {
                x: m.body.x,
                y: m.body.y,
                radius: unit * 110.0,
                strength: 0.35,
            }),
            _ => None,
        };

        let planet = if theme.has(Element::Planet) || (space && r.chance(0.7)) {
            let c1 = theme
                .color(0)
                .unwrap_or(hue_rotate(rgb(214, 150, 96), r.range(-160.0, 160.0)));
            let c2 = theme.color(1).unwrap_or(mix(c1, rgb(240, 230, 210), 0.55));
            let radius = unit * r.range(90.0, 210.0);
            let angle = r.range(0.5, 2.6);
            Some(Planet {
                body: Body {
                    x: wf * r.range(0.2, 0.8),
                    y: horizon.min(hf) * r.range(0.25, 0.55),
                    r: radius,
                },
                colors: [c1, c2],
                light: (angle.cos(), -angle.sin()),
                ring: r.chance(0.55).then(|| r.range(-0.45, 0.45)),
                seed: r.next_u32(),
            })
        } else {
            None
        };

        let stars = match (sky, time) {
            (Sky::Space, _) => 2200.0,
            (_, Time::Night) => 750.0,
            (_, Time::Golden) => 40.0,
            (_, Time::Day) => 0.0,
        } * detail.star_factor
            * if theme.has(Element::Stars) { 1.5 } else { 1.0 };
        let milky_way = ((time == Time::Night || sky == Sky::Space)
            && model != Model::Fast
            && (theme.has(Element::Stars) || sky == Sky::Space || r.chance(0.6)))
        .then(|| (r.range(-0.9, 0.9), r.range(0.25, 0.75)));

        let mut clouds = match time {
            Time::Day => r.range(0.15, 0.55),
            Time::Golden => r.range(0.3, 0.7),
            Time::Night => r.range(0.0, 0.35),
        };
        if theme.has(Element::Clouds) {
            clouds = clouds.max(0.75);
        }
        if theme.has(Element::Storm) {
            clouds = 0.95;
        }
        match theme.mood {
            Some(Mood::Calm) | Some(Mood::Cheerful) => clouds *= 0.6,
            Some(Mood::Dramatic) => clouds = clouds.max(0.7),
            Some(Mood::Gloomy) => clouds = clouds.max(0.85),
            _ => {}
        }
        if theme.has(Element::Rain) {
            clouds = clouds.max(0.85);
        }
        if theme.has(Element::ClearSky) || sky == Sky::Space || abstract_art || synthwave {
            clouds = 0.0;
        }
        let need_stage = setting == Setting::Landscape
            && theme
                .subjects
                .iter()
                .any(|s| matches!(s.thing.habitat(), Habitat::Ground | Habitat::Table));

        let mut planner = LayerPlanner {
            theme,
            pal: &pal,
            detail: &detail,
            time,
            unit,
            w: wf,
            h: hf,
            horizon,
            light_side: sun
                .or(moon.map(|m| m.body))
                .map_or(1.0, |b| if b.x < wf / 2.0 { -1.0 } else { 1.0 }),
            rng: rng.fork("terrain"),
            layers: Vec::new(),
            need_stage,
            stage: None,
            synthwave,
            cliff: theme.has(Element::Cliff),
        };
        let water_plan = if setting == Setting::Landscape {
            planner.plan(land, water)
        } else {
            None
        };
        let stage_layer = planner.stage;
        let layers = planner.layers;

        let fog = if theme.has(Element::Fog) {
            0.55
        } else if theme.has(Element::Storm) {
            0.35
        } else {
            0.0
        };
        let snowfall = if theme.has(Element::Snow) && (time != Time::Day || r.chance(0.5)) {
            if theme.has(Element::Storm) { 2.5 } else { 1.0 }
        } else {
            0.0
        };

        let flowers = theme.has(Element::Flowers).then(|| {
            let mut colors: Vec<Rgb> = theme
                .colors
                .iter()
                .filter(|(_, t)| matches!(t, Target::Land | Target::Any))
                .map(|(c, _)| *c)
                .collect();
            if colors.is_empty() {
                colors = match theme.season {
                    Some(Season::Autumn) => vec![rgb(230, 140, 40), rgb(200, 60, 40)],
                    _ => vec![
                        rgb(230, 40, 50),
                        rgb(250, 210, 50),
                        rgb(250, 250, 245),
                        rgb(170, 110, 220),
                        rgb(245, 130, 180),
                    ],
                };
            }
            colors
        });
        let rain = if theme.has(Element::Rain) {
            1.0
        } else if theme.has(Element::Storm) {
            0.6
        } else {
            0.0
        };
        let stage = match stage_layer {
            Some(i) => Stage::Layer(i),
            None => Stage::Flat(hf * 0.9),
        };
        // Under a storm, rain or falling snow the sky is overcast: no stars (falling snow would
        // read as stars) and no sun or moon unless the prompt names them. Decided after every
        // draw above, so other scenes keep their random numbers.
        let overcast = theme.has(Element::Storm) || rain > 0.0 || snowfall > 0.0;
        let (mut sun, mut moon, mut glow, mut stars, mut milky_way) =
            (sun, moon, glow, stars, milky_way);
        if overcast {
            if !theme.has(Element::Stars) {
                stars = 0.0;
                milky_way = None;
            }
            if !theme.has(Element::Sun) && sun.take().is_some() {
                glow = None;
            }
            if !theme.has(Element::Moon) && moon.take().is_some() && sun.is_none() {
                glow = None;
            }
        }
        // A sun or moon low over the water stays above the water line: a part hidden by the sea
        // would still be mirrored in it (the water mirrors what is painted above its line).
        if let Some(wp) = water_plan {
            let lift = |b: &mut Body| {
                if b.y + b.r > wp.y - unit {
                    b.y = wp.y - unit - b.r * 1.05;
                }
            };
            if let Some(s) = sun.as_mut() {
                lift(s);
                if let Some(g) = glow.as_mut() {
                    g.y = s.y;
                }
            }
            if let Some(m) = moon.as_mut() {
                lift(&mut m.body);
                if let (None, Some(g)) = (sun, glow.as_mut()) {
                    g.y = m.body.y;
                }
            }
        }
        let mut plan = Plan {
            w,
            h,
            unit,
            detail,
            pal,
            horizon,
            glow,
            clouds,
            stars,
            milky_way,
            nebula: sky == Sky::Space,
            sun,
            moon,
            planet,
            layers,
            water: water_plan,
            fog,
            snowfall,
            abstract_art,
            art_ramp: art_ramp(theme, &mut r),
            seed: rng.fork("pixels").next_u32(),
            time,
            setting,
            style,
            subjects: Vec::new(),
            stage,
            aurora: theme.has(Element::Aurora) && sky == Sky::Earth,
            rainbow: theme.has(Element::Rainbow) && time != Time::Night,
            river: theme.has(Element::River) && setting == Setting::Landscape,
            road: theme.has(Element::Road) && setting == Setting::Landscape,
            flowers: flowers.filter(|_| setting == Setting::Landscape),
            rain,
            lightning: theme.has(Element::Storm) && r.chance(0.75),
            fireflies: theme.mood == Some(Mood::Magical) && time != Time::Day,
            synthwave,
            neon: theme.has(Element::Neon) || (style == Style::Neon && theme.has(Element::City)),
            islands: usize::from(theme.has(Element::Island)) * (1 + r.below(2)),
            // Palms on islands in a warm scene, not in a storm or snow unless it is tropical.
            island_palms: theme.has(Element::Beach)
                || !(theme.has(Element::Storm) || theme.has(Element::Snow)),
            room: (setting == Setting::StillLife && theme.indoors())
                .then(|| Room::plan(theme, time, wf, hf, &mut rng.fork("room"))),
        };
        if let Some(room) = plan.room.as_mut()
            && room.kitchen
        {
            room.table = Some((0.0, wf, hf * 0.6));
        }
        plan.subjects = super::compose::place(theme, &plan, &mut rng.fork("subjects"));
        // The low table goes under the small things placed on it.
        if let Some(room) = plan.room.as_mut()
            && room.table.is_none()
        {
            let on: Vec<&super::compose::Placed> = plan
                .subjects
                .iter()
                .filter(|p| p.spot == super::compose::Spot::Table)
                .collect();
            if let (Some(lo), Some(hi)) = (
                on.iter().map(|p| p.x - p.height * 0.8).reduce(f32::min),
                on.iter().map(|p| p.x + p.height * 0.8).reduce(f32::max),
            ) {
                room.table = Some((lo.max(0.0), hi.min(wf), on[0].y.max(hf * 0.7)));
            }
        }
        plan
    }
}

/// Dark-to-light colours for abstract pictures: the prompt's colours, or a random hue.
fn art_ramp(theme: &Theme, r: &mut Rng) -> [Rgb; 4] {
    let white = rgb(250, 248, 240);
    let first = theme
        .color(0)
        .unwrap_or_else(|| hue_rotate(rgb(200, 70, 120), r.range(-180.0, 180.0)));
    let second = theme
        .color(1)
        .unwrap_or_else(|| hue_rotate(first, r.range(30.0, 70.0)));
    [scale(first, 0.18), first, second, mix(second, white, 0.55)]
}

/// Base colours for a time of day and sky, then the prompt's colour words on top.
fn palette(theme: &Theme, time: Time, sky: Sky, r: &mut Rng) -> Palette {
    let mut p = match time {
        Time::Day => Palette {
            sky_top: rgb(34, 96, 192),
            sky_mid: rgb(92, 156, 224),
            sky_low: rgb(198, 222, 240),
            glow: rgb(255, 244, 214),
            sun: rgb(255, 252, 236),
            cloud_light: rgb(255, 255, 255),
            cloud_dark: rgb(166, 180, 204),
            haze: rgb(178, 204, 228),
            land_far: rgb(88, 120, 160),
            land_near: rgb(58, 116, 54),
            foliage: rgb(26, 70, 36),
            water: rgb(36, 96, 146),
            snow: rgb(242, 247, 255),
            sand: rgb(228, 194, 136),
            building: rgb(112, 124, 144),
            window: rgb(180, 206, 230),
            window_lit: 0.0,
            nebula: [rgb(140, 60, 200), rgb(40, 120, 220)],
        },
        Time::Golden => Palette {
            sky_top: rgb(44, 38, 100),
            sky_mid: rgb(198, 86, 98),
            sky_low: rgb(255, 172, 88),
            glow: rgb(255, 198, 120),
            sun: rgb(255, 238, 196),
            cloud_light: rgb(255, 186, 140),
            cloud_dark: rgb(108, 58, 98),
            haze: rgb(222, 132, 112),
            land_far: rgb(122, 72, 112),
            land_near: rgb(44, 26, 50),
            foliage: rgb(24, 14, 30),
            water: rgb(72, 40, 82),
            snow: rgb(252, 214, 204),
            sand: rgb(206, 134, 94),
            building: rgb(52, 36, 62),
            window: rgb(255, 204, 124),
            window_lit: 0.3,
            nebula: [rgb(200, 80, 140), rgb(80, 60, 200)],
        },
        Time::Night => Palette {
            sky_top: rgb(4, 6, 20),
            sky_mid: rgb(12, 22, 56),
            sky_low: rgb(36, 54, 100),
            glow: rgb(150, 170, 224),
            sun: rgb(242, 242, 228),
            cloud_light: rgb(108, 122, 160),
            cloud_dark: rgb(20, 26, 48),
            haze: rgb(40, 56, 98),
            land_far: rgb(30, 40, 74),
            land_near: rgb(8, 12, 26),
            foliage: rgb(6, 10, 20),
            water: rgb(10, 18, 42),
            snow: rgb(150, 172, 214),
            sand: rgb(86, 86, 108),
            building: rgb(16, 20, 36),
            window: rgb(255, 212, 132),
            window_lit: 0.5,
            nebula: [rgb(150, 50, 190), rgb(30, 110, 210)],
        },
    };
    if sky == Sky::Space {
        p.sky_top = rgb(1, 1, 6);
        p.sky_mid = rgb(5, 5, 18);
        p.sky_low = rgb(14, 10, 32);
        p.haze = rgb(30, 24, 60);
    }
    if theme.has(Element::Desert) {
        p.land_far = mix(p.land_far, rgb(214, 160, 104), 0.75);
        p.land_near = mix(p.land_near, rgb(220, 150, 80), 0.8);
        p.sand = mix(p.sand, rgb(220, 150, 80), 0.6);
        p.sky_low = mix(p.sky_low, rgb(244, 218, 180), 0.5);
        p.haze = mix(p.haze, rgb(232, 204, 168), 0.5);
    }
    if theme.has(Element::Snow) {
        p.land_near = mix(p.land_near, p.snow, 0.85);
        p.land_far = mix(p.land_far, p.snow, 0.45);
        p.foliage = mix(p.foliage, rgb(20, 50, 44), 0.5);
    }
    if theme.has(Element::Forest) {
        p.land_near = mix(p.land_near, p.foliage, 0.35);
    }
    if theme.has(Element::Storm) {
        for c in [&mut p.sky_top, &mut p.sky_mid, &mut p.sky_low, &mut p.haze] {
            *c = scale(mix(*c, rgb(110, 116, 128), 0.6), 0.6);
        }
        p.cloud_light = scale(p.cloud_light, 0.7);
        p.cloud_dark = scale(p.cloud_dark, 0.55);
    }

    // Colour words: each colours what it was said of ("green hills", "red sky"); a colour said
    // of the whole picture colours the sky, and the second such colour the land.
    let any: Vec<Rgb> = theme
        .colors
        .iter()
        .filter(|(_, t)| *t == Target::Any)
        .map(|(c, _)| *c)
        .collect();
    let land_named = theme.color_for(Target::Land);
    let water_named = theme.color_for(Target::Water);
    let sky_color = theme
        .color_for(Target::Sky)
        .or(any.first().copied())
        .map(|c| (c, 1.0))
        .or(water_named.map(|c| (c, 0.45)))
        .or(land_named.map(|c| (c, 0.3)));
    let land_color = land_named
        .map(|c| (c, 0.75))
        .or(any.get(1).map(|c| (*c, 0.6)))
        .or(any.first().map(|c| (*c, 0.4)));
    let water_color = water_named
        .map(|c| (c, 0.65))
        .or(sky_color.map(|(c, k)| (c, 0.55 * k)));
    if let Some((c, k)) = water_color {
        p.water = tint(p.water, c, k);
    }
    if let Some((c, k)) = sky_color {
        for (slot, weight) in [
            (&mut p.sky_top, 0.6),
            (&mut p.sky_mid, 0.65),
            (&mut p.sky_low, 0.5),
            (&mut p.haze, 0.5),
            (&mut p.glow, 0.35),
            (&mut p.cloud_light, 0.3),
            (&mut p.cloud_dark, 0.5),
            (&mut p.nebula[0], 0.7),
        ] {
            *slot = tint(*slot, c, weight * k);
        }
    }
    if let Some((c, k)) = land_color {
        for slot in [
            &mut p.land_far,
            &mut p.land_near,
            &mut p.foliage,
            &mut p.sand,
            &mut p.building,
            &mut p.nebula[1],
        ] {
            *slot = tint(*slot, c, k);
        }
    }
    if theme.colors.is_empty() && theme.flavor != 0 {
        // No colour asked for: the other words shift the hues a little.
        let angle = (theme.flavor % 41) as f32 - 20.0 + r.range(-4.0, 4.0);
        let [nebula_a, nebula_b] = &mut p.nebula;
        for slot in [
            &mut p.sky_top,
            &mut p.sky_mid,
            &mut p.sky_low,
            &mut p.haze,
            &mut p.cloud_dark,
            &mut p.land_far,
            &mut p.land_near,
            &mut p.foliage,
            &mut p.water,
            nebula_a,
            nebula_b,
        ] {
            *slot = hue_rotate(*slot, angle);
        }
    }

    if theme.darkness > 0 {
        let k = 0.62f32.powi(theme.darkness.min(3));
        for slot in [
            &mut p.sky_top,
            &mut p.sky_mid,
            &mut p.sky_low,
            &mut p.haze,
            &mut p.cloud_light,
            &mut p.cloud_dark,
            &mut p.land_far,
            &mut p.land_near,
            &mut p.foliage,
            &mut p.water,
            &mut p.building,
            &mut p.sand,
        ] {
            *slot = scale(*slot, k);
        }
    } else if theme.darkness < 0 {
        let k = (0.22 * -theme.darkness as f32).min(0.5);
        let white = rgb(245, 245, 250);
        for slot in [
            &mut p.sky_top,
            &mut p.sky_mid,
            &mut p.sky_low,
            &mut p.haze,
            &mut p.cloud_dark,
            &mut p.land_far,
            &mut p.land_near,
            &mut p.water,
            &mut p.building,
            &mut p.sand,
        ] {
            *slot = mix(*slot, white, k);
        }
    }
    p
}

/// Plans terrain layers back to front; returns where the water goes.
struct LayerPlanner<'a> {
    theme: &'a Theme,
    pal: &'a Palette,
    detail: &'a Detail,
    time: Time,
    unit: f32,
    w: f32,
    h: f32,
    horizon: f32,
    light_side: f32,
    rng: Rng,
    layers: Vec<Layer>,
    /// Ground things need a foreground to stand on.
    need_stage: bool,
    stage: Option<usize>,
    synthwave: bool,
    cliff: bool,
}

impl LayerPlanner<'_> {
    fn plan(&mut self, land: Land, water: bool) -> Option<Water> {
        let city = self.theme.has(Element::City);
        let forest = self.theme.has(Element::Forest);
        let beach = self.theme.has(Element::Beach);
        let n = self.detail.layers;

        if water {
            // Land behind the water sits on the water line; then the water; then an optional
            // foreground (beach, trees on a bank, a rocky headland).
            let behind = match land {
                Land::None => usize::from(!city && self.rng.chance(0.5)),
                _ => (n / 2).max(1),
            };
            for i in 0..behind {
                let d = if behind == 1 {
                    0.2
                } else {
                    0.35 * i as f32 / (behind - 1) as f32
                };
                let kind = if land == Land::Hills || land == Land::None {
                    Land::Hills
                } else {
                    land
                };
                self.land_layer(kind, d, self.horizon + self.unit * 2.0, 0.55);
            }
            if city {
                for i in 0..2usize {
                    self.city_layer(0.15 + 0.2 * i as f32, self.horizon + self.unit, 0.9);
                }
            }
            let water = Water {
                y: self.horizon,
                before: self.layers.len(),
                seed: self.rng.next_u32(),
            };
            if beach {
                self.beach_layer();
                self.stage = Some(self.layers.len() - 1);
            } else if self.need_stage || self.cliff || forest || (!city && self.rng.chance(0.35)) {
                let wooded = (forest || self.rng.chance(0.5)) && !self.need_stage;
                self.headland_layer(wooded);
                self.stage = Some(self.layers.len() - 1);
            }
            return Some(water);
        }

        match land {
            Land::None if city => {
                self.land_layer(Land::Hills, 0.0, self.horizon, 0.4);
                let k = (n - 1).max(2);
                for i in 0..k {
                    let d = 0.15 + 0.8 * i as f32 / (k - 1) as f32;
                    let base = self.horizon + (self.h - self.horizon) * 0.5 * d;
                    self.city_layer(d, base, 1.0 - 0.4 * d);
                }
                if self.need_stage {
                    self.foreground_layer();
                }
            }
            Land::None => {
                if self.need_stage {
                    self.foreground_layer();
                }
            }
            _ => {
                // Synthwave keeps only the far ranges; a neon grid is the floor.
                let n = if self.synthwave { 2 } else { n };
                for i in 0..n {
                    let d = i as f32 / (n - 1).max(1) as f32;
                    let d = if self.synthwave { d * 0.2 } else { d };
                    let base = self.horizon + (self.h - self.horizon) * 0.78 * d.powf(1.25);
                    // Mountains in the back turn into hills in front.
                    let kind = if land == Land::Mountains && d > 0.6 {
                        Land::Hills
                    } else {
                        land
                    };
                    let scale = if land == Land::Mountains {
                        0.2 + 0.8 * (1.0 - d).powf(1.5)
                    } else {
                        1.0 - 0.3 * d
                    };
                    self.land_layer(kind, d, base, scale);
                    if city && (i + 2 == n || (n <= 3 && i == 1)) {
                        self.city_layer(d, base + self.unit * 30.0, 0.6);
                    }
                }
                if forest {
                    self.add_trees();
                }
                if !self.synthwave {
                    self.stage = Some(self.layers.len() - 1);
                }
            }
        }
        None
    }

    fn colors(&self, base: Rgb, depth: f32) -> (Rgb, Rgb) {
        // Desert air is clear: distant dunes keep their colour.
        let far = if self.theme.has(Element::Desert) {
            0.5
        } else {
            0.82
        };
        let haze = (1.0 - depth).powf(1.2) * far;
        let top = mix(base, self.pal.haze, haze);
        let bottom = mix(top, scale(top, 0.72), depth);
        (top, bottom)
    }

    fn land_layer(&mut self, kind: Land, depth: f32, base: f32, size: f32) {
        let r = &mut self.rng;
        let (amp, sharp, period, relief) = match kind {
            Land::Mountains => (
                self.h * 0.3 * size * r.range(0.8, 1.15),
                r.range(0.7, 0.9),
                r.range(420.0, 650.0),
                0.6,
            ),
            Land::Dunes => (
                self.h * 0.16 * size * r.range(0.7, 1.2),
                r.range(0.8, 0.95),
                r.range(500.0, 800.0),
                0.8,
            ),
            Land::Hills | Land::None => (
                self.h * 0.12 * size * r.range(0.7, 1.2),
                r.range(0.0, 0.2),
                r.range(450.0, 750.0),
                0.3,
            ),
        };
        let base_color = match kind {
            Land::Dunes => mix(self.pal.sand, self.pal.land_near, 0.4),
            _ => mix(self.pal.land_far, self.pal.land_near, depth.powf(0.8)),
        };
        let (top, bottom) = self.colors(base_color, depth);
        let snowy = self.theme.has(Element::Snow)
            || (kind == Land::Mountains && depth < 0.5 && self.rng.chance(0.45));
        let snowline =
            (kind == Land::Mountains && snowy).then(|| base - amp * self.rng.range(0.45, 0.65));
        let rim = (self.time == Time::Golden && depth > 0.3)
            .then(|| (mix(self.pal.glow, top, 0.35), self.unit * 2.5));
        let dunes = kind == Land::Dunes;
        let layer = Layer {
            depth,
            base,
            amp,
            tilt: self.h * self.rng.range(-0.06, 0.06),
            freq: 1.0 / (self.unit * period),
            sharp,
            seed: self.rng.next_u32(),
            top,
            bottom,
            snowline,
            snow: mix(self.pal.snow, self.pal.haze, (1.0 - depth) * 0.45),
            rim,
            relief,
            light_side: self.light_side,
            max_octaves: if dunes { 2 } else { 16 },
            texture: if dunes { 0.06 } else { 0.16 },
            objects: Objects::None,
        };
        self.layers.push(layer);
    }

    fn city_layer(&mut self, depth: f32, base: f32, size: f32) {
        let (top, bottom) = self.colors(self.pal.building, depth * 0.8 + 0.2);
        let lit = self.pal.window_lit;
        let window = mix(self.pal.window, top, if lit > 0.0 { 0.0 } else { 0.5 });
        let layer = Layer {
            depth,
            base,
            amp: self.unit * 4.0,
            tilt: 0.0,
            freq: 1.0 / (self.unit * 300.0),
            sharp: 0.0,
            seed: self.rng.next_u32(),
            top,
            bottom,
            snowline: None,
            snow: self.pal.snow,
            rim: None,
            relief: 0.0,
            light_side: self.light_side,
            max_octaves: 16,
            texture: 0.2,
            objects: Objects::City {
                min_height: self.h * 0.06 * size,
                max_height: self.h * 0.34 * size,
                color: top,
                window,
                lit,
                window_step: self.unit * (6.0 + 5.0 * depth),
            },
        };
        self.layers.push(layer);
    }

    fn beach_layer(&mut self) {
        let (top, bottom) = self.colors(self.pal.sand, 0.9);
        let foam = mix(self.pal.snow, self.pal.sky_low, 0.3);
        let side = if self.rng.chance(0.5) { 1.0 } else { -1.0 };
        self.layers.push(Layer {
            depth: 0.9,
            base: self.h * self.rng.range(0.84, 0.9),
            amp: self.h * 0.03,
            tilt: side * self.h * self.rng.range(0.05, 0.14),
            freq: 1.0 / (self.unit * 700.0),
            sharp: 0.0,
            seed: self.rng.next_u32(),
            top,
            bottom,
            snowline: None,
            snow: self.pal.snow,
            rim: Some((foam, self.unit * 5.0)),
            relief: 0.1,
            light_side: self.light_side,
            max_octaves: 16,
            texture: 0.2,
            objects: Objects::None,
        });
    }

    /// A low foreground meadow for things to stand on.
    fn foreground_layer(&mut self) {
        let base = mix(self.pal.land_near, self.pal.foliage, 0.3);
        let (top, bottom) = self.colors(base, 1.0);
        self.layers.push(Layer {
            depth: 1.0,
            base: self.h * 0.93,
            amp: self.h * 0.06,
            tilt: self.h * self.rng.range(-0.04, 0.04),
            freq: 1.0 / (self.unit * 700.0),
            sharp: 0.0,
            seed: self.rng.next_u32(),
            top,
            bottom,
            snowline: None,
            snow: self.pal.snow,
            rim: None,
            relief: 0.2,
            light_side: self.light_side,
            max_octaves: 4,
            texture: 0.18,
            objects: Objects::None,
        });
        self.stage = Some(self.layers.len() - 1);
    }

    /// A bank or rocky headland entering from one side, optionally wooded.
    fn headland_layer(&mut self, wooded: bool) {
        let (top, bottom) = self.colors(self.pal.land_near, 1.0);
        let side = if self.rng.chance(0.5) { 1.0 } else { -1.0 };
        let objects = if wooded {
            Objects::Trees {
                count: (80.0 * self.detail.object_factor) as usize,
                height: self.h * 0.12,
                conifers: 0.8,
                color: self.colors(self.pal.foliage, 1.0).0,
            }
        } else {
            Objects::None
        };
        self.layers.push(Layer {
            depth: 1.0,
            base: self.h * if self.cliff { 0.98 } else { 0.95 },
            amp: self.h * if self.cliff { 0.14 } else { 0.08 },
            tilt: side * self.h * if self.cliff { 0.6 } else { 0.45 },
            freq: 1.0 / (self.unit * 500.0),
            sharp: if self.cliff { 0.6 } else { 0.3 },
            seed: self.rng.next_u32(),
            top,
            bottom,
            snowline: None,
            snow: self.pal.snow,
            rim: None,
            relief: 0.25,
            light_side: self.light_side,
            max_octaves: 16,
            texture: 0.2,
            objects,
        });
    }

    /// Puts forests on the nearer land layers.
    fn add_trees(&mut self) {
        let conifers = if self.theme.has(Element::Snow) || self.theme.has(Element::Mountains) {
            0.95
        } else {
            self.rng.range(0.4, 0.9)
        };
        let count = self.layers.len();
        for (i, layer) in self.layers.iter_mut().enumerate() {
            if layer.depth < 0.3 && count > 2 {
                continue;
            }
            let d = layer.depth;
            let density = 160.0 * (1.2 - d) * self.detail.object_factor;
            let color = mix(self.pal.foliage, self.pal.haze, (1.0 - d).powf(1.2) * 0.8);
            layer.objects = Objects::Trees {
                count: (density * self.w / (self.unit * 1000.0)) as usize + 4,
                height: self.h * (0.035 + 0.09 * d * d) * if i + 1 == count { 1.6 } else { 1.0 },
                conifers,
                color,
            };
        }
    }
}

/// Seasons and moods recolour the palette: autumn foliage, spring greens, gloomy greys, magical
/// violets, synthwave magentas.
fn season_and_mood(p: &mut Palette, theme: &Theme, time: Time, synthwave: bool) {
    match theme.season {
        Some(Season::Autumn) => {
            p.foliage = mix(
                p.foliage,
                scale(rgb(196, 96, 30), super::canvas::lum(p.foliage) / 0.25),
                0.7,
            );
            p.land_near = mix(
                p.land_near,
                scale(rgb(150, 110, 50), super::canvas::lum(p.land_near) / 0.4),
                0.6,
            );
        }
        Some(Season::Spring) => {
            p.land_near = mix(
                p.land_near,
                scale(rgb(110, 170, 70), super::canvas::lum(p.land_near) / 0.5),
                0.5,
            );
        }
        Some(Season::Summer) => {
            p.land_near = mix(
                p.land_near,
                scale(rgb(70, 140, 50), super::canvas::lum(p.land_near) / 0.4),
                0.3,
            );
        }
        _ => {}
    }
    match theme.mood {
        Some(Mood::Gloomy) => {
            for c in [
                &mut p.sky_top,
                &mut p.sky_mid,
                &mut p.sky_low,
                &mut p.haze,
                &mut p.land_far,
                &mut p.land_near,
                &mut p.water,
            ] {
                let l = super::canvas::lum(*c);
                *c = scale(mix(*c, [l, l, l], 0.55), 0.85);
            }
        }
        Some(Mood::Magical) => {
            for c in [&mut p.sky_top, &mut p.sky_mid, &mut p.haze, &mut p.land_far] {
                *c = tint(*c, rgb(150, 90, 220), 0.35);
            }
        }
        Some(Mood::Romantic) => {
            for c in [&mut p.sky_mid, &mut p.sky_low, &mut p.glow] {
                *c = tint(*c, rgb(250, 140, 170), 0.35);
            }
        }
        _ => {}
    }
    if synthwave {
        p.sky_top = rgb(14, 4, 36);
        p.sky_mid = rgb(70, 16, 100);
        p.sky_low = rgb(250, 70, 150);
        p.haze = rgb(120, 30, 120);
        p.glow = rgb(255, 90, 180);
        p.sun = rgb(255, 214, 90);
        p.land_far = rgb(60, 16, 90);
        p.land_near = rgb(30, 8, 50);
        p.snow = rgb(255, 120, 220);
        p.window = rgb(255, 80, 220);
    }
    if theme.has(Element::Neon) || synthwave {
        p.window = if time == Time::Day {
            p.window
        } else {
            rgb(255, 70, 200)
        };
        p.window_lit = p.window_lit.max(0.6);
    }
}
