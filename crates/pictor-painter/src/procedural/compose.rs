//! Composition: where the prompt's things go and how they are lit.
//!
//! The setting comes first (a landscape, a still life on a table, or underwater). Each thing then
//! gets a stage from its habitat (ground things stand on the nearest terrain layer, boats float
//! on the water in perspective, balloons and birds fly, fruit and cups stand on the table, fish
//! swim), a size from its kind, the count and the size words, and a place from the composition
//! words ("on the left", "centered") or the rule of thirds. Several of a thing spread out in
//! depth; the back ones are smaller and hazier. Painting adds contact shadows, reflections on
//! water, lit windows' glow and a lighthouse's beam.

use super::canvas::{Canvas, Rgb, mix, rgb, scale};
use super::noise::Rng;
use super::objects::{self, Look};
use super::prompt::{Element, Habitat, Place, Season, Theme, Thing, Time};
use super::scene::Plan;
use super::shapes::{self, Light, Xform};
use super::terrain;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Landscape,
    StillLife,
    Underwater,
}

const OUTDOOR: [Element; 22] = [
    Element::Sea,
    Element::Lake,
    Element::River,
    Element::Beach,
    Element::Island,
    Element::Cliff,
    Element::Mountains,
    Element::Hills,
    Element::Forest,
    Element::Flowers,
    Element::City,
    Element::Road,
    Element::Desert,
    Element::Space,
    Element::Sun,
    Element::Moon,
    Element::Stars,
    Element::Aurora,
    Element::Rainbow,
    Element::Snow,
    Element::Storm,
    Element::Rain,
];

impl Setting {
    pub fn choose(theme: &Theme) -> Setting {
        if theme.has(Element::Underwater) {
            return Setting::Underwater;
        }
        if theme.has(Element::Table) || theme.indoors() {
            return Setting::StillLife;
        }
        let outdoor = OUTDOOR.iter().any(|e| theme.has(*e)) || theme.time.is_some();
        let Some(main) = theme.subjects.first() else {
            return Setting::Landscape;
        };
        if !outdoor
            && theme
                .subjects
                .iter()
                .all(|s| s.thing.habitat() == Habitat::Table)
        {
            return Setting::StillLife;
        }
        let sea_only = OUTDOOR
            .iter()
            .filter(|e| **e != Element::Sea)
            .all(|e| !theme.has(*e))
            && theme.time.is_none();
        let wet = theme
            .subjects
            .iter()
            .all(|s| s.thing.habitat() == Habitat::Underwater);
        match main.thing {
            Thing::Fish if wet && sea_only => Setting::Underwater,
            Thing::Whale | Thing::Dolphin if wet && !outdoor => Setting::Underwater,
            _ => Setting::Landscape,
        }
    }
}

/// What ground things stand on.
#[derive(Debug, Clone, Copy)]
pub enum Stage {
    /// The ground line of this terrain layer.
    Layer(usize),
    /// A flat floor at this y.
    Flat(f32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spot {
    Ground,
    Water,
    Sky,
    /// A bird or owl on a branch in the foreground.
    Perch,
    Table,
    Swim,
}

/// One thing placed in the picture.
#[derive(Debug, Clone)]
pub struct Placed {
    pub thing: Thing,
    pub look: Look,
    /// Base centre in pixels.
    pub x: f32,
    pub y: f32,
    /// Height in pixels.
    pub height: f32,
    pub flip: f32,
    pub spot: Spot,
    pub haze: f32,
    /// The theme's subject this is one of.
    pub subject: usize,
    /// The subject it sits on or rides (its base is on that one's seat, not on the ground).
    pub on: Option<usize>,
}

/// Target height as a share of the picture height.
pub fn base_size(thing: Thing, spot: Spot) -> f32 {
    match (thing, spot) {
        (Thing::Bird, Spot::Sky) => 0.06,
        (Thing::Bird, _) | (Thing::Owl, _) => 0.46,
        (Thing::Fish, Spot::Swim) => 0.2,
        (Thing::Whale, Spot::Swim) | (Thing::Dolphin, Spot::Swim) => 0.3,
        (Thing::Cat, _) | (Thing::Dog, _) | (Thing::Wolf, _) => 0.36,
        (Thing::Horse, _) | (Thing::Deer, _) | (Thing::Bear, _) => 0.42,
        (Thing::Fox, _) | (Thing::Rabbit, _) => 0.3,
        (Thing::Person, _) | (Thing::Snowman, _) => 0.4,
        (Thing::Tree, _) | (Thing::Sakura, _) | (Thing::Palm, _) => 0.62,
        (Thing::Pine, _) | (Thing::Birch, _) => 0.58,
        (Thing::House, _) => 0.36,
        (Thing::Cabin, _) => 0.32,
        (Thing::Castle, _) => 0.46,
        (Thing::Lighthouse, _) => 0.6,
        (Thing::Windmill, _) | (Thing::Pagoda, _) => 0.52,
        (Thing::Balloon, _) => 0.3,
        (Thing::Rocket, _) => 0.45,
        (Thing::Butterfly, _) => 0.2,
        (Thing::Boat, _) => 0.3,
        (Thing::Ship, _) => 0.42,
        (Thing::Swan, _) => 0.2,
        (Thing::Duck, _) => 0.13,
        (Thing::Whale, _) => 0.26,
        (Thing::Dolphin, _) | (Thing::Fish, _) => 0.18,
        (Thing::Cup, _) => 0.42,
        (Thing::Pear, _) => 0.3,
        (Thing::Apple, _) | (Thing::Orange, _) => 0.27,
        (Thing::Banana, _) | (Thing::Cherry, _) | (Thing::Lemon, _) => 0.2,
        (thing, spot) => super::library::size(thing, spot),
    }
}

fn spot_for(thing: Thing, setting: Setting, theme: &Theme, main: bool, count: usize) -> Spot {
    match setting {
        Setting::StillLife => match thing.habitat() {
            Habitat::Sky => Spot::Sky,
            // In a room, what is not a small thing for a table stands on the floor.
            Habitat::Table => Spot::Table,
            _ if theme.indoors() => Spot::Ground,
            _ => Spot::Table,
        },
        Setting::Underwater => {
            if thing.habitat() == Habitat::Underwater {
                Spot::Swim
            } else {
                Spot::Ground
            }
        }
        Setting::Landscape => match thing {
            Thing::Bird if main && count == 1 && !theme.flying && theme.subjects.len() == 1 => {
                Spot::Perch
            }
            Thing::Owl => Spot::Perch,
            Thing::Bird => Spot::Sky,
            _ => match thing.habitat() {
                Habitat::Ground | Habitat::Table => Spot::Ground,
                Habitat::Water | Habitat::Underwater => Spot::Water,
                Habitat::Sky => Spot::Sky,
            },
        },
    }
}

/// The top of the land painted in front of the water at column x (the picture's bottom where
/// there is none): a bank or headland hides what floats behind it and its reflection.
pub fn land_over_water(plan: &Plan, x: f32) -> f32 {
    let Some(wt) = plan.water else {
        return plan.h as f32;
    };
    plan.layers
        .iter()
        .skip(wt.before)
        .map(|l| terrain::ground_at(l, x, plan.w, plan.detail.ridge_octaves.min(l.max_octaves)))
        .fold(plan.h as f32, f32::min)
}

/// The y of the stage's ground at column x.
pub fn stage_ground(plan: &Plan, x: f32) -> f32 {
    match plan.stage {
        Stage::Layer(i) => plan.layers.get(i).map_or(plan.h as f32 * 0.9, |l| {
            terrain::ground_at(l, x, plan.w, plan.detail.ridge_octaves.min(l.max_octaves))
        }),
        Stage::Flat(y) => y,
    }
}

pub fn place(theme: &Theme, plan: &Plan, rng: &mut Rng) -> Vec<Placed> {
    let (w, h) = (plan.w as f32, plan.h as f32);
    let mut out = Vec::new();
    let night_lit = plan.time != Time::Day || theme.mood == Some(super::prompt::Mood::Cozy);
    let snow = theme.has(Element::Snow);
    // The main subject's anchor: the composition words, else a third or the centre.
    let main_x = match theme.place {
        Some(Place::Left) => 0.3,
        Some(Place::Right) => 0.7,
        Some(Place::Center) => 0.5,
        None => {
            if theme.subjects.len() > 1 || rng.chance(0.55) {
                if rng.chance(0.5) { 0.36 } else { 0.64 }
            } else {
                0.5
            }
        }
    };
    let view_k = match theme.view {
        Some(super::prompt::View::Aerial) => 0.7,
        Some(super::prompt::View::Low) => 1.2,
        None => 1.0,
    };
    let size_k = 1.28f32.powi(theme.size.clamp(-2, 2)) * view_k;
    let total: usize = theme.subjects.iter().map(|s| s.count).sum();
    // Things held in a hand are drawn by the person; riders are placed on their mounts below.
    let held: Vec<usize> = theme.subjects.iter().filter_map(|s| s.holds).collect();
    for (k, subject) in theme.subjects.iter().enumerate() {
        if held.contains(&k) || subject.rides.is_some() {
            continue;
        }
        let main = k == 0;
        let spot = spot_for(subject.thing, plan.setting, theme, main, subject.count);
        let n = subject.count.clamp(1, 12);
        let look = Look {
            color: subject.color,
            season: theme.season,
            lit: night_lit,
            snow: snow || theme.season == Some(Season::Winter),
            underwater: plan.setting == Setting::Underwater,
            flying: spot == Spot::Sky,
            seed: rng.next_u32(),
            figure: objects::Figure::from_subject(
                subject,
                subject.holds.map(|h| &theme.subjects[h]),
                false,
            ),
        };
        let model = objects::build(subject.thing, &look);
        let aspect = (2.0 * model.half_width / model.height).max(0.1);
        // Anchor across the picture: the main one at main_x, the others on the other side.
        let anchor = if main {
            main_x
        } else {
            let other = 1.0 - main_x;
            other + (k as f32 - 1.0) * 0.12 * if other < 0.5 { 1.0 } else { -1.0 }
        };
        let mut height = base_size(subject.thing, spot) * h * size_k;
        // A seat that carries the main subject is sized as the main one; a small animal on it
        // would be lost on a seat of the usual size, so that seat is drawn nearer.
        let carries = |r: &super::prompt::Subject| r.rides == Some(k);
        let carries_main = theme.subjects.first().is_some_and(carries);
        if !main && !carries_main {
            height *= 0.8;
        }
        if subject.thing.seat()
            && theme
                .subjects
                .iter()
                .any(|r| carries(r) && r.thing.sits_on_seats())
        {
            height *= 1.35;
        }
        if subject.age == Some(super::prompt::Age::Child) {
            height *= 0.72;
        }
        if n > 1 && spot != Spot::Sky {
            height *= (n as f32).powf(-0.3);
        }
        if total > 3 && spot != Spot::Sky {
            height *= 0.85;
        }
        // Never wider than the share of the picture this group may use.
        let share = if theme.subjects.len() > 1 { 0.5 } else { 0.9 };
        let max_w = w * share / n as f32;
        height = height.min(max_w / aspect).min(h * 0.8);
        let spacing = (height * aspect * 1.1).min(w * 0.84 / n as f32);
        for i in 0..n {
            let offset = i as f32 - (n as f32 - 1.0) / 2.0;
            let mut x = w * anchor + offset * spacing + rng.range(-0.15, 0.15) * spacing;
            let mut hgt = height * rng.range(0.92, 1.08);
            let mut haze = 0.0;
            let y = match spot {
                Spot::Ground => {
                    let x0 = choose_ground_x(plan, x, hgt);
                    x = x0;
                    // Alternate instances step back a little: smaller and higher.
                    let back = if n > 1 && i % 2 == 1 { 0.06 * h } else { 0.0 };
                    if back > 0.0 {
                        hgt *= 0.85;
                        haze = 0.08;
                    }
                    stage_ground(plan, x) + hgt * 0.03 - back
                }
                Spot::Water => {
                    let hz = plan.water.map_or(plan.horizon, |wt| wt.y);
                    let depth = if main && i == 0 {
                        rng.range(0.45, 0.7)
                    } else {
                        rng.range(0.15, 0.6)
                    };
                    let mut y = hz + (h - hz) * depth;
                    hgt *= 0.35 + 0.95 * depth;
                    haze = (0.6 - depth).max(0.0) * 0.4;
                    // Afloat, not on the bank or headland in front of the water: the nearest
                    // column where the water reaches below the hull, else farther out.
                    let margin = hgt * 0.15;
                    let half = (hgt * aspect / 2.0 * 1.05).min(w / 2.0);
                    if land_over_water(plan, x) < y + margin {
                        let open = (0..=40)
                            .flat_map(|k| [k as f32, -(k as f32)])
                            .map(|k| (x + k * w / 80.0).clamp(half, w - half))
                            .find(|&cx| land_over_water(plan, cx) >= y + margin);
                        match open {
                            Some(cx) => x = cx,
                            None => y = (land_over_water(plan, x) - margin).max(hz + 1.0),
                        }
                    }
                    y
                }
                Spot::Sky => {
                    let top_band = (plan.horizon.min(h) * 0.75).max(h * 0.3);
                    if subject.thing == Thing::Bird {
                        // A loose V of birds.
                        let vx = offset.abs() * hgt * 1.6;
                        x = w * anchor + offset * hgt * 2.2 + rng.range(-0.3, 0.3) * hgt;
                        h * rng.range(0.18, 0.22) + vx * 0.6 + rng.range(-0.3, 0.3) * hgt
                    } else if subject.thing == Thing::Rocket {
                        h * rng.range(0.62, 0.7)
                    } else if i == 0 && main {
                        h * rng.range(0.12, 0.28) + hgt
                    } else {
                        let far = rng.range(0.35, 0.8);
                        hgt *= far;
                        haze = (1.0 - far) * 0.35;
                        x = rng.range(0.08, 0.92) * w;
                        rng.range(0.05, 0.95) * (top_band - hgt) + hgt
                    }
                }
                Spot::Perch => h * 0.86,
                Spot::Table => {
                    let row = if n > 1 && i % 2 == 1 { 0.0 } else { 0.06 };
                    if row == 0.0 {
                        hgt *= 0.92;
                    }
                    match plan.room {
                        // On the kitchen counter, or on a low table in front of the wall.
                        Some(room) => {
                            hgt *= 0.55;
                            let top = room.table.map_or(h * 0.74, |t| t.2);
                            top + row * 0.3 * h
                        }
                        None => h * (0.78 + row) + rng.range(-0.01, 0.01) * h,
                    }
                }
                Spot::Swim => {
                    if main && i == 0 {
                        h * rng.range(0.5, 0.62) + hgt * 0.5
                    } else {
                        let far = rng.range(0.4, 0.8);
                        hgt *= far;
                        haze = (1.0 - far) * 0.6;
                        x = rng.range(0.08, 0.92) * w;
                        h * rng.range(0.2, 0.8) + hgt * 0.5
                    }
                }
            };
            let flip = if matches!(spot, Spot::Sky | Spot::Swim) && subject.thing != Thing::Rocket {
                if rng.chance(0.5) { 1.0 } else { -1.0 }
            } else if x > w * 0.55 {
                -1.0
            } else {
                1.0
            };
            // Keep the whole thing in the picture when it fits.
            let half = hgt * aspect / 2.0;
            if spot != Spot::Sky && half * 2.2 < w {
                x = x.clamp(half * 1.05, w - half * 1.05);
            }
            out.push(Placed {
                thing: subject.thing,
                look: Look {
                    seed: look.seed.wrapping_add(i as u32 * 7919),
                    ..look
                },
                x: x.clamp(0.0, w),
                y,
                height: hgt,
                flip,
                spot,
                haze,
                subject: k,
                on: None,
            });
        }
    }
    relate(theme, plan, &mut out);
    // Back to front: sky things first, then by base line.
    out.sort_by(|a, b| {
        let ka = (a.spot != Spot::Sky, a.y);
        let kb = (b.spot != Spot::Sky, b.y);
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    seat_riders(theme, &mut out, rng);
    out
}

/// "X next to Y", "X in front of Y", "X behind Y": moves X (its first one) against Y's first
/// one: side by side on the same ground line, or overlapping it nearer (lower, a little larger,
/// drawn after it) or farther (higher, smaller, hazier, drawn before it). Things in the sky are
/// left where they are.
fn relate(theme: &Theme, plan: &Plan, out: &mut [Placed]) {
    use super::prompt::Relation;
    let (w, h) = (plan.w as f32, plan.h as f32);
    let width = |p: &Placed| {
        let m = objects::build(p.thing, &p.look);
        p.height * 2.0 * m.half_width / m.height.max(1e-3)
    };
    for (j, subject) in theme.subjects.iter().enumerate() {
        let Some((k, rel)) = subject.near else {
            continue;
        };
        let (Some(a), Some(b)) = (
            out.iter().position(|p| p.subject == j),
            out.iter().position(|p| p.subject == k),
        ) else {
            continue;
        };
        if out[a].spot == Spot::Sky || out[b].spot == Spot::Sky {
            continue;
        }
        let (wa, wb) = (width(&out[a]), width(&out[b]));
        let other = out[b].clone();
        // Towards the middle of the picture, where there is room.
        let side = if other.x < w / 2.0 { 1.0 } else { -1.0 };
        let p = &mut out[a];
        // Things of different places (a boat by a lighthouse, a cat by a teapot on the counter)
        // keep their own ground and only move across.
        if p.spot != other.spot {
            let step = match rel {
                Relation::Beside => (wb + wa) / 2.0 * 1.05,
                Relation::InFront | Relation::Behind => wb * 0.3,
            };
            p.x = (other.x + side * step).clamp(wa / 2.0, (w - wa / 2.0).max(wa / 2.0));
            continue;
        }
        match rel {
            Relation::Beside => {
                p.x = other.x + side * (wb + wa) / 2.0 * 1.05;
                p.y = other.y;
                p.haze = other.haze;
            }
            Relation::InFront => {
                p.x = other.x + side * wb * 0.25;
                p.y = (other.y + h * 0.05).min(h * 0.98);
                p.height *= 1.06;
                p.haze = (other.haze - 0.04).max(0.0);
            }
            Relation::Behind => {
                p.x = other.x + side * wb * 0.35;
                p.y = other.y - h * 0.05;
                p.height *= 0.85;
                p.haze = other.haze + 0.06;
            }
        }
        let half = wa / 2.0;
        if half * 2.2 < w {
            p.x = p.x.clamp(half * 1.05, w - half * 1.05);
        }
        p.flip = if p.x > other.x { -1.0 } else { 1.0 };
    }
}

/// Puts each rider on its mount, drawn right after it: a person's hips on the saddle, as tall
/// as a person beside that mount would be; a small animal on the seat, at its size next to such
/// a person. Several riders share a seat side by side; on mounts, one rider each.
fn seat_riders(theme: &Theme, out: &mut Vec<Placed>, rng: &mut Rng) {
    for (k, subject) in theme.subjects.iter().enumerate() {
        let Some(m) = subject.rides else { continue };
        let mounts: Vec<usize> = (0..out.len()).filter(|&i| out[i].subject == m).collect();
        let Some(&first) = mounts.first() else {
            continue;
        };
        let seat = theme.subjects[m].thing.seat();
        let n = if seat {
            subject.count.clamp(1, 3)
        } else {
            subject.count.clamp(1, mounts.len())
        };
        let person = subject.thing.is_person();
        let look = Look {
            color: subject.color,
            flying: false,
            seed: rng.next_u32(),
            figure: objects::Figure::from_subject(
                subject,
                subject.holds.map(|h| &theme.subjects[h]),
                subject.pose == Some(super::prompt::Pose::Sit),
            ),
            ..out[first].look
        };
        let rider_model = objects::build(subject.thing, &look);
        let mut riders = Vec::new();
        for i in 0..n {
            let at = if seat {
                first
            } else {
                mounts.get(i).copied().unwrap_or(first)
            };
            let mount = &out[at];
            let mount_model = objects::build(mount.thing, &mount.look);
            let Some((sx, sy, person_units)) = mount_model.saddle else {
                break;
            };
            let s_mount = mount.height / mount_model.height;
            // A standing person is `person_units` tall in the mount's frame (1.0 in its own);
            // the model's hips sit at 0.46 (0.38 for a child). Animals stand on the seat.
            let (rider_h, lift) = if person {
                let s_rider = s_mount * person_units;
                let hip = if subject.age == Some(super::prompt::Age::Child) {
                    0.38
                } else {
                    0.46
                };
                (s_rider * rider_model.height, hip * s_rider)
            } else {
                (
                    s_mount * person_units * small_animal_share(subject.thing),
                    0.0,
                )
            };
            // Riders sharing a seat sit across its width.
            let spread = if n > 1 {
                (i as f32 / (n - 1) as f32 - 0.5) * mount_model.half_width * 1.1
            } else {
                sx
            };
            riders.push((
                at,
                Placed {
                    thing: subject.thing,
                    look: Look {
                        seed: look.seed.wrapping_add(i as u32 * 7919),
                        ..look
                    },
                    x: mount.x + spread * s_mount * mount.flip,
                    y: mount.y - sy * s_mount + lift,
                    height: rider_h,
                    flip: if n > 1 && !person && i % 2 == 1 {
                        -mount.flip
                    } else {
                        mount.flip
                    },
                    // Not on the ground: no contact shadow of its own.
                    spot: Spot::Perch,
                    haze: mount.haze,
                    subject: k,
                    on: Some(m),
                },
            ));
        }
        // Insert from the back so earlier positions stay right; each right after its mount.
        riders.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        for (at, rider) in riders {
            out.insert(at + 1, rider);
        }
    }
}

/// How tall a small animal on a seat is, as a share of a standing person.
fn small_animal_share(thing: Thing) -> f32 {
    match thing {
        Thing::Dog | Thing::Fox | Thing::Monkey => 0.4,
        Thing::Cat | Thing::Rabbit | Thing::Penguin | Thing::Owl | Thing::Parrot => 0.3,
        Thing::Chicken | Thing::Duck => 0.26,
        _ => 0.18,
    }
}

/// Moves x towards where the stage's ground is inside the picture and not too low.
fn choose_ground_x(plan: &Plan, x: f32, height: f32) -> f32 {
    let (w, h) = (plan.w as f32, plan.h as f32);
    let limit = h * 0.97 - height * 0.1;
    let x = x.clamp(w * 0.06, w * 0.94);
    if stage_ground(plan, x) <= limit {
        return x;
    }
    // Search outwards for a column where the ground is high enough.
    let mut best = (stage_ground(plan, x), x);
    for k in 1..=20 {
        for side in [-1.0, 1.0] {
            let cx = x + side * k as f32 * w * 0.04;
            if !(w * 0.06..=w * 0.94).contains(&cx) {
                continue;
            }
            let g = stage_ground(plan, cx);
            if g <= limit {
                return cx;
            }
            if g < best.0 {
                best = (g, cx);
            }
        }
    }
    best.1
}

/// The light a placed thing is seen in.
fn light_for(plan: &Plan, p: &Placed) -> Light {
    let pal = &plan.pal;
    let source = plan.sun.or(plan.moon.map(|m| m.body));
    let mid_y = p.y - p.height * 0.5;
    let dir = source.map_or((-0.55, 0.8), |b| {
        let (dx, dy) = (b.x - p.x, mid_y - b.y);
        let n = (dx * dx + dy * dy).sqrt().max(1.0);
        (dx / n, dy / n + 0.3)
    });
    let mut l = Light::plain();
    l.dir = dir;
    l.haze = p.haze;
    l.haze_color = pal.haze;
    match plan.setting {
        Setting::StillLife => {
            l.dir = (-0.7, 0.7);
            l.key = [1.0, 0.97, 0.92];
            l.rim = 0.15;
            l.rim_color = rgb(255, 240, 220);
            return l;
        }
        Setting::Underwater => {
            l.dir = (0.0, 1.0);
            l.key = [0.62, 0.84, 0.95];
            l.haze = (0.15 + p.haze).min(0.8);
            l.haze_color = mix(pal.water, rgb(40, 120, 160), 0.5);
            l.rim = 0.3;
            l.rim_color = rgb(180, 230, 255);
            return l;
        }
        Setting::Landscape => {}
    }
    let dark_land = scale(mix(pal.land_near, pal.sky_top, 0.3), 0.75);
    match plan.time {
        Time::Day => {
            l.key = mix([1.0, 1.0, 1.0], pal.glow, 0.2);
            l.rim = 0.1;
            l.rim_color = pal.glow;
        }
        Time::Golden => {
            l.key = [1.0, 0.86, 0.72];
            l.silhouette = 0.35;
            l.shadow = dark_land;
            l.rim = 0.85;
            l.rim_color = pal.glow;
        }
        Time::Night => {
            l.key = [0.55, 0.6, 0.78];
            l.silhouette = 0.58;
            l.shadow = dark_land;
            l.rim = 0.35;
            l.rim_color = scale(pal.sun, 0.8);
        }
    }
    if plan.synthwave {
        l.silhouette = 0.8;
        l.shadow = rgb(20, 6, 34);
        l.rim = 1.0;
        l.rim_color = rgb(255, 80, 200);
    }
    l
}

/// Paints every placed thing with its shadow, reflection and lights.
pub fn paint(c: &mut Canvas, plan: &Plan, only: impl Fn(&Placed) -> bool) {
    for p in plan.subjects.iter().filter(|p| only(p)) {
        let model = objects::build(p.thing, &p.look);
        let s = p.height / model.height;
        let t = Xform {
            ox: p.x,
            oy: p.y,
            s,
            flip: p.flip,
        };
        let light = light_for(plan, p);
        let shadow_a = match (plan.setting, plan.time) {
            (Setting::StillLife, _) => 0.45,
            (_, Time::Day) => 0.35,
            (_, Time::Golden) => 0.25,
            (_, Time::Night) => 0.18,
        };
        if matches!(p.spot, Spot::Ground | Spot::Table) {
            let rx = model.half_width * s * 1.05;
            let shift = -light.dir.0 * rx * 0.25;
            shapes::ground_shadow(
                c,
                p.x + shift,
                p.y,
                rx,
                rx * 0.14 + 1.0,
                rgb(10, 10, 16),
                shadow_a,
            );
        }
        if p.spot == Spot::Water {
            let mut refl = light;
            refl.opacity = 0.38;
            refl.haze = (refl.haze + 0.35).min(0.9);
            refl.haze_color = plan.pal.water;
            let u = plan.unit;
            let seed = plan.seed;
            let wob = move |y: i64| -> f32 {
                let k = (y as f32 * 0.7 + (seed % 97) as f32).sin();
                k * u * 2.5
            };
            // The reflection lies on the water only: the land in front keeps its pixels.
            let half = (model.half_width * s * 1.2 + plan.unit * 4.0).ceil() as i64;
            let (x0, x1) = (
                (p.x as i64 - half).clamp(0, c.w as i64) as usize,
                (p.x as i64 + half).clamp(0, c.w as i64) as usize,
            );
            let y_end = ((p.y + p.height * 1.2) as usize).min(c.h);
            let mut kept = Vec::new();
            for x in x0..x1 {
                let land = land_over_water(plan, x as f32 + 0.5).max(0.0) as usize;
                for y in land.max(p.y.max(0.0) as usize)..y_end {
                    kept.push((y * c.w + x, c.px[y * c.w + x]));
                }
            }
            shapes::draw(c, &model.parts, t, &refl, Some(&wob));
            for (i, px) in kept {
                c.px[i] = px;
            }
        }
        if let Some((bx, by)) = model.beam {
            beam(c, plan, p.x + bx * s * p.flip, p.y - by * s, p.height);
        }
        shapes::draw(c, &model.parts, t, &light, None);
        for lamp in &model.lamps {
            shapes::glow(
                c,
                p.x + lamp.x * s * p.flip,
                p.y - lamp.y * s,
                lamp.r * s,
                lamp.color,
                lamp.strength * (1.0 - p.haze),
            );
        }
        if p.thing == Thing::Rocket && p.spot == Spot::Sky {
            smoke_trail(c, plan, p.x, p.y, p.height);
        }
    }
}

/// A lighthouse's beam: a soft wedge of light sweeping out over the sea.
fn beam(c: &mut Canvas, plan: &Plan, x: f32, y: f32, height: f32) {
    let dir = if x < plan.w as f32 / 2.0 { 1.0 } else { -1.0 };
    let len = plan.w as f32 * 0.7;
    let spread = 0.11f32;
    let x0 = if dir > 0.0 { x } else { x - len };
    let x1 = if dir > 0.0 { x + len } else { x };
    let col = rgb(255, 240, 190);
    let y0 = ((y - len * spread * 1.2).max(0.0)) as i64;
    let y1 = ((y + len * (spread * 1.2 + 0.04)).min(plan.h as f32 - 1.0)) as i64;
    for py in y0..=y1 {
        for px in (x0.max(0.0) as i64)..=(x1.min(plan.w as f32 - 1.0) as i64) {
            let dx = (px as f32 - x) * dir;
            if dx <= 0.0 {
                continue;
            }
            let dy = py as f32 - y - dx * 0.04;
            let a = (dy / dx).abs();
            if a > spread {
                continue;
            }
            let k = (1.0 - a / spread).powi(2) * (1.0 - dx / len).max(0.0) * 0.35;
            let near = (height * 0.02 / (dx + height * 0.02)).min(1.0);
            c.light(px, py, col, k + near * 0.2);
        }
    }
}

/// Billowing exhaust under a launching rocket, down to the ground.
fn smoke_trail(c: &mut Canvas, plan: &Plan, x: f32, y: f32, height: f32) {
    let ground = plan.horizon.min(plan.h as f32) + height * 0.1;
    let mut rng = Rng::new(u64::from(plan.seed) ^ 0x5140E);
    let steps = 26;
    let base: Rgb = mix(plan.pal.cloud_light, rgb(230, 226, 220), 0.5);
    for i in 0..steps {
        let t = i as f32 / (steps - 1) as f32;
        let cy = y + height * 0.15 + (ground - y).max(height * 0.6) * t;
        let r = height * (0.06 + 0.22 * t) * rng.range(0.8, 1.2);
        let cx = x + rng.range(-0.5, 0.5) * r;
        let shade = 0.75 + 0.25 * rng.unit();
        c.disc(cx, cy, r, scale(base, shade), 0.55 + 0.3 * t);
    }
}
