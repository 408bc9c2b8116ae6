//! The everyday subjects beyond the landscape library ([`objects`](super::objects)): people with
//! their hair, clothes, age, pose and what they hold; people by role (wizard, knight, princess,
//! astronaut…); farm, wild and sea animals; fantasy creatures; vehicles of land, air and sea;
//! food, household things, furniture and instruments. Same frame as the landscape library: base
//! at y = 0, facing right, about one unit tall.
//!
//! Drawings favour the silhouette that names the thing at a glance (a trunk and big ears, a long
//! neck with patches, two wheels and a frame, a slice out of a round pie), then colour and a few
//! details.

use super::canvas::{Rgb, mix, rgb};
use super::compose::Spot;
use super::noise::{Rng, value2};
use super::objects::{Look, Model, build, dark, eye, fur, highlight, light, pick};
use super::prompt::{Age, Garment, Pose, Thing};
use super::shapes::{
    Fill, Part, Sdf, V, cap, chain, circle, ellipse, poly_of, rect, rotated, smooth, sub, union,
};

/// Target height as a share of the picture height (see `compose::base_size`).
pub fn size(thing: Thing, spot: Spot) -> f32 {
    use Thing as T;
    match (thing, spot) {
        (_, Spot::Table) => match thing {
            T::Pizza | T::Cake | T::Watermelon | T::Laptop => 0.34,
            T::Bottle | T::Vase | T::Lamp | T::Teapot => 0.45,
            T::Glass | T::Candle | T::Clock => 0.36,
            T::Strawberry | T::Phone => 0.16,
            _ => 0.28,
        },
        (T::Eagle, Spot::Sky) | (T::Airplane, Spot::Sky) | (T::Helicopter, Spot::Sky) => 0.16,
        (T::Ufo, Spot::Sky) => 0.2,
        (T::Bee, _) => 0.1,
        (T::Shark, _) | (T::Submarine, _) => 0.24,
        (T::Octopus, _) | (T::Jellyfish, _) => 0.22,
        (T::Elephant, _) | (T::Dinosaur, _) | (T::Dragon, _) => 0.5,
        (T::Giraffe, _) => 0.62,
        (T::Cow, _) | (T::Lion, _) | (T::Tiger, _) | (T::Zebra, _) | (T::Unicorn, _) => 0.42,
        (T::Pig, _) | (T::Sheep, _) | (T::Goat, _) | (T::Monkey, _) => 0.32,
        (T::Chicken, _) | (T::Penguin, _) | (T::Parrot, _) | (T::Eagle, _) => 0.24,
        (T::Turtle, _) | (T::Frog, _) | (T::Snake, _) | (T::Crab, _) => 0.16,
        (T::Mouse, _) | (T::Squirrel, _) | (T::Hedgehog, _) => 0.16,
        (T::Robot, _) | (T::Alien, _) | (T::Ghost, _) => 0.42,
        (T::Ufo, _) => 0.24,
        (T::Car, _) | (T::Tractor, _) => 0.22,
        (T::Truck, _) | (T::Bus, _) => 0.28,
        (T::Train, _) => 0.26,
        (T::Bicycle, _) | (T::Motorcycle, _) => 0.24,
        (T::Airplane, _) | (T::Helicopter, _) => 0.22,
        (T::Church, _) => 0.5,
        (T::Tower, _) => 0.62,
        (T::Tent, _) => 0.26,
        (T::Chair, _) | (T::Bench, _) | (T::Drum, _) => 0.22,
        (T::Sofa, _) | (T::Piano, _) | (T::Television, _) => 0.28,
        (T::Guitar, _) | (T::Violin, _) | (T::Umbrella, _) => 0.3,
        (T::Ball, _) => 0.14,
        (T::Mermaid, _) => 0.34,
        _ if thing.is_person() => 0.4,
        _ => 0.28,
    }
}

/// Builds a drawing of a thing from this library.
pub fn draw(thing: Thing, look: &Look, rng: &mut Rng) -> Model {
    build_thing(thing, look, rng)
}

fn build_thing(thing: Thing, look: &Look, rng: &mut Rng) -> Model {
    use Thing as T;
    match thing {
        T::Cow => cow(look, rng),
        T::Pig => pig(look),
        T::Sheep => sheep(look),
        T::Goat => goat(look),
        T::Chicken => chicken(look, rng),
        T::Elephant => elephant(look),
        T::Lion => lion(look),
        T::Tiger => tiger(look),
        T::Giraffe => giraffe(look),
        T::Zebra => zebra(look),
        T::Monkey => monkey(look),
        T::Penguin => penguin(look),
        T::Turtle => turtle(look),
        T::Frog => frog(look),
        T::Snake => snake(look),
        T::Mouse => mouse(look),
        T::Squirrel => squirrel(look),
        T::Hedgehog => hedgehog(look),
        T::Parrot => parrot(look, rng),
        T::Eagle => eagle(look),
        T::Bee => bee(look),
        T::Shark => shark(look),
        T::Octopus => octopus(look, rng),
        T::Crab => crab(look),
        T::Jellyfish => jellyfish(look, rng),
        T::Dragon => dragon(look, rng),
        T::Dinosaur => dinosaur(look, rng),
        T::Robot => robot(look, rng),
        T::Alien => alien(look),
        T::Ghost => ghost(look),
        T::Ufo => ufo(look),
        T::Mermaid => figure(thing, look, rng),
        T::Car => car(look, rng),
        T::Truck => truck(look, rng),
        T::Bus => bus(look, rng),
        T::Bicycle => bicycle(look, rng),
        T::Motorcycle => motorcycle(look, rng),
        T::Train => train(look, rng),
        T::Tractor => tractor(look),
        T::Airplane => airplane(look),
        T::Helicopter => helicopter(look, rng),
        T::Submarine => submarine(look),
        T::Church => church(look),
        T::Tower => tower(look),
        T::Tent => tent(look, rng),
        T::Pizza => pizza(),
        T::Burger => burger(),
        T::Cake => cake(look, rng),
        T::Bread => bread(),
        T::IceCream => ice_cream(look, rng),
        T::Donut => donut(look, rng),
        T::Bottle => bottle(look, rng),
        T::Glass => wine_glass(look),
        T::Bowl => bowl(look, rng),
        T::Strawberry => strawberry(),
        T::Watermelon => watermelon(),
        T::Grapes => grapes(look),
        T::Teapot => teapot(look, rng),
        T::Candle => candle(look),
        T::Book => book(look, rng),
        T::Vase => vase(look, rng),
        T::Lamp => lamp(look),
        T::Laptop => laptop(look),
        T::Phone => phone(look),
        T::Clock => clock(look),
        T::Chair => chair(look, rng),
        T::Sofa => sofa(look, rng),
        T::Bench => bench(look),
        T::Piano => piano(look),
        T::Guitar => guitar(look, rng),
        T::Violin => violin(look),
        T::Drum => drum(look, rng),
        T::Television => television(look),
        T::Umbrella => umbrella(look, rng),
        T::Ball => ball(look, rng),
        _ if thing.is_person() => figure(thing, look, rng),
        // Every other thing is drawn by the landscape library.
        _ => build(thing, look),
    }
}

// ---------------------------------------------------------------------------------------------
// Placing one drawing inside another (a held umbrella, a guitar in the hands).

/// `sdf` scaled by `k` and moved by (dx, dy).
fn moved(sdf: &Sdf, dx: f32, dy: f32, k: f32) -> Sdf {
    let p = |v: &V| V(dx + v.0 * k, dy + v.1 * k);
    match sdf {
        Sdf::Circle(c, r) => Sdf::Circle(p(c), r * k),
        Sdf::Ellipse(c, rx, ry) => Sdf::Ellipse(p(c), rx * k, ry * k),
        Sdf::Capsule(a, b, ra, rb) => Sdf::Capsule(p(a), p(b), ra * k, rb * k),
        Sdf::Rect(c, hx, hy, r) => Sdf::Rect(p(c), hx * k, hy * k, r * k),
        Sdf::Poly(v) => Sdf::Poly(v.iter().map(p).collect()),
        Sdf::Union(l) => Sdf::Union(l.iter().map(|s| moved(s, dx, dy, k)).collect()),
        Sdf::Smooth(r, l) => Sdf::Smooth(r * k, l.iter().map(|s| moved(s, dx, dy, k)).collect()),
        Sdf::Sub(a, b) => Sdf::Sub(Box::new(moved(a, dx, dy, k)), Box::new(moved(b, dx, dy, k))),
        Sdf::Inter(a, b) => {
            Sdf::Inter(Box::new(moved(a, dx, dy, k)), Box::new(moved(b, dx, dy, k)))
        }
        Sdf::Round(a, r) => Sdf::Round(Box::new(moved(a, dx, dy, k)), r * k),
    }
}

/// Adds `model`'s parts scaled to `height` with its base centre at (x, y).
fn attach(parts: &mut Vec<Part>, model: Model, x: f32, y: f32, height: f32) {
    let k = height / model.height.max(0.01);
    for part in model.parts {
        let fill = match part.fill {
            Fill::Solid(c) => Fill::Solid(c),
            Fill::Bands(a, b, period) => Fill::Bands(a, b, period * k),
            Fill::Func(f) => Fill::Func(Box::new(move |px, py| f((px - x) / k, (py - y) / k))),
        };
        parts.push(Part {
            sdf: moved(&part.sdf, x, y, k),
            fill,
            tex_freq: part.tex_freq / k,
            ..part
        });
    }
}

fn stripes(base: Rgb, stripe: Rgb, freq: f32, tilt: f32) -> Fill {
    Fill::Func(Box::new(move |x, y| {
        let t = ((x + y * tilt) * freq).sin() + ((y * freq * 0.37).sin() * 0.4);
        if t > 0.55 { stripe } else { base }
    }))
}

fn spots(base: Rgb, spot: Rgb, freq: f32, seed: u32, cut: f32) -> Fill {
    Fill::Func(Box::new(move |x, y| {
        if value2(x * freq, y * freq, seed) > cut {
            spot
        } else {
            base
        }
    }))
}

// ---------------------------------------------------------------------------------------------
// People.

type Point = (f32, f32);

const SKIN: [Rgb; 5] = [
    rgb(240, 200, 170),
    rgb(226, 180, 150),
    rgb(198, 146, 110),
    rgb(150, 100, 70),
    rgb(104, 70, 50),
];

/// A person: body, clothes and hair from the figure, a costume from the role, a pose, and what
/// they hold.
pub fn figure(thing: Thing, look: &Look, rng: &mut Rng) -> Model {
    let f = look.figure;
    let child = f.age == Some(Age::Child);
    let old = f.age == Some(Age::Old);
    let female = f.female.unwrap_or(match thing {
        Thing::Princess | Thing::Witch | Thing::Fairy | Thing::Mermaid => true,
        Thing::Wizard | Thing::Knight | Thing::Pirate => false,
        _ => rng.chance(0.5),
    });
    let skin = pick(rng, &SKIN);
    let hair = f.hair.unwrap_or_else(|| {
        if old || thing == Thing::Wizard {
            rgb(214, 214, 216)
        } else {
            pick(
                rng,
                &[
                    rgb(60, 40, 30),
                    rgb(24, 20, 20),
                    rgb(200, 160, 90),
                    rgb(140, 70, 34),
                ],
            )
        }
    });
    let pose = f.pose.unwrap_or(if f.held == Some(Thing::Guitar) {
        Pose::Play
    } else {
        Pose::Stand
    });
    // Proportions: a child has a bigger head and shorter limbs.
    let head_r = if child { 0.088 } else { 0.068 };
    let stand_hip = if child { 0.38 } else { 0.46 };
    let hip = match pose {
        Pose::Sit if !f.seated => 0.07,
        _ => stand_hip,
    };
    let torso = if child { 0.27 } else { 0.33 };
    let shoulder = hip + torso;
    let head_y = shoulder + head_r + 0.045;
    // Clothes.
    let role_coat = match thing {
        Thing::Wizard => Some(pick(
            rng,
            &[rgb(60, 50, 130), rgb(40, 70, 120), rgb(90, 40, 100)],
        )),
        Thing::Witch => Some(rgb(36, 30, 44)),
        Thing::Knight => Some(rgb(170, 174, 182)),
        Thing::Princess => Some(pick(rng, &[rgb(240, 150, 190), rgb(150, 180, 240)])),
        Thing::Fairy => Some(rgb(150, 220, 170)),
        Thing::Angel => Some(rgb(246, 244, 236)),
        Thing::Astronaut => Some(rgb(236, 236, 232)),
        Thing::Pirate => Some(rgb(150, 40, 36)),
        _ => None,
    };
    let coat = f
        .worn(Garment::Coat)
        .flatten()
        .or(f.worn(Garment::Dress).flatten())
        .or(look.color)
        .or(role_coat)
        .unwrap_or_else(|| {
            pick(
                rng,
                &[
                    rgb(190, 50, 44),
                    rgb(40, 60, 100),
                    rgb(230, 200, 80),
                    rgb(60, 90, 60),
                    rgb(120, 80, 140),
                ],
            )
        });
    let long_robe = matches!(
        thing,
        Thing::Wizard | Thing::Witch | Thing::Princess | Thing::Angel
    );
    let dress = f.worn(Garment::Dress).is_some()
        || long_robe
        || (thing == Thing::Fairy)
        || (thing == Thing::Person
            && female
            && f.worn(Garment::Coat).is_none()
            && look.seed.is_multiple_of(3));
    let trousers = match thing {
        Thing::Knight => rgb(150, 154, 162),
        Thing::Astronaut => rgb(226, 226, 222),
        _ => pick(rng, &[rgb(40, 40, 50), rgb(50, 70, 110), rgb(90, 80, 70)]),
    };
    let shoes = if thing == Thing::Astronaut {
        rgb(200, 200, 196)
    } else {
        rgb(30, 26, 24)
    };
    let mut parts: Vec<Part> = Vec::new();
    // Behind the body: wings and cape.
    match thing {
        Thing::Fairy => {
            let wing = union(vec![
                ellipse(-0.14, shoulder + 0.02, 0.13, 0.07),
                ellipse(-0.12, shoulder - 0.1, 0.09, 0.05),
            ]);
            parts.push(Part::new(wing, rgb(190, 230, 250)).alpha(0.6).shade(0.3));
        }
        Thing::Angel => {
            let wing = poly_of(&[
                (-0.04, shoulder),
                (-0.3, shoulder + 0.2),
                (-0.36, shoulder + 0.06),
                (-0.3, shoulder - 0.12),
                (-0.08, shoulder - 0.16),
            ]);
            parts.push(
                Part::new(Sdf::Round(Box::new(wing), 0.02), rgb(250, 250, 246))
                    .shade(0.5)
                    .tex(0.05, 50.0),
            );
        }
        _ => {}
    }
    if let Some(c) = f.worn(Garment::Cape) {
        let cape = poly_of(&[
            (-0.09, shoulder + 0.01),
            (0.05, shoulder + 0.01),
            (0.0, 0.12_f32.max(hip - 0.3)),
            (-0.22, 0.1_f32.max(hip - 0.32)),
        ]);
        parts.push(Part::new(cape, c.unwrap_or(rgb(170, 30, 36))).shade(0.6));
    }
    // Long hair falls behind the shoulders.
    if female && thing != Thing::Astronaut && thing != Thing::Knight {
        let long = smooth(
            0.03,
            vec![
                circle(-0.01, head_y, head_r * 1.08),
                rect(-0.075, shoulder - 0.1, 0.035, head_y, 0.04),
            ],
        );
        parts.push(Part::new(long, hair).shade(0.5).tex(0.06, 80.0));
    }
    // Legs by pose (the far leg first, darker).
    let leg_r = if child { 0.036 } else { 0.04 };
    let (far_leg, near_leg): (Vec<Point>, Vec<Point>) = match pose {
        Pose::Walk => (
            vec![(-0.02, hip), (-0.08, hip * 0.5), (-0.12, 0.03)],
            vec![(0.02, hip), (0.08, hip * 0.5), (0.11, 0.03)],
        ),
        Pose::Run => (
            vec![(-0.02, hip), (-0.14, hip * 0.55), (-0.24, hip * 0.35)],
            vec![(0.02, hip), (0.16, hip * 0.6), (0.14, 0.03)],
        ),
        Pose::Sit if f.seated => (
            vec![(0.0, hip), (0.17, hip - 0.01), (0.17, 0.03)],
            vec![(0.02, hip), (0.2, hip), (0.2, 0.03)],
        ),
        Pose::Sit => (
            vec![(0.0, hip), (0.17, 0.2), (0.24, 0.03)],
            vec![(0.02, hip), (0.19, 0.22), (0.27, 0.03)],
        ),
        Pose::Ride => (
            vec![(-0.02, hip), (0.08, hip - 0.12), (0.06, hip - 0.3)],
            vec![(0.02, hip), (0.11, hip - 0.13), (0.09, hip - 0.31)],
        ),
        _ => (
            vec![(-0.04, hip), (-0.05, hip * 0.5), (-0.055, 0.03)],
            vec![(0.04, hip), (0.05, hip * 0.5), (0.055, 0.03)],
        ),
    };
    let foot = |leg: &[(f32, f32)]| {
        let (x, y) = leg[leg.len() - 1];
        ellipse(x + 0.025, y - 0.005, 0.05, 0.026)
    };
    if thing != Thing::Mermaid {
        parts.push(Part::new(
            chain(&far_leg, leg_r, leg_r * 0.85),
            dark(trousers, 0.75),
        ));
        parts.push(Part::new(foot(&far_leg), dark(shoes, 0.8)));
        parts.push(Part::new(chain(&near_leg, leg_r, leg_r * 0.85), trousers));
        parts.push(Part::new(foot(&near_leg), shoes));
    }
    // Body: a jacket, or a dress or robe down to the shins (to the feet for a robe).
    let body = if dress {
        let hem = match pose {
            Pose::Sit | Pose::Ride => hip - 0.06,
            _ if long_robe => 0.04,
            _ => stand_hip * 0.4,
        };
        let flare = if long_robe { 0.2 } else { 0.16 };
        smooth(
            0.03,
            vec![
                poly_of(&[
                    (-0.095, shoulder),
                    (0.095, shoulder),
                    (0.08, hip + 0.08),
                    (flare, hem),
                    (-flare, hem),
                    (-0.08, hip + 0.08),
                ]),
                cap(0.0, shoulder, 0.0, shoulder + 0.05, 0.03, 0.03),
            ],
        )
    } else {
        smooth(
            0.03,
            vec![
                poly_of(&[
                    (-0.1, shoulder),
                    (0.1, shoulder),
                    (0.12, hip - 0.03),
                    (-0.12, hip - 0.03),
                ]),
                cap(0.0, shoulder, 0.0, shoulder + 0.05, 0.03, 0.03),
            ],
        )
    };
    if thing == Thing::Mermaid {
        let tail_c = look.color.unwrap_or(rgb(40, 170, 150));
        let tail = chain(
            &[
                (0.0, hip + 0.05),
                (0.06, hip - 0.15),
                (0.0, 0.12),
                (-0.14, 0.05),
            ],
            0.1,
            0.04,
        );
        let fin = poly_of(&[(-0.12, 0.06), (-0.3, 0.16), (-0.26, -0.02)]);
        parts.push(Part::fill(tail, spots(tail_c, dark(tail_c, 0.8), 40.0, 5, 0.55)).shade(0.8));
        parts.push(Part::new(fin, light(tail_c, 0.2)).shade(0.5));
    }
    let body_fill = if thing == Thing::Pirate && f.worn(Garment::Coat).is_none() {
        Fill::Bands(rgb(240, 236, 226), coat, 0.05)
    } else {
        Fill::Solid(coat)
    };
    parts.push(Part::fill(body, body_fill).shade(0.8).tex(0.04, 40.0));
    if thing == Thing::Knight {
        // Breastplate shine and a belt.
        parts.push(highlight(0.03, shoulder - 0.1, 0.03, 0.08));
        parts.push(Part::new(
            rect(-0.12, hip - 0.02, 0.12, hip + 0.02, 0.01),
            rgb(90, 60, 40),
        ));
    }
    if thing == Thing::Astronaut {
        parts.push(Part::new(
            rect(-0.17, shoulder - 0.26, -0.09, shoulder + 0.02, 0.03),
            rgb(210, 210, 206),
        ));
        parts.push(
            Part::new(
                rect(-0.04, shoulder - 0.12, 0.06, shoulder - 0.05, 0.01),
                rgb(60, 110, 190),
            )
            .flat(),
        );
    }
    if let Some(c) = f.worn(Garment::Scarf) {
        let scarf = union(vec![
            cap(-0.07, shoulder + 0.02, 0.07, shoulder + 0.02, 0.03, 0.03),
            cap(0.05, shoulder, 0.07, shoulder - 0.14, 0.025, 0.02),
        ]);
        parts.push(Part::new(scarf, c.unwrap_or(rgb(200, 40, 40))).shade(0.6));
    }
    // Arms: the far one behind the body was drawn with it; the near arm reaches to the hand.
    let hand = match (f.held, pose) {
        (Some(Thing::Umbrella), _) | (Some(Thing::Balloon), _) | (Some(Thing::Lamp), _) => {
            (0.17, shoulder - 0.02)
        }
        (Some(Thing::Guitar), _) | (_, Pose::Play) => (0.1, hip + 0.12),
        (Some(Thing::Violin), _) => (0.12, shoulder + 0.02),
        (Some(_), _) => (0.18, hip + 0.1),
        (None, Pose::Walk) | (None, Pose::Run) => (0.15, hip + 0.04),
        (None, Pose::Ride) => (0.16, hip + 0.12),
        (None, _) => (0.13, hip - 0.02),
    };
    let sleeve = if dress && !long_robe { skin } else { coat };
    let far_hand = match pose {
        Pose::Walk | Pose::Run => (-0.14, hip + 0.04),
        _ => (-0.13, hip - 0.02),
    };
    parts.push(Part::new(
        chain(
            &[(-0.08, shoulder - 0.02), (-0.12, hip + 0.15), far_hand],
            0.034,
            0.028,
        ),
        dark(sleeve, 0.8),
    ));
    parts.push(Part::new(
        circle(far_hand.0, far_hand.1, 0.028),
        dark(skin, 0.85),
    ));
    // Neck and head.
    parts.push(Part::new(
        cap(0.0, shoulder, 0.005, head_y - head_r * 0.6, 0.028, 0.026),
        dark(skin, 0.9),
    ));
    let head = if thing == Thing::Alien {
        ellipse(0.01, head_y, head_r * 1.2, head_r * 1.3)
    } else {
        circle(0.012, head_y, head_r)
    };
    parts.push(Part::new(head, skin).shade(0.6));
    // Face: an eye and a mouth towards the viewer's right.
    if thing != Thing::Astronaut {
        parts.push(
            Part::new(
                circle(0.04, head_y + head_r * 0.15, head_r * 0.11),
                rgb(30, 24, 22),
            )
            .flat(),
        );
        parts.push(
            Part::new(
                cap(
                    0.035,
                    head_y - head_r * 0.4,
                    0.06,
                    head_y - head_r * 0.35,
                    0.006,
                    0.006,
                ),
                dark(skin, 0.6),
            )
            .flat(),
        );
    }
    // Hair on top (short hair, or the crown of long hair).
    if thing != Thing::Astronaut && thing != Thing::Knight {
        let top = sub(
            circle(0.0, head_y + head_r * 0.12, head_r * 1.06),
            rect(-0.2, head_y - 0.3, 0.2, head_y + head_r * 0.05, 0.0),
        );
        let top = union(vec![
            top,
            circle(-head_r * 0.7, head_y - head_r * 0.1, head_r * 0.45),
        ]);
        parts.push(Part::new(top, hair).shade(0.5).tex(0.06, 80.0));
    }
    if (old && !female) || thing == Thing::Wizard {
        let beard_len = if thing == Thing::Wizard { 0.2 } else { 0.08 };
        let beard = poly_of(&[
            (-0.02, head_y - head_r * 0.2),
            (0.08, head_y - head_r * 0.3),
            (0.03, head_y - head_r - beard_len),
        ]);
        parts.push(
            Part::new(Sdf::Round(Box::new(beard), 0.015), light(hair, 0.2))
                .shade(0.4)
                .tex(0.08, 90.0),
        );
    }
    if let Some(c) = f.worn(Garment::Glasses) {
        let c = c.unwrap_or(rgb(20, 20, 24));
        parts.push(
            Part::new(
                union(vec![
                    sub(
                        circle(0.042, head_y + head_r * 0.15, head_r * 0.3),
                        circle(0.042, head_y + head_r * 0.15, head_r * 0.22),
                    ),
                    cap(
                        -0.02,
                        head_y + head_r * 0.2,
                        0.02,
                        head_y + head_r * 0.18,
                        0.005,
                        0.005,
                    ),
                ]),
                c,
            )
            .flat(),
        );
    }
    // Headwear.
    let hat_c = f.worn(Garment::Hat).flatten();
    match thing {
        Thing::Wizard | Thing::Witch => {
            let c = hat_c.unwrap_or(if thing == Thing::Witch {
                rgb(30, 26, 36)
            } else {
                coat
            });
            let brim = ellipse(0.0, head_y + head_r * 0.6, head_r * 2.2, head_r * 0.32);
            let cone = poly_of(&[
                (-head_r * 1.0, head_y + head_r * 0.6),
                (head_r * 1.0, head_y + head_r * 0.6),
                (-head_r * 0.6, head_y + head_r * 4.2),
            ]);
            parts.push(Part::new(union(vec![brim, cone]), c).shade(0.6));
            if thing == Thing::Wizard {
                parts.push(
                    Part::new(
                        circle(0.0, head_y + head_r * 2.0, head_r * 0.22),
                        rgb(250, 220, 90),
                    )
                    .glow(),
                );
            }
        }
        Thing::Princess => {
            let crown = poly_of(&[
                (-head_r * 0.8, head_y + head_r * 0.7),
                (head_r * 0.8, head_y + head_r * 0.7),
                (head_r * 0.9, head_y + head_r * 1.5),
                (head_r * 0.45, head_y + head_r * 1.1),
                (0.0, head_y + head_r * 1.6),
                (-head_r * 0.45, head_y + head_r * 1.1),
                (-head_r * 0.9, head_y + head_r * 1.5),
            ]);
            parts.push(Part::new(crown, rgb(240, 200, 70)).shade(0.4));
        }
        Thing::Knight => {
            let helm = union(vec![
                circle(0.01, head_y + 0.005, head_r * 1.12),
                rect(
                    -head_r,
                    head_y - head_r * 1.1,
                    head_r * 1.12,
                    head_y,
                    head_r * 0.3,
                ),
            ]);
            parts.push(Part::new(helm, rgb(176, 180, 190)).shade(0.9));
            parts.push(
                Part::new(
                    rect(
                        0.0,
                        head_y - 0.004,
                        head_r * 1.14,
                        head_y + head_r * 0.14,
                        0.004,
                    ),
                    rgb(30, 30, 36),
                )
                .flat(),
            );
            parts.push(Part::new(
                chain(
                    &[
                        (0.0, head_y + head_r),
                        (-0.04, head_y + head_r * 1.8),
                        (-0.1, head_y + head_r * 1.6),
                    ],
                    0.02,
                    0.012,
                ),
                rgb(200, 40, 40),
            ));
        }
        Thing::Astronaut => {
            parts.push(
                Part::new(circle(0.01, head_y, head_r * 1.45), rgb(236, 236, 232)).shade(0.7),
            );
            parts.push(
                Part::new(
                    ellipse(0.035, head_y, head_r * 0.9, head_r * 0.8),
                    rgb(40, 60, 90),
                )
                .shade(0.3),
            );
            parts.push(highlight(
                0.06,
                head_y + head_r * 0.35,
                head_r * 0.25,
                head_r * 0.15,
            ));
        }
        Thing::Pirate => {
            let hat = union(vec![
                ellipse(0.0, head_y + head_r * 0.75, head_r * 1.7, head_r * 0.35),
                ellipse(0.0, head_y + head_r * 1.05, head_r * 0.95, head_r * 0.55),
            ]);
            parts.push(Part::new(hat, hat_c.unwrap_or(rgb(24, 22, 26))).shade(0.5));
            parts.push(
                Part::new(
                    circle(0.042, head_y + head_r * 0.15, head_r * 0.2),
                    rgb(10, 10, 10),
                )
                .flat(),
            );
        }
        Thing::Angel => {
            let halo = sub(
                ellipse(0.0, head_y + head_r * 1.5, head_r * 0.95, head_r * 0.3),
                ellipse(0.0, head_y + head_r * 1.5, head_r * 0.7, head_r * 0.17),
            );
            parts.push(Part::new(halo, rgb(255, 220, 110)).glow());
        }
        _ => {
            if let Some(c) = f.worn(Garment::Crown) {
                let crown = poly_of(&[
                    (-head_r * 0.8, head_y + head_r * 0.7),
                    (head_r * 0.8, head_y + head_r * 0.7),
                    (head_r * 0.9, head_y + head_r * 1.5),
                    (0.0, head_y + head_r * 1.1),
                    (-head_r * 0.9, head_y + head_r * 1.5),
                ]);
                parts.push(Part::new(crown, c.unwrap_or(rgb(240, 200, 70))).shade(0.4));
            }
            if f.worn(Garment::Hat).is_some() {
                let c = hat_c.unwrap_or(rgb(60, 44, 34));
                let hat = union(vec![
                    ellipse(0.01, head_y + head_r * 0.55, head_r * 1.6, head_r * 0.25),
                    rect(
                        -head_r * 0.85,
                        head_y + head_r * 0.55,
                        head_r * 0.9,
                        head_y + head_r * 1.45,
                        head_r * 0.3,
                    ),
                ]);
                parts.push(Part::new(hat, c).shade(0.6));
            }
        }
    }
    // The near arm and hand, then what the hand holds.
    let shoulder_near = (0.07, shoulder - 0.02);
    let elbow = (
        (shoulder_near.0 + hand.0) / 2.0 + 0.03,
        (shoulder_near.1 + hand.1) / 2.0 - 0.04,
    );
    parts.push(Part::new(chain(&[shoulder_near, elbow, hand], 0.036, 0.03), sleeve).shade(0.7));
    match f.held {
        Some(Thing::Balloon) => {
            let top = (hand.0 + 0.08, head_y + 0.32);
            parts.push(
                Part::new(
                    chain(&[hand, (hand.0 + 0.05, head_y), top], 0.004, 0.004),
                    rgb(80, 80, 80),
                )
                .flat(),
            );
            let c = f.held_color.unwrap_or_else(|| {
                pick(
                    rng,
                    &[rgb(220, 40, 50), rgb(250, 200, 40), rgb(60, 140, 230)],
                )
            });
            parts.push(Part::new(ellipse(top.0, top.1 + 0.09, 0.075, 0.095), c).shade(0.7));
            parts.push(highlight(top.0 + 0.025, top.1 + 0.13, 0.015, 0.025));
        }
        Some(held) => {
            let inner = Look {
                figure: Default::default(),
                color: f.held_color,
                ..*look
            };
            let m = build_thing(held, &inner, rng);
            let (h, dx, dy) = match held {
                Thing::Umbrella => (0.62, 0.0, -0.12),
                Thing::Guitar => (0.5, -0.08, -0.3),
                Thing::Violin => (0.24, -0.02, -0.16),
                Thing::Ball => (0.13, 0.04, -hand.1 + 0.0),
                Thing::Lamp | Thing::Candle => (0.2, 0.0, -0.2),
                Thing::Book => (0.13, 0.02, -0.06),
                Thing::Cup | Thing::Glass | Thing::Phone | Thing::Apple => (0.1, 0.01, -0.03),
                _ => (0.16, 0.02, -0.08),
            };
            attach(&mut parts, m, hand.0 + dx, hand.1 + dy, h);
        }
        None => {}
    }
    parts.push(Part::new(circle(hand.0, hand.1, 0.03), skin));
    if thing == Thing::Witch {
        parts.push(Part::new(
            cap(-0.3, 0.2, 0.25, shoulder - 0.1, 0.015, 0.015),
            rgb(110, 80, 50),
        ));
        parts.push(
            Part::new(
                poly_of(&[(-0.3, 0.2), (-0.42, 0.1), (-0.4, 0.3)]),
                rgb(190, 150, 80),
            )
            .tex(0.2, 120.0),
        );
    }
    if thing == Thing::Wizard && f.held.is_none() {
        parts.push(Part::new(
            cap(
                hand.0 + 0.02,
                0.02,
                hand.0 + 0.04,
                head_y + 0.1,
                0.016,
                0.014,
            ),
            rgb(110, 76, 46),
        ));
        parts.push(
            Part::new(
                circle(hand.0 + 0.04, head_y + 0.12, 0.03),
                rgb(120, 200, 255),
            )
            .glow(),
        );
    }
    if thing == Thing::Knight && f.held.is_none() {
        parts.push(
            Part::new(
                cap(hand.0, hand.1, hand.0 + 0.06, hand.1 + 0.4, 0.014, 0.008),
                rgb(210, 214, 222),
            )
            .shade(0.3),
        );
        parts.push(Part::new(
            cap(
                hand.0 - 0.05,
                hand.1 + 0.05,
                hand.0 + 0.06,
                hand.1 + 0.06,
                0.012,
                0.012,
            ),
            rgb(120, 90, 50),
        ));
    }
    if thing == Thing::Fairy && f.held.is_none() {
        parts.push(Part::new(
            cap(hand.0, hand.1, hand.0 + 0.05, hand.1 + 0.15, 0.007, 0.006),
            rgb(240, 230, 200),
        ));
        parts.push(
            Part::new(
                star(hand.0 + 0.05, hand.1 + 0.17, 0.035),
                rgb(255, 230, 120),
            )
            .glow(),
        );
    }
    let height = match thing {
        Thing::Wizard | Thing::Witch => head_y + head_r * 4.2,
        Thing::Astronaut => head_y + head_r * 1.45,
        _ => head_y + head_r * 1.2,
    };
    let height = if f.held == Some(Thing::Umbrella) {
        height.max(hand.1 + 0.55)
    } else if f.held == Some(Thing::Balloon) {
        height.max(head_y + 0.5)
    } else {
        height
    };
    let half = match pose {
        Pose::Sit | Pose::Run => 0.22,
        _ => 0.16,
    };
    Model::new(parts, height, half)
}

/// A five-pointed star.
fn star(x: f32, y: f32, r: f32) -> Sdf {
    let pts: Vec<(f32, f32)> = (0..10)
        .map(|i| {
            let a = std::f32::consts::FRAC_PI_2 + i as f32 * std::f32::consts::PI / 5.0;
            let rr = if i % 2 == 0 { r } else { r * 0.45 };
            (x + a.cos() * rr, y + a.sin() * rr)
        })
        .collect();
    poly_of(&pts)
}

// ---------------------------------------------------------------------------------------------
// Four-legged animals.

/// The proportions of a four-legged animal.
struct Beast {
    /// Body length, body thickness and leg length.
    len: f32,
    thick: f32,
    leg: f32,
    leg_r: f32,
    /// Neck end relative to the front of the body, and the head radius.
    neck: (f32, f32),
    neck_r: f32,
    head_r: f32,
    /// Snout length (along the facing direction, drooping).
    snout: f32,
    /// Tail end relative to the back of the body.
    tail: (f32, f32),
    tail_r: f32,
}

struct BeastParts {
    body: Sdf,
    far_legs: Sdf,
    head: (f32, f32),
    back: (f32, f32),
    height: f32,
    half_width: f32,
}

fn beast(b: &Beast) -> BeastParts {
    let yb = b.leg + b.thick * 0.5;
    let (x0, x1) = (-b.len * 0.5, b.len * 0.5);
    let r = b.thick * 0.5;
    let hx = x1 + b.neck.0;
    let hy = yb + b.neck.1;
    let mut list = vec![
        cap(x0 + r * 0.6, yb, x1 - r * 0.5, yb + r * 0.05, r, r * 0.95),
        cap(
            x1 - r * 0.7,
            yb + r * 0.3,
            hx,
            hy,
            b.neck_r,
            b.neck_r * 0.85,
        ),
        circle(hx, hy, b.head_r),
        cap(
            hx,
            hy - b.head_r * 0.1,
            hx + b.snout,
            hy - b.head_r * 0.45,
            b.head_r * 0.7,
            b.head_r * 0.5,
        ),
        // Near legs.
        cap(
            x1 - r * 0.8,
            yb - r * 0.3,
            x1 - r * 0.75,
            0.03,
            b.leg_r,
            b.leg_r * 0.8,
        ),
        cap(
            x0 + r * 0.9,
            yb - r * 0.3,
            x0 + r * 0.8,
            0.03,
            b.leg_r * 1.1,
            b.leg_r * 0.8,
        ),
    ];
    if b.tail_r > 0.0 {
        list.push(chain(
            &[
                (x0 + r * 0.3, yb + r * 0.4),
                (x0 + b.tail.0 * 0.6, yb + b.tail.1 * 0.3 + r * 0.3),
                (x0 + b.tail.0, yb + b.tail.1),
            ],
            b.tail_r,
            b.tail_r * 0.6,
        ));
    }
    let far_legs = union(vec![
        cap(
            x1 - r * 1.05,
            yb - r * 0.3,
            x1 - r * 1.1,
            0.03,
            b.leg_r,
            b.leg_r * 0.8,
        ),
        cap(
            x0 + r * 1.2,
            yb - r * 0.3,
            x0 + r * 1.25,
            0.03,
            b.leg_r,
            b.leg_r * 0.8,
        ),
    ]);
    let height = (hy + b.head_r).max(yb + r);
    let half_width = (hx + b.snout + b.head_r)
        .max(-x0 - b.tail.0.min(0.0))
        .max(0.2);
    BeastParts {
        body: smooth(0.05, list),
        far_legs,
        head: (hx, hy),
        back: (x0, yb),
        height,
        half_width,
    }
}

fn beast_model(bp: BeastParts, coat: Fill, far: Rgb, extra: Vec<Part>, eye_r: f32) -> Model {
    let (hx, hy) = bp.head;
    let mut parts = vec![
        fur(Part::new(bp.far_legs, far)),
        fur(Part::fill(bp.body, coat)),
    ];
    parts.extend(extra);
    parts.extend(eye(
        hx + eye_r * 1.5,
        hy + eye_r * 1.2,
        eye_r,
        rgb(40, 30, 20),
    ));
    Model::new(parts, bp.height, bp.half_width)
}

fn ear(x: f32, y: f32, w: f32, h: f32, lean: f32) -> Sdf {
    poly_of(&[(x - w, y), (x + w, y), (x + lean, y + h)])
}

fn cow(look: &Look, rng: &mut Rng) -> Model {
    let b = Beast {
        len: 0.95,
        thick: 0.42,
        leg: 0.34,
        leg_r: 0.055,
        neck: (0.1, 0.12),
        neck_r: 0.1,
        head_r: 0.11,
        snout: 0.1,
        tail: (-0.08, -0.2),
        tail_r: 0.018,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let base = look.color.unwrap_or(rgb(244, 242, 236));
    let patch = if look.color.is_some() {
        dark(base, 0.5)
    } else {
        pick(rng, &[rgb(30, 28, 28), rgb(120, 70, 40)])
    };
    let extra = vec![
        Part::new(
            ellipse(hx + 0.11, hy - 0.07, 0.075, 0.055),
            rgb(230, 170, 170),
        )
        .shade(0.4),
        Part::new(
            union(vec![
                ear(hx - 0.04, hy + 0.05, 0.03, 0.1, -0.12),
                cap(hx - 0.02, hy + 0.1, hx - 0.05, hy + 0.17, 0.012, 0.008),
            ]),
            rgb(220, 210, 190),
        ),
        Part::new(ellipse(-0.05, 0.3, 0.07, 0.04), rgb(236, 170, 170)).shade(0.4),
    ];
    beast_model(
        bp,
        spots(base, patch, 5.0, look.seed, 0.62),
        dark(base, 0.75),
        extra,
        0.016,
    )
}

fn pig(look: &Look) -> Model {
    let b = Beast {
        len: 0.8,
        thick: 0.46,
        leg: 0.14,
        leg_r: 0.05,
        neck: (0.04, 0.04),
        neck_r: 0.16,
        head_r: 0.15,
        snout: 0.1,
        tail: (-0.06, 0.1),
        tail_r: 0.014,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let c = look.color.unwrap_or(rgb(240, 170, 170));
    let extra = vec![
        Part::new(ellipse(hx + 0.2, hy - 0.06, 0.035, 0.055), dark(c, 0.85)).shade(0.4),
        Part::new(circle(hx + 0.21, hy - 0.06, 0.01), dark(c, 0.5)).flat(),
        Part::new(ear(hx - 0.02, hy + 0.1, 0.045, 0.09, 0.06), dark(c, 0.9)),
    ];
    beast_model(bp, Fill::Solid(c), dark(c, 0.8), extra, 0.016)
}

fn sheep(look: &Look) -> Model {
    let wool = look.color.unwrap_or(rgb(240, 236, 224));
    let b = Beast {
        len: 0.8,
        thick: 0.42,
        leg: 0.26,
        leg_r: 0.03,
        neck: (0.08, 0.1),
        neck_r: 0.07,
        head_r: 0.09,
        snout: 0.07,
        tail: (0.0, 0.0),
        tail_r: 0.0,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let (bx, by) = bp.back;
    let fleece: Vec<Sdf> = (0..9)
        .map(|i| {
            let t = i as f32 / 8.0;
            let x = bx + 0.08 + t * 0.65;
            circle(x, by + 0.12 * (t * 9.0).sin() * 0.3 + 0.05, 0.14)
        })
        .collect();
    let face = rgb(40, 36, 34);
    let mut parts = vec![
        Part::new(bp.far_legs, face),
        Part::new(bp.body, face),
        Part::new(smooth(0.04, fleece), wool)
            .shade(0.7)
            .tex(0.18, 60.0),
        Part::new(ear(hx - 0.03, hy + 0.02, 0.03, 0.09, -0.1), face),
    ];
    parts.extend(eye(hx + 0.03, hy + 0.02, 0.014, rgb(120, 100, 40)));
    Model::new(parts, bp.height.max(0.72), bp.half_width)
}

fn goat(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(220, 214, 200));
    let b = Beast {
        len: 0.7,
        thick: 0.32,
        leg: 0.34,
        leg_r: 0.03,
        neck: (0.08, 0.22),
        neck_r: 0.06,
        head_r: 0.08,
        snout: 0.09,
        tail: (-0.05, 0.1),
        tail_r: 0.02,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let extra = vec![
        Part::new(
            chain(
                &[
                    (hx - 0.02, hy + 0.06),
                    (hx - 0.1, hy + 0.16),
                    (hx - 0.16, hy + 0.12),
                ],
                0.018,
                0.008,
            ),
            rgb(120, 100, 80),
        ),
        Part::new(
            poly_of(&[
                (hx + 0.05, hy - 0.08),
                (hx + 0.09, hy - 0.08),
                (hx + 0.06, hy - 0.18),
            ]),
            dark(c, 0.8),
        ),
    ];
    beast_model(bp, Fill::Solid(c), dark(c, 0.75), extra, 0.013)
}

fn elephant(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(140, 140, 146));
    let b = Beast {
        len: 1.0,
        thick: 0.6,
        leg: 0.32,
        leg_r: 0.1,
        neck: (0.06, 0.16),
        neck_r: 0.2,
        head_r: 0.22,
        snout: 0.0,
        tail: (-0.06, -0.2),
        tail_r: 0.018,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let extra = vec![
        Part::new(
            chain(
                &[
                    (hx + 0.14, hy - 0.02),
                    (hx + 0.24, hy - 0.2),
                    (hx + 0.24, hy - 0.4),
                    (hx + 0.3, hy - 0.5),
                ],
                0.07,
                0.035,
            ),
            c,
        )
        .shade(0.8)
        .tex(0.05, 50.0),
        Part::new(ellipse(hx - 0.08, hy - 0.04, 0.15, 0.2), dark(c, 0.85)).shade(0.7),
        Part::new(
            chain(
                &[
                    (hx + 0.12, hy - 0.14),
                    (hx + 0.22, hy - 0.22),
                    (hx + 0.3, hy - 0.18),
                ],
                0.022,
                0.01,
            ),
            rgb(244, 238, 220),
        ),
    ];
    beast_model(bp, Fill::Solid(c), dark(c, 0.75), extra, 0.018)
}

fn lion(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(214, 160, 80));
    let b = Beast {
        len: 0.9,
        thick: 0.36,
        leg: 0.3,
        leg_r: 0.055,
        neck: (0.08, 0.2),
        neck_r: 0.12,
        head_r: 0.13,
        snout: 0.08,
        tail: (-0.2, 0.02),
        tail_r: 0.02,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let (bx, by) = bp.back;
    let mane_c = rgb(150, 84, 34);
    let mane = Part::new(circle(hx - 0.03, hy - 0.01, 0.22), mane_c)
        .shade(0.7)
        .tex(0.2, 70.0);
    let mut parts = vec![
        fur(Part::new(bp.far_legs, dark(c, 0.75))),
        mane,
        fur(Part::new(bp.body, c)),
    ];
    parts.push(Part::new(circle(bx - 0.2, by + 0.02, 0.04), mane_c));
    parts.push(Part::new(ellipse(hx + 0.13, hy - 0.05, 0.035, 0.025), rgb(60, 40, 30)).flat());
    parts.extend(eye(hx + 0.04, hy + 0.04, 0.016, rgb(160, 110, 30)));
    Model::new(parts, bp.height + 0.08, bp.half_width)
}

fn tiger(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(236, 130, 40));
    let b = Beast {
        len: 1.0,
        thick: 0.34,
        leg: 0.28,
        leg_r: 0.055,
        neck: (0.08, 0.12),
        neck_r: 0.12,
        head_r: 0.13,
        snout: 0.07,
        tail: (-0.25, 0.0),
        tail_r: 0.025,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let extra = vec![
        Part::new(ear(hx - 0.04, hy + 0.1, 0.04, 0.06, 0.0), c),
        Part::new(
            ellipse(hx + 0.1, hy - 0.07, 0.07, 0.045),
            rgb(246, 240, 230),
        )
        .shade(0.4),
        Part::new(ellipse(hx + 0.15, hy - 0.04, 0.025, 0.018), rgb(40, 30, 30)).flat(),
    ];
    beast_model(
        bp,
        stripes(c, rgb(26, 20, 18), 38.0, 0.5),
        dark(c, 0.7),
        extra,
        0.016,
    )
}

fn zebra(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(244, 244, 240));
    let b = Beast {
        len: 0.85,
        thick: 0.36,
        leg: 0.36,
        leg_r: 0.04,
        neck: (0.12, 0.28),
        neck_r: 0.08,
        head_r: 0.09,
        snout: 0.14,
        tail: (-0.08, -0.2),
        tail_r: 0.015,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let extra = vec![
        Part::new(ear(hx - 0.02, hy + 0.06, 0.025, 0.09, -0.02), c),
        Part::new(
            chain(&[(hx - 0.05, hy + 0.05), (hx - 0.2, hy - 0.15)], 0.03, 0.03),
            rgb(20, 20, 20),
        ),
    ];
    beast_model(
        bp,
        stripes(c, rgb(20, 20, 22), 45.0, 0.2),
        rgb(60, 60, 60),
        extra,
        0.014,
    )
}

fn giraffe(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(236, 190, 110));
    let b = Beast {
        len: 0.6,
        thick: 0.3,
        leg: 0.5,
        leg_r: 0.035,
        neck: (0.22, 0.8),
        neck_r: 0.06,
        head_r: 0.07,
        snout: 0.1,
        tail: (-0.05, -0.25),
        tail_r: 0.012,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let extra = vec![
        Part::new(
            union(vec![
                cap(hx - 0.02, hy + 0.05, hx - 0.03, hy + 0.13, 0.01, 0.01),
                cap(hx + 0.02, hy + 0.05, hx + 0.01, hy + 0.13, 0.01, 0.01),
            ]),
            rgb(110, 70, 40),
        ),
        Part::new(ear(hx - 0.05, hy + 0.03, 0.02, 0.06, -0.06), c),
    ];
    beast_model(
        bp,
        spots(c, rgb(150, 80, 34), 14.0, look.seed, 0.52),
        dark(c, 0.75),
        extra,
        0.014,
    )
}

fn monkey(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(120, 80, 50));
    let face = rgb(220, 180, 150);
    let body = smooth(
        0.05,
        vec![
            ellipse(0.0, 0.42, 0.15, 0.2),
            cap(-0.06, 0.26, -0.1, 0.03, 0.05, 0.04),
            cap(0.06, 0.26, 0.1, 0.03, 0.05, 0.04),
            cap(-0.12, 0.56, -0.2, 0.3, 0.04, 0.035),
            cap(0.12, 0.56, 0.22, 0.36, 0.04, 0.035),
            circle(0.02, 0.72, 0.13),
        ],
    );
    let tail = chain(
        &[(-0.12, 0.3), (-0.3, 0.25), (-0.36, 0.4), (-0.3, 0.48)],
        0.025,
        0.015,
    );
    let mut parts = vec![
        fur(Part::new(tail, c)),
        fur(Part::new(
            union(vec![circle(-0.12, 0.74, 0.05), circle(0.15, 0.74, 0.05)]),
            c,
        )),
        fur(Part::new(body, c)),
        Part::new(ellipse(0.05, 0.69, 0.09, 0.08), face).shade(0.4),
        Part::new(ellipse(0.0, 0.42, 0.09, 0.13), light(c, 0.35)).shade(0.5),
    ];
    parts.extend(eye(0.02, 0.74, 0.015, rgb(40, 26, 18)));
    parts.extend(eye(0.08, 0.74, 0.015, rgb(40, 26, 18)));
    Model::new(parts, 0.86, 0.3)
}

fn mouse(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(150, 144, 140));
    let body = smooth(
        0.05,
        vec![
            ellipse(0.0, 0.3, 0.3, 0.22),
            ellipse(0.3, 0.3, 0.16, 0.12),
            poly_of(&[(0.35, 0.35), (0.55, 0.26), (0.35, 0.2)]),
        ],
    );
    let mut parts = vec![
        Part::new(
            chain(
                &[(-0.28, 0.25), (-0.5, 0.15), (-0.7, 0.2), (-0.8, 0.35)],
                0.02,
                0.01,
            ),
            rgb(220, 170, 170),
        ),
        fur(Part::new(body, c)),
        Part::new(circle(0.26, 0.5, 0.1), c).shade(0.5),
        Part::new(circle(0.27, 0.5, 0.065), rgb(236, 170, 170)).shade(0.3),
        Part::new(circle(0.55, 0.27, 0.025), rgb(40, 30, 30)),
    ];
    parts.extend(eye(0.38, 0.34, 0.025, rgb(20, 20, 20)));
    Model::new(parts, 0.6, 0.6)
}

fn squirrel(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(190, 100, 40));
    let tail = chain(
        &[(-0.15, 0.1), (-0.35, 0.3), (-0.3, 0.65), (-0.15, 0.8)],
        0.1,
        0.14,
    );
    let body = smooth(
        0.05,
        vec![
            ellipse(0.0, 0.28, 0.16, 0.22),
            circle(0.08, 0.55, 0.12),
            ellipse(0.06, 0.05, 0.12, 0.05),
        ],
    );
    let mut parts = vec![
        Part::new(tail, c).shade(0.6).tex(0.2, 60.0),
        fur(Part::new(body, c)),
        Part::new(ear(0.04, 0.64, 0.03, 0.09, -0.01), c),
        Part::new(ellipse(0.05, 0.28, 0.08, 0.14), rgb(240, 220, 190)).shade(0.4),
        Part::new(circle(0.16, 0.28, 0.05), rgb(140, 90, 40)),
    ];
    parts.extend(eye(0.13, 0.58, 0.02, rgb(20, 16, 14)));
    Model::new(parts, 0.9, 0.4)
}

fn hedgehog(look: &Look) -> Model {
    let spines = look.color.unwrap_or(rgb(100, 80, 60));
    let quills: Vec<Sdf> = (0..14)
        .map(|i| {
            let a = 0.3 + i as f32 * 0.17;
            let (s, c) = a.sin_cos();
            let (x, y) = (-c * 0.3, 0.2 + s * 0.22);
            poly_of(&[(x - 0.04, y), (x + 0.04, y), (x * 1.4, y + s * 0.12 + 0.02)])
        })
        .collect();
    let mut parts = vec![
        Part::new(union(quills), dark(spines, 0.7)),
        Part::new(ellipse(-0.02, 0.2, 0.32, 0.2), spines).tex(0.3, 80.0),
        Part::new(
            smooth(
                0.04,
                vec![
                    ellipse(0.26, 0.14, 0.12, 0.1),
                    poly_of(&[(0.3, 0.18), (0.46, 0.1), (0.3, 0.06)]),
                ],
            ),
            rgb(220, 190, 160),
        ),
        Part::new(circle(0.46, 0.1, 0.022), rgb(20, 20, 20)),
    ];
    parts.extend(eye(0.32, 0.17, 0.018, rgb(20, 16, 14)));
    Model::new(parts, 0.48, 0.48)
}

// ---------------------------------------------------------------------------------------------
// Birds, reptiles, amphibians, insects and sea life.

fn chicken(look: &Look, rng: &mut Rng) -> Model {
    let c = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(246, 242, 232), rgb(180, 100, 50)]));
    let body = smooth(
        0.06,
        vec![
            ellipse(0.0, 0.45, 0.26, 0.2),
            cap(0.15, 0.5, 0.22, 0.75, 0.09, 0.08),
            poly_of(&[(-0.2, 0.5), (-0.4, 0.85), (-0.3, 0.45)]),
        ],
    );
    let mut parts = vec![
        Part::new(
            union(vec![
                cap(-0.05, 0.28, -0.06, 0.02, 0.016, 0.014),
                cap(0.06, 0.28, 0.07, 0.02, 0.016, 0.014),
            ]),
            rgb(230, 170, 50),
        ),
        Part::new(body, c).shade(0.8).tex(0.06, 60.0),
        Part::new(
            union(vec![
                circle(0.2, 0.86, 0.035),
                circle(0.25, 0.85, 0.035),
                circle(0.16, 0.83, 0.03),
            ]),
            rgb(210, 40, 36),
        ),
        Part::new(
            poly_of(&[(0.29, 0.76), (0.37, 0.73), (0.29, 0.7)]),
            rgb(236, 170, 40),
        ),
        Part::new(ellipse(0.28, 0.66, 0.02, 0.035), rgb(210, 40, 36)),
        Part::new(ellipse(-0.02, 0.47, 0.14, 0.08), dark(c, 0.9)).shade(0.6),
    ];
    parts.extend(eye(0.24, 0.78, 0.015, rgb(160, 90, 20)));
    Model::new(parts, 0.9, 0.4)
}

fn penguin(look: &Look) -> Model {
    let back = look.color.unwrap_or(rgb(26, 28, 34));
    let mut parts = vec![
        Part::new(
            union(vec![
                ellipse(-0.06, 0.02, 0.08, 0.03),
                ellipse(0.08, 0.02, 0.08, 0.03),
            ]),
            rgb(236, 150, 40),
        ),
        Part::new(
            smooth(
                0.06,
                vec![ellipse(0.0, 0.4, 0.22, 0.36), circle(0.02, 0.8, 0.14)],
            ),
            back,
        )
        .shade(0.8),
        Part::new(
            smooth(
                0.04,
                vec![ellipse(0.06, 0.38, 0.14, 0.3), circle(0.06, 0.76, 0.08)],
            ),
            rgb(246, 246, 242),
        )
        .shade(0.5),
        Part::new(
            poly_of(&[(0.13, 0.8), (0.26, 0.76), (0.13, 0.73)]),
            rgb(236, 150, 40),
        ),
        Part::new(ellipse(-0.18, 0.42, 0.06, 0.2), dark(back, 0.8)),
    ];
    parts.extend(eye(0.1, 0.83, 0.018, rgb(20, 20, 20)));
    Model::new(parts, 0.95, 0.26)
}

fn parrot(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(220, 40, 40), rgb(40, 170, 80), rgb(40, 120, 220)],
        )
    });
    let wing = pick(rng, &[rgb(40, 90, 220), rgb(250, 210, 40)]);
    let mut parts = vec![
        Part::new(cap(-0.3, 0.12, 0.3, 0.12, 0.025, 0.025), rgb(110, 76, 46)),
        Part::new(
            poly_of(&[(-0.06, 0.4), (-0.02, 0.35), (-0.22, -0.2), (-0.28, -0.16)]),
            dark(c, 0.8),
        ),
        Part::new(
            smooth(
                0.06,
                vec![ellipse(0.0, 0.42, 0.14, 0.26), circle(0.06, 0.7, 0.12)],
            ),
            c,
        )
        .shade(0.8),
        Part::new(ellipse(-0.04, 0.42, 0.09, 0.2), wing)
            .shade(0.6)
            .tex(0.1, 60.0),
        Part::new(ellipse(0.1, 0.72, 0.05, 0.04), rgb(246, 244, 238)).flat(),
        Part::new(
            smooth(
                0.01,
                vec![
                    circle(0.17, 0.66, 0.05),
                    poly_of(&[(0.17, 0.7), (0.24, 0.6), (0.15, 0.6)]),
                ],
            ),
            rgb(40, 36, 34),
        ),
        Part::new(
            union(vec![
                cap(-0.02, 0.18, 0.0, 0.12, 0.015, 0.015),
                cap(0.05, 0.18, 0.07, 0.12, 0.015, 0.015),
            ]),
            rgb(90, 90, 96),
        ),
    ];
    parts.extend(eye(0.1, 0.72, 0.016, rgb(250, 240, 200)));
    Model::new(parts, 0.85, 0.3)
}

fn eagle(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(90, 60, 36));
    if look.flying {
        let wings = poly_of(&[
            (-0.9, 0.55),
            (-0.5, 0.48),
            (-0.1, 0.4),
            (0.1, 0.4),
            (0.5, 0.48),
            (0.9, 0.55),
            (0.6, 0.38),
            (0.2, 0.3),
            (-0.2, 0.3),
            (-0.6, 0.38),
        ]);
        let parts = vec![
            Part::new(wings, c).shade(0.6).tex(0.1, 40.0),
            Part::new(ellipse(0.0, 0.34, 0.09, 0.07), c),
            Part::new(circle(0.0, 0.44, 0.06), rgb(246, 244, 238)),
            Part::new(
                poly_of(&[(-0.08, 0.28), (0.08, 0.28), (0.0, 0.14)]),
                rgb(246, 244, 238),
            ),
        ];
        return Model::new(parts, 0.6, 0.9);
    }
    let mut parts = vec![
        Part::new(
            poly_of(&[(-0.05, 0.3), (0.05, 0.3), (-0.25, -0.05), (-0.35, 0.0)]),
            rgb(240, 238, 232),
        ),
        Part::new(
            smooth(
                0.06,
                vec![ellipse(0.0, 0.45, 0.17, 0.3), circle(0.05, 0.78, 0.11)],
            ),
            c,
        )
        .shade(0.8)
        .tex(0.08, 50.0),
        Part::new(circle(0.06, 0.8, 0.11), rgb(246, 244, 238)).shade(0.4),
        Part::new(
            smooth(
                0.01,
                vec![poly_of(&[
                    (0.13, 0.82),
                    (0.27, 0.76),
                    (0.22, 0.68),
                    (0.13, 0.74),
                ])],
            ),
            rgb(240, 190, 40),
        ),
        Part::new(
            union(vec![
                cap(-0.03, 0.18, -0.03, 0.02, 0.02, 0.02),
                cap(0.06, 0.18, 0.07, 0.02, 0.02, 0.02),
            ]),
            rgb(240, 190, 40),
        ),
    ];
    parts.extend(eye(0.11, 0.83, 0.016, rgb(230, 180, 40)));
    Model::new(parts, 0.94, 0.3)
}

fn bee(_look: &Look) -> Model {
    let body = ellipse(0.0, 0.3, 0.3, 0.18);
    let parts = vec![
        Part::new(
            union(vec![
                ellipse(-0.08, 0.55, 0.14, 0.2),
                ellipse(0.1, 0.52, 0.12, 0.18),
            ]),
            rgb(220, 236, 250),
        )
        .alpha(0.6)
        .shade(0.2),
        Part::fill(
            body,
            Fill::Func(Box::new(|x, _| {
                if ((x + 0.3) * 12.0) as i32 % 2 == 0 {
                    rgb(250, 200, 40)
                } else {
                    rgb(30, 24, 20)
                }
            })),
        )
        .shade(0.7),
        Part::new(circle(0.32, 0.32, 0.1), rgb(30, 24, 20)),
        Part::new(
            poly_of(&[(-0.3, 0.3), (-0.42, 0.28), (-0.3, 0.24)]),
            rgb(30, 24, 20),
        ),
        Part::new(
            union(vec![
                cap(0.36, 0.4, 0.44, 0.56, 0.01, 0.01),
                cap(0.32, 0.4, 0.34, 0.58, 0.01, 0.01),
            ]),
            rgb(30, 24, 20),
        ),
    ];
    Model::new(parts, 0.72, 0.44)
}

fn turtle(look: &Look) -> Model {
    let shell = look.color.unwrap_or(rgb(90, 120, 60));
    let skin = rgb(130, 160, 100);
    let parts = vec![
        Part::new(
            union(vec![
                cap(-0.28, 0.1, -0.32, 0.02, 0.05, 0.05),
                cap(0.26, 0.1, 0.3, 0.02, 0.05, 0.05),
            ]),
            dark(skin, 0.85),
        ),
        Part::new(
            smooth(0.03, vec![cap(0.3, 0.15, 0.5, 0.22, 0.055, 0.065)]),
            skin,
        ),
        Part::new(
            sub(
                ellipse(0.0, 0.1, 0.38, 0.3),
                rect(-0.5, -0.4, 0.5, 0.08, 0.0),
            ),
            shell,
        )
        .shade(0.9)
        .tex(0.15, 20.0),
        Part::new(rect(-0.38, 0.06, 0.38, 0.11, 0.03), dark(shell, 0.7)),
        Part::new(circle(0.52, 0.25, 0.012), rgb(10, 10, 10)),
    ];
    Model::new(parts, 0.42, 0.56)
}

fn frog(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(80, 170, 60));
    let body = smooth(
        0.06,
        vec![
            ellipse(0.0, 0.24, 0.3, 0.2),
            ellipse(0.18, 0.38, 0.16, 0.12),
            chain(
                &[(-0.15, 0.15), (-0.35, 0.1), (-0.2, 0.02), (-0.05, 0.02)],
                0.05,
                0.04,
            ),
        ],
    );
    let mut parts = vec![
        Part::new(body, c).shade(0.8).tex(0.06, 40.0),
        Part::new(ellipse(0.1, 0.2, 0.18, 0.1), light(c, 0.4)).shade(0.4),
        Part::new(
            union(vec![circle(0.16, 0.5, 0.07), circle(0.26, 0.48, 0.06)]),
            c,
        )
        .shade(0.6),
        Part::new(cap(0.18, 0.3, 0.32, 0.33, 0.006, 0.006), dark(c, 0.5)).flat(),
        Part::new(cap(0.15, 0.2, 0.24, 0.02, 0.03, 0.03), c),
    ];
    parts.extend(eye(0.17, 0.51, 0.035, rgb(230, 200, 40)));
    Model::new(parts, 0.58, 0.4)
}

fn snake(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(80, 130, 50));
    let pts: Vec<(f32, f32)> = (0..16)
        .map(|i| {
            let t = i as f32 / 15.0;
            (-0.7 + t * 1.2, 0.06 + (t * 9.0).sin() * 0.05 * (1.0 - t))
        })
        .collect();
    let mut pts = pts;
    pts.extend([(0.55, 0.16), (0.5, 0.3), (0.58, 0.38)]);
    let body = chain(&pts, 0.02, 0.06);
    let mut parts = vec![
        Part::fill(body, spots(c, dark(c, 0.6), 25.0, look.seed, 0.6)).shade(0.8),
        Part::new(ellipse(0.64, 0.4, 0.1, 0.06), c).shade(0.6),
        Part::new(
            chain(&[(0.74, 0.39), (0.82, 0.38), (0.86, 0.41)], 0.006, 0.004),
            rgb(200, 30, 40),
        ),
    ];
    parts.extend(eye(0.66, 0.43, 0.015, rgb(230, 200, 40)));
    Model::new(parts, 0.48, 0.8)
}

fn shark(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(110, 126, 140));
    let body = smooth(
        0.04,
        vec![
            poly_of(&[
                (-0.8, 0.5),
                (-0.3, 0.62),
                (0.4, 0.62),
                (0.8, 0.48),
                (0.4, 0.36),
                (-0.3, 0.38),
            ]),
            poly_of(&[(-0.1, 0.6), (0.1, 0.62), (-0.08, 0.9)]),
            poly_of(&[(-0.72, 0.5), (-0.98, 0.78), (-0.9, 0.5), (-1.0, 0.3)]),
            poly_of(&[(0.1, 0.42), (0.28, 0.42), (0.0, 0.24)]),
        ],
    );
    let mut parts = vec![
        Part::new(body, c).shade(0.8),
        Part::new(
            poly_of(&[
                (-0.3, 0.46),
                (0.4, 0.44),
                (0.76, 0.47),
                (0.4, 0.37),
                (-0.3, 0.39),
            ]),
            rgb(236, 236, 232),
        )
        .shade(0.4),
        Part::new(
            union(vec![
                cap(0.42, 0.5, 0.42, 0.56, 0.005, 0.005),
                cap(0.46, 0.5, 0.46, 0.56, 0.005, 0.005),
            ]),
            dark(c, 0.6),
        )
        .flat(),
    ];
    parts.extend(eye(0.6, 0.54, 0.02, rgb(10, 10, 10)));
    Model::new(parts, 0.92, 1.0)
}

fn octopus(look: &Look, rng: &mut Rng) -> Model {
    let c = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(200, 80, 90), rgb(160, 80, 170)]));
    let arms: Vec<Sdf> = (0..6)
        .map(|i| {
            let x0 = -0.2 + i as f32 * 0.08;
            let dir = if i < 3 { -1.0 } else { 1.0 };
            chain(
                &[
                    (x0, 0.4),
                    (x0 + dir * 0.12, 0.2),
                    (x0 + dir * 0.22, 0.12),
                    (x0 + dir * 0.3, 0.2),
                ],
                0.05,
                0.015,
            )
        })
        .collect();
    let mut parts = vec![
        Part::new(union(arms), dark(c, 0.85)).shade(0.7),
        Part::new(
            smooth(
                0.05,
                vec![ellipse(0.0, 0.66, 0.24, 0.28), ellipse(0.0, 0.4, 0.2, 0.1)],
            ),
            c,
        )
        .shade(0.8)
        .tex(0.05, 30.0),
    ];
    parts.extend(eye(-0.07, 0.5, 0.035, rgb(240, 220, 120)));
    parts.extend(eye(0.08, 0.5, 0.035, rgb(240, 220, 120)));
    Model::new(parts, 0.95, 0.55)
}

fn crab(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(220, 80, 50));
    let legs: Vec<Sdf> = (0..3)
        .flat_map(|i| {
            let x = 0.1 + i as f32 * 0.08;
            [
                chain(&[(x, 0.15), (x + 0.15, 0.2), (x + 0.22, 0.02)], 0.02, 0.012),
                chain(
                    &[(-x, 0.15), (-x - 0.15, 0.2), (-x - 0.22, 0.02)],
                    0.02,
                    0.012,
                ),
            ]
        })
        .collect();
    let claw = |s: f32| {
        union(vec![
            chain(
                &[(s * 0.2, 0.25), (s * 0.38, 0.4), (s * 0.42, 0.52)],
                0.03,
                0.03,
            ),
            sub(
                circle(s * 0.44, 0.58, 0.09),
                poly_of(&[(s * 0.44, 0.58), (s * 0.6, 0.72), (s * 0.3, 0.74)]),
            ),
        ])
    };
    let mut parts = vec![
        Part::new(union(legs), dark(c, 0.8)),
        Part::new(union(vec![claw(1.0), claw(-1.0)]), c).shade(0.7),
        Part::new(ellipse(0.0, 0.22, 0.26, 0.15), c).shade(0.8),
        Part::new(
            union(vec![
                cap(-0.06, 0.3, -0.08, 0.42, 0.01, 0.01),
                cap(0.06, 0.3, 0.08, 0.42, 0.01, 0.01),
            ]),
            dark(c, 0.7),
        ),
    ];
    parts.extend(eye(-0.08, 0.43, 0.022, rgb(20, 20, 20)));
    parts.extend(eye(0.08, 0.43, 0.022, rgb(20, 20, 20)));
    Model::new(parts, 0.68, 0.55)
}

fn jellyfish(look: &Look, rng: &mut Rng) -> Model {
    let c = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(240, 160, 220), rgb(140, 200, 250)]));
    let strands: Vec<Sdf> = (0..6)
        .map(|i| {
            let x = -0.18 + i as f32 * 0.07;
            chain(
                &[
                    (x, 0.55),
                    (x + 0.04, 0.38),
                    (x - 0.03, 0.2),
                    (x + 0.03, 0.02),
                ],
                0.014,
                0.006,
            )
        })
        .collect();
    let parts = vec![
        Part::new(union(strands), light(c, 0.3)).alpha(0.6).glow(),
        Part::new(
            sub(
                ellipse(0.0, 0.6, 0.26, 0.26),
                rect(-0.3, 0.3, 0.3, 0.56, 0.0),
            ),
            c,
        )
        .alpha(0.75)
        .shade(0.5),
        Part::new(ellipse(0.0, 0.7, 0.12, 0.08), light(c, 0.5))
            .alpha(0.6)
            .glow(),
    ];
    Model::new(parts, 0.88, 0.3)
}

// ---------------------------------------------------------------------------------------------
// Fantasy and science fiction.

fn dragon(look: &Look, rng: &mut Rng) -> Model {
    let c = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(50, 120, 60), rgb(170, 40, 36), rgb(60, 70, 120)]));
    let b = Beast {
        len: 0.9,
        thick: 0.34,
        leg: 0.26,
        leg_r: 0.06,
        neck: (0.18, 0.4),
        neck_r: 0.08,
        head_r: 0.1,
        snout: 0.16,
        tail: (-0.5, -0.05),
        tail_r: 0.06,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let wing = poly_of(&[
        (-0.05, 0.62),
        (-0.35, 1.2),
        (-0.2, 1.0),
        (-0.05, 1.12),
        (0.02, 0.95),
        (0.15, 1.05),
        (0.12, 0.64),
    ]);
    let spikes: Vec<Sdf> = (0..6)
        .map(|i| {
            let x = -0.35 + i as f32 * 0.13;
            poly_of(&[(x - 0.04, 0.58), (x + 0.04, 0.58), (x, 0.68)])
        })
        .collect();
    let mut parts = vec![
        Part::new(wing.clone(), dark(c, 0.6)).shade(0.4),
        fur(Part::new(bp.far_legs, dark(c, 0.7))),
        Part::new(union(spikes), rgb(230, 200, 90)),
        Part::fill(bp.body, spots(c, dark(c, 0.85), 30.0, look.seed, 0.55)).shade(0.9),
        Part::new(
            union(vec![poly_of(&[
                (hx - 0.06, hy + 0.06),
                (hx - 0.16, hy + 0.2),
                (hx - 0.02, hy + 0.09),
            ])]),
            rgb(230, 200, 90),
        ),
        Part::new(wing, dark(c, 0.8)).shade(0.5).alpha(0.9),
    ];
    parts.extend(eye(hx + 0.04, hy + 0.03, 0.018, rgb(250, 200, 40)));
    let mut m = Model::new(parts, 1.2, bp.half_width);
    m.saddle = Some((0.0, 0.62, 0.8));
    m
}

fn dinosaur(look: &Look, rng: &mut Rng) -> Model {
    let c = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(100, 140, 70), rgb(130, 110, 80)]));
    let b = Beast {
        len: 0.9,
        thick: 0.42,
        leg: 0.3,
        leg_r: 0.08,
        neck: (0.4, 0.55),
        neck_r: 0.08,
        head_r: 0.08,
        snout: 0.08,
        tail: (-0.7, -0.25),
        tail_r: 0.08,
    };
    let bp = beast(&b);
    let (hx, hy) = bp.head;
    let mut parts = vec![
        fur(Part::new(bp.far_legs, dark(c, 0.75))),
        Part::fill(bp.body, spots(c, dark(c, 0.85), 18.0, look.seed, 0.58)).shade(0.9),
        Part::new(ellipse(0.0, 0.42, 0.3, 0.1), light(c, 0.25)).shade(0.4),
    ];
    parts.extend(eye(hx + 0.03, hy + 0.03, 0.014, rgb(40, 30, 20)));
    Model::new(parts, bp.height, bp.half_width)
}

fn robot(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(170, 176, 186), rgb(220, 220, 214), rgb(200, 90, 50)],
        )
    });
    let joint = rgb(70, 74, 82);
    let mut parts = vec![
        Part::new(
            union(vec![
                rect(-0.12, 0.02, -0.04, 0.36, 0.02),
                rect(0.04, 0.02, 0.12, 0.36, 0.02),
            ]),
            joint,
        )
        .shade(0.6),
        Part::new(
            union(vec![
                rect(-0.16, 0.0, -0.02, 0.06, 0.02),
                rect(0.02, 0.0, 0.16, 0.06, 0.02),
            ]),
            dark(c, 0.7),
        ),
        Part::new(
            union(vec![
                cap(-0.2, 0.66, -0.26, 0.36, 0.035, 0.035),
                cap(0.2, 0.66, 0.28, 0.42, 0.035, 0.035),
            ]),
            joint,
        ),
        Part::new(
            union(vec![circle(-0.26, 0.34, 0.05), circle(0.28, 0.4, 0.05)]),
            c,
        ),
        Part::new(rect(-0.2, 0.34, 0.2, 0.7, 0.04), c).shade(0.8),
        Part::new(rect(-0.1, 0.44, 0.1, 0.58, 0.02), rgb(40, 50, 60)).flat(),
        Part::new(circle(-0.04, 0.51, 0.02), rgb(90, 230, 120)).glow(),
        Part::new(circle(0.04, 0.51, 0.02), rgb(240, 80, 60)).glow(),
        Part::new(rect(-0.04, 0.7, 0.04, 0.76, 0.01), joint),
        Part::new(rect(-0.15, 0.76, 0.15, 0.98, 0.05), c).shade(0.8),
        Part::new(rect(-0.11, 0.83, 0.11, 0.93, 0.03), rgb(30, 36, 44)).flat(),
        Part::new(
            union(vec![circle(-0.05, 0.88, 0.022), circle(0.05, 0.88, 0.022)]),
            rgb(120, 220, 255),
        )
        .glow(),
        Part::new(cap(0.0, 0.98, 0.0, 1.06, 0.01, 0.01), joint),
        Part::new(circle(0.0, 1.07, 0.025), rgb(240, 80, 60)).glow(),
    ];
    parts.push(highlight(-0.12, 0.62, 0.02, 0.05));
    Model::new(parts, 1.1, 0.3)
}

fn alien(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(140, 210, 120));
    let parts = vec![
        Part::new(
            union(vec![
                cap(-0.05, 0.3, -0.06, 0.02, 0.03, 0.025),
                cap(0.05, 0.3, 0.06, 0.02, 0.03, 0.025),
            ]),
            dark(c, 0.8),
        ),
        Part::new(
            smooth(
                0.04,
                vec![
                    ellipse(0.0, 0.42, 0.11, 0.17),
                    cap(-0.08, 0.52, -0.2, 0.3, 0.025, 0.02),
                    cap(0.08, 0.52, 0.2, 0.3, 0.025, 0.02),
                ],
            ),
            c,
        )
        .shade(0.8),
        Part::new(cap(0.0, 0.56, 0.0, 0.64, 0.03, 0.03), c),
        Part::new(
            smooth(
                0.05,
                vec![
                    ellipse(0.0, 0.78, 0.17, 0.15),
                    ellipse(0.0, 0.68, 0.08, 0.08),
                ],
            ),
            c,
        )
        .shade(0.7),
        Part::new(
            union(vec![
                rotated(
                    &[(-0.13, 0.8), (-0.03, 0.77), (-0.05, 0.71), (-0.13, 0.74)],
                    -0.08,
                    0.76,
                    -0.3,
                ),
                rotated(
                    &[(0.13, 0.8), (0.03, 0.77), (0.05, 0.71), (0.13, 0.74)],
                    0.08,
                    0.76,
                    0.3,
                ),
            ]),
            rgb(16, 16, 20),
        )
        .shade(0.2),
        Part::new(
            union(vec![
                cap(-0.06, 0.9, -0.12, 1.02, 0.008, 0.008),
                cap(0.06, 0.9, 0.12, 1.02, 0.008, 0.008),
            ]),
            dark(c, 0.7),
        ),
        Part::new(
            union(vec![circle(-0.12, 1.03, 0.02), circle(0.12, 1.03, 0.02)]),
            rgb(250, 240, 120),
        )
        .glow(),
    ];
    Model::new(parts, 1.05, 0.22)
}

fn ghost(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(244, 246, 250));
    let hem: Vec<(f32, f32)> = (0..=8)
        .map(|i| {
            let x = 0.26 - i as f32 * 0.065;
            (x, if i % 2 == 0 { 0.02 } else { 0.12 })
        })
        .collect();
    let body = smooth(
        0.08,
        vec![
            circle(0.0, 0.66, 0.26),
            poly_of(&[(-0.26, 0.66), (0.26, 0.66), (0.26, 0.06), (-0.26, 0.06)]),
        ],
    );
    let body = sub(
        body,
        union(
            hem.iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == 1)
                .map(|(_, &(x, _))| ellipse(x, 0.0, 0.035, 0.1))
                .collect(),
        ),
    );
    let parts = vec![
        Part::new(body, c).alpha(0.85).shade(0.5).glow(),
        Part::new(
            union(vec![
                ellipse(-0.08, 0.7, 0.04, 0.06),
                ellipse(0.08, 0.7, 0.04, 0.06),
            ]),
            rgb(20, 20, 30),
        )
        .flat(),
        Part::new(ellipse(0.0, 0.55, 0.05, 0.06), rgb(20, 20, 30)).flat(),
    ];
    Model::new(parts, 0.95, 0.3)
}

fn ufo(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(180, 186, 196));
    let mut parts = vec![
        Part::new(
            poly_of(&[(-0.25, 0.18), (0.25, 0.18), (0.45, -0.6), (-0.45, -0.6)]),
            rgb(200, 255, 200),
        )
        .alpha(0.22)
        .glow(),
        Part::new(ellipse(0.0, 0.3, 0.22, 0.18), rgb(150, 220, 240))
            .alpha(0.85)
            .shade(0.4),
        Part::new(ellipse(0.0, 0.22, 0.5, 0.1), c).shade(0.9),
        Part::new(ellipse(0.0, 0.16, 0.28, 0.05), dark(c, 0.7)),
    ];
    for i in 0..5 {
        let x = -0.36 + i as f32 * 0.18;
        parts.push(Part::new(circle(x, 0.21, 0.022), rgb(255, 230, 120)).glow());
    }
    let mut m = Model::new(parts, 0.48, 0.5);
    m.lamps.push(super::objects::Lamp {
        x: 0.0,
        y: 0.16,
        r: 0.5,
        color: rgb(200, 255, 200),
        strength: 0.3,
    });
    m
}

// ---------------------------------------------------------------------------------------------
// Vehicles.

const PAINT: [Rgb; 6] = [
    rgb(200, 40, 40),
    rgb(40, 80, 170),
    rgb(240, 240, 236),
    rgb(30, 30, 34),
    rgb(240, 190, 40),
    rgb(70, 130, 80),
];

fn wheel(x: f32, y: f32, r: f32) -> Vec<Part> {
    vec![
        Part::new(circle(x, y, r), rgb(24, 24, 26)).shade(0.5),
        Part::new(circle(x, y, r * 0.55), rgb(170, 172, 178)).shade(0.6),
        Part::new(circle(x, y, r * 0.18), rgb(60, 60, 66)).flat(),
    ]
}

fn glass_part(sdf: Sdf, lit: bool) -> Part {
    if lit {
        Part::new(sdf, rgb(250, 210, 130)).glow()
    } else {
        Part::new(sdf, rgb(120, 160, 190)).shade(0.3)
    }
}

fn car(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| pick(rng, &PAINT));
    let body = smooth(
        0.04,
        vec![
            rect(-0.95, 0.14, 0.95, 0.42, 0.1),
            poly_of(&[(-0.55, 0.4), (-0.35, 0.68), (0.3, 0.68), (0.55, 0.4)]),
        ],
    );
    let mut parts = vec![Part::new(body, c).shade(0.8)];
    parts.push(glass_part(
        poly_of(&[(-0.48, 0.42), (-0.32, 0.62), (-0.05, 0.62), (-0.05, 0.42)]),
        false,
    ));
    parts.push(glass_part(
        poly_of(&[(0.02, 0.42), (0.02, 0.62), (0.27, 0.62), (0.46, 0.42)]),
        false,
    ));
    parts.push(Part::new(rect(-0.95, 0.2, 0.95, 0.24, 0.01), dark(c, 0.7)).flat());
    parts.push(Part::new(ellipse(0.9, 0.34, 0.05, 0.04), rgb(255, 240, 200)).glow());
    parts.push(Part::new(rect(-0.96, 0.3, -0.9, 0.38, 0.01), rgb(220, 30, 30)).glow());
    parts.push(highlight(-0.2, 0.36, 0.4, 0.02));
    parts.extend(wheel(-0.58, 0.14, 0.15));
    parts.extend(wheel(0.58, 0.14, 0.15));
    let mut m = Model::new(parts, 0.7, 0.96);
    if look.lit {
        m.lamps.push(super::objects::Lamp {
            x: 0.95,
            y: 0.34,
            r: 0.25,
            color: rgb(255, 230, 170),
            strength: 0.5,
        });
    }
    m
}

fn truck(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| pick(rng, &PAINT));
    let mut parts = vec![
        Part::new(rect(-1.0, 0.16, 0.3, 0.95, 0.03), rgb(226, 226, 220)).shade(0.6),
        Part::new(
            smooth(
                0.03,
                vec![
                    rect(0.32, 0.16, 1.0, 0.5, 0.06),
                    rect(0.32, 0.45, 0.8, 0.85, 0.06),
                ],
            ),
            c,
        )
        .shade(0.8),
    ];
    parts.push(glass_part(rect(0.5, 0.55, 0.76, 0.78, 0.03), false));
    parts.push(Part::new(ellipse(0.97, 0.36, 0.03, 0.04), rgb(255, 240, 200)).glow());
    parts.extend(wheel(-0.7, 0.15, 0.15));
    parts.extend(wheel(-0.35, 0.15, 0.15));
    parts.extend(wheel(0.7, 0.15, 0.15));
    Model::new(parts, 0.95, 1.0)
}

fn bus(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(240, 190, 40), rgb(200, 40, 40), rgb(40, 120, 200)],
        )
    });
    let mut parts = vec![Part::new(rect(-1.1, 0.14, 1.1, 0.9, 0.08), c).shade(0.8)];
    for i in 0..6 {
        let x = -0.95 + i as f32 * 0.3;
        parts.push(glass_part(rect(x, 0.52, x + 0.24, 0.8, 0.02), look.lit));
    }
    parts.push(glass_part(rect(0.85, 0.4, 1.06, 0.8, 0.02), false));
    parts.push(Part::new(rect(0.55, 0.2, 0.75, 0.8, 0.01), dark(c, 0.75)).flat());
    parts.push(Part::new(rect(-1.1, 0.4, 1.1, 0.44, 0.0), rgb(240, 240, 236)).flat());
    parts.extend(wheel(-0.7, 0.14, 0.14));
    parts.extend(wheel(0.75, 0.14, 0.14));
    Model::new(parts, 0.9, 1.1)
}

fn bicycle(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| pick(rng, &PAINT));
    let tyre = |x: f32| {
        Part::new(
            sub(circle(x, 0.3, 0.3), circle(x, 0.3, 0.26)),
            rgb(24, 24, 26),
        )
    };
    let spokes = |x: f32| {
        Part::new(
            union(
                (0..6)
                    .map(|i| {
                        let a = i as f32 * std::f32::consts::PI / 6.0;
                        let (s, co) = a.sin_cos();
                        cap(
                            x - co * 0.26,
                            0.3 - s * 0.26,
                            x + co * 0.26,
                            0.3 + s * 0.26,
                            0.004,
                            0.004,
                        )
                    })
                    .collect(),
            ),
            rgb(170, 172, 178),
        )
        .flat()
    };
    let frame = union(vec![
        cap(-0.5, 0.3, -0.1, 0.3, 0.02, 0.02),
        cap(-0.1, 0.3, -0.2, 0.68, 0.02, 0.02),
        cap(-0.5, 0.3, -0.2, 0.62, 0.02, 0.02),
        cap(-0.2, 0.62, 0.35, 0.64, 0.02, 0.02),
        cap(-0.1, 0.3, 0.35, 0.64, 0.02, 0.02),
        cap(0.35, 0.64, 0.5, 0.3, 0.02, 0.02),
        cap(0.35, 0.64, 0.32, 0.8, 0.018, 0.018),
    ]);
    let parts = vec![
        tyre(-0.5),
        spokes(-0.5),
        tyre(0.5),
        spokes(0.5),
        Part::new(frame, c).shade(0.4),
        Part::new(ellipse(-0.21, 0.7, 0.08, 0.025), rgb(30, 28, 28)),
        Part::new(cap(0.26, 0.82, 0.4, 0.8, 0.016, 0.016), rgb(30, 28, 28)),
        Part::new(circle(-0.1, 0.3, 0.05), rgb(60, 60, 66)),
    ];
    let mut m = Model::new(parts, 0.84, 0.82);
    m.saddle = Some((-0.2, 0.72, 2.0));
    m
}

fn motorcycle(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| pick(rng, &PAINT));
    let mut parts = wheel(-0.5, 0.24, 0.24);
    parts.extend(wheel(0.55, 0.24, 0.24));
    parts.extend([
        Part::new(
            union(vec![
                cap(0.55, 0.24, 0.4, 0.62, 0.025, 0.025),
                cap(-0.5, 0.24, -0.1, 0.35, 0.03, 0.03),
            ]),
            rgb(150, 152, 160),
        ),
        Part::new(rect(-0.2, 0.24, 0.2, 0.44, 0.06), rgb(70, 72, 80)).shade(0.6),
        Part::new(
            smooth(
                0.05,
                vec![
                    ellipse(0.15, 0.56, 0.24, 0.1),
                    ellipse(-0.3, 0.46, 0.28, 0.06),
                ],
            ),
            c,
        )
        .shade(0.8),
        Part::new(ellipse(-0.22, 0.54, 0.2, 0.05), rgb(30, 28, 28)),
        Part::new(cap(0.36, 0.7, 0.5, 0.74, 0.018, 0.018), rgb(30, 28, 28)),
        Part::new(circle(0.55, 0.56, 0.05), rgb(255, 240, 200)).glow(),
        Part::new(
            cap(-0.3, 0.28, -0.72, 0.34, 0.035, 0.03),
            rgb(190, 190, 196),
        )
        .shade(0.4),
    ]);
    let mut m = Model::new(parts, 0.8, 0.8);
    m.saddle = Some((-0.2, 0.6, 1.8));
    m
}

fn train(look: &Look, rng: &mut Rng) -> Model {
    let c = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(170, 40, 40), rgb(40, 70, 130), rgb(30, 90, 60)]));
    let mut parts = vec![Part::new(rect(-2.2, 0.06, 1.3, 0.12, 0.0), rgb(60, 56, 52))];
    // Engine: boiler, cab, chimney.
    parts.push(Part::new(rect(0.2, 0.18, 1.25, 0.62, 0.12), c).shade(0.9));
    parts.push(Part::new(rect(-0.2, 0.18, 0.3, 0.95, 0.03), dark(c, 0.85)).shade(0.7));
    parts.push(glass_part(rect(-0.1, 0.62, 0.2, 0.85, 0.02), look.lit));
    parts.push(Part::new(rect(0.95, 0.6, 1.1, 0.92, 0.02), rgb(40, 40, 44)));
    parts.push(Part::new(circle(1.25, 0.42, 0.06), rgb(255, 236, 170)).glow());
    for i in 0..3 {
        parts.extend(wheel(0.0 + i as f32 * 0.42, 0.18, 0.14));
    }
    // A carriage.
    parts.push(Part::new(rect(-2.2, 0.2, -0.3, 0.8, 0.05), light(c, 0.15)).shade(0.8));
    for i in 0..4 {
        let x = -2.05 + i as f32 * 0.45;
        parts.push(glass_part(rect(x, 0.45, x + 0.3, 0.7, 0.02), look.lit));
    }
    parts.extend(wheel(-1.9, 0.16, 0.12));
    parts.extend(wheel(-0.6, 0.16, 0.12));
    Model::new(parts, 0.95, 1.75)
}

fn tractor(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(60, 140, 60));
    let mut parts = vec![
        Part::new(rect(-0.2, 0.3, 0.8, 0.62, 0.05), c).shade(0.8),
        Part::new(rect(-0.4, 0.3, 0.05, 1.0, 0.03), c).shade(0.7),
        glass_part(rect(-0.32, 0.66, -0.02, 0.92, 0.02), false),
        Part::new(cap(0.55, 0.62, 0.55, 0.9, 0.03, 0.03), rgb(40, 40, 44)),
    ];
    parts.extend(wheel(-0.3, 0.38, 0.38));
    parts.extend(wheel(0.62, 0.22, 0.22));
    Model::new(parts, 1.0, 0.84)
}

fn airplane(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(240, 242, 246));
    let mut parts = vec![
        Part::new(
            poly_of(&[(-0.05, 0.42), (0.15, 0.42), (-0.25, 0.05), (-0.38, 0.05)]),
            dark(c, 0.8),
        ),
        Part::new(
            smooth(
                0.04,
                vec![
                    cap(-0.9, 0.5, 0.85, 0.45, 0.1, 0.12),
                    poly_of(&[(-0.95, 0.5), (-0.7, 0.52), (-0.92, 0.9), (-1.02, 0.9)]),
                ],
            ),
            c,
        )
        .shade(0.8),
        Part::new(
            poly_of(&[(-0.05, 0.48), (0.15, 0.48), (-0.3, 0.95), (-0.42, 0.95)]),
            light(c, 0.1),
        )
        .shade(0.6),
    ];
    for i in 0..8 {
        let x = -0.55 + i as f32 * 0.14;
        parts.push(Part::new(circle(x, 0.5, 0.022), rgb(60, 80, 110)).flat());
    }
    parts.push(Part::new(
        poly_of(&[(0.8, 0.5), (0.93, 0.46), (0.8, 0.42)]),
        rgb(60, 80, 110),
    ));
    parts.push(Part::new(rect(-0.98, 0.62, -0.86, 0.86, 0.01), rgb(200, 40, 40)).flat());
    Model::new(parts, 0.95, 1.0)
}

fn helicopter(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(200, 40, 40), rgb(40, 80, 150), rgb(240, 190, 40)],
        )
    });
    let parts = vec![
        Part::new(
            union(vec![
                cap(-0.3, 0.05, 0.35, 0.05, 0.02, 0.02),
                cap(-0.15, 0.05, -0.12, 0.18, 0.015, 0.015),
                cap(0.2, 0.05, 0.17, 0.18, 0.015, 0.015),
            ]),
            rgb(50, 50, 56),
        ),
        Part::new(
            smooth(
                0.05,
                vec![
                    ellipse(0.05, 0.36, 0.36, 0.2),
                    cap(-0.25, 0.38, -0.9, 0.45, 0.08, 0.035),
                ],
            ),
            c,
        )
        .shade(0.8),
        Part::new(poly_of(&[(-0.9, 0.45), (-0.98, 0.62), (-0.86, 0.46)]), c),
        glass_part(
            sub(
                ellipse(0.18, 0.38, 0.2, 0.16),
                rect(-0.1, 0.0, 0.5, 0.28, 0.0),
            ),
            false,
        ),
        Part::new(cap(0.0, 0.56, 0.0, 0.64, 0.02, 0.02), rgb(50, 50, 56)),
        Part::new(cap(-0.75, 0.66, 0.75, 0.66, 0.015, 0.015), rgb(40, 40, 46)),
        Part::new(circle(-0.94, 0.5, 0.08), rgb(90, 90, 96)).alpha(0.5),
    ];
    Model::new(parts, 0.7, 0.95)
}

fn submarine(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(240, 200, 40));
    let mut parts = vec![
        Part::new(
            smooth(
                0.04,
                vec![
                    ellipse(0.0, 0.35, 0.9, 0.24),
                    rect(-0.2, 0.5, 0.2, 0.8, 0.05),
                ],
            ),
            c,
        )
        .shade(0.8),
        Part::new(
            poly_of(&[(-0.85, 0.35), (-1.05, 0.6), (-1.05, 0.1)]),
            dark(c, 0.8),
        ),
        Part::new(cap(0.1, 0.8, 0.1, 0.98, 0.02, 0.02), rgb(60, 60, 66)),
    ];
    for i in 0..3 {
        let x = -0.4 + i as f32 * 0.35;
        parts.push(Part::new(circle(x, 0.38, 0.07), rgb(80, 80, 86)));
        parts.push(glass_part(circle(x, 0.38, 0.05), true));
    }
    Model::new(parts, 1.0, 1.05)
}

// ---------------------------------------------------------------------------------------------
// Buildings.

fn church(look: &Look) -> Model {
    let wall = look.color.unwrap_or(rgb(236, 230, 214));
    let roof = rgb(110, 60, 50);
    let mut parts = vec![
        Part::new(rect(-0.5, 0.0, 0.2, 0.5, 0.0), wall)
            .shade(0.4)
            .tex(0.05, 20.0),
        Part::new(poly_of(&[(-0.56, 0.5), (0.26, 0.5), (-0.15, 0.78)]), roof),
        Part::new(rect(0.2, 0.0, 0.5, 0.95, 0.0), wall)
            .shade(0.4)
            .tex(0.05, 20.0),
        Part::new(poly_of(&[(0.16, 0.95), (0.54, 0.95), (0.35, 1.4)]), roof),
        Part::new(
            union(vec![
                rect(0.34, 1.4, 0.36, 1.55, 0.0),
                rect(0.3, 1.47, 0.4, 1.49, 0.0),
            ]),
            rgb(220, 190, 90),
        ),
        Part::new(rect(0.28, 0.0, 0.42, 0.22, 0.07), rgb(90, 60, 40)),
        Part::new(circle(0.35, 0.72, 0.07), rgb(90, 110, 140)),
    ];
    for i in 0..3 {
        let x = -0.42 + i as f32 * 0.2;
        parts.push(glass_part(rect(x, 0.18, x + 0.08, 0.38, 0.04), look.lit));
    }
    Model::new(parts, 1.55, 0.56)
}

fn tower(look: &Look) -> Model {
    let stone = look.color.unwrap_or(rgb(170, 160, 146));
    let mut parts = vec![
        Part::new(
            poly_of(&[(-0.2, 0.0), (0.2, 0.0), (0.16, 0.9), (-0.16, 0.9)]),
            stone,
        )
        .shade(0.7)
        .tex(0.1, 25.0),
        Part::new(rect(-0.22, 0.9, 0.22, 1.02, 0.0), dark(stone, 0.9)),
        Part::new(
            union(
                (0..4)
                    .map(|i| {
                        rect(
                            -0.22 + i as f32 * 0.13,
                            1.02,
                            -0.14 + i as f32 * 0.13,
                            1.1,
                            0.0,
                        )
                    })
                    .collect(),
            ),
            dark(stone, 0.9),
        ),
        Part::new(rect(-0.06, 0.0, 0.06, 0.18, 0.05), rgb(80, 56, 40)),
    ];
    parts.push(glass_part(rect(-0.04, 0.55, 0.04, 0.7, 0.03), look.lit));
    Model::new(parts, 1.1, 0.24)
}

fn tent(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(230, 120, 40), rgb(60, 120, 70), rgb(200, 50, 50)],
        )
    });
    let parts = vec![
        Part::new(poly_of(&[(-0.6, 0.0), (0.6, 0.0), (0.05, 0.7)]), c).shade(0.5),
        Part::new(
            poly_of(&[(-0.6, 0.0), (0.05, 0.7), (-0.35, 0.66), (-0.8, 0.0)]),
            dark(c, 0.75),
        ),
        Part::new(
            poly_of(&[(-0.12, 0.0), (0.2, 0.0), (0.05, 0.4)]),
            if look.lit {
                rgb(250, 200, 110)
            } else {
                rgb(40, 30, 24)
            },
        )
        .flat(),
    ];
    Model::new(parts, 0.72, 0.8)
}

// ---------------------------------------------------------------------------------------------
// Food and drink.

fn plate(r: f32) -> Part {
    Part::new(ellipse(0.0, 0.03, r, r * 0.16), rgb(246, 244, 240)).shade(0.6)
}

fn pizza() -> Model {
    let crust = rgb(220, 160, 80);
    let pie = sub(
        ellipse(0.0, 0.12, 0.62, 0.14),
        poly_of(&[(0.0, 0.12), (0.7, 0.02), (0.7, 0.3)]),
    );
    let mut parts = vec![
        plate(0.7),
        Part::new(Sdf::Round(Box::new(pie.clone()), 0.02), crust).shade(0.6),
        Part::new(
            sub(
                ellipse(0.0, 0.13, 0.55, 0.11),
                poly_of(&[(0.0, 0.12), (0.7, 0.0), (0.7, 0.3)]),
            ),
            rgb(236, 200, 100),
        )
        .tex(0.15, 30.0),
    ];
    for (x, y) in [
        (-0.3, 0.14),
        (-0.1, 0.18),
        (0.1, 0.1),
        (-0.2, 0.08),
        (0.25, 0.17),
        (-0.42, 0.11),
    ] {
        parts.push(Part::new(ellipse(x, y, 0.06, 0.02), rgb(190, 50, 36)).shade(0.4));
    }
    for (x, y) in [(-0.05, 0.12), (0.2, 0.2), (-0.35, 0.18)] {
        parts.push(Part::new(ellipse(x, y, 0.03, 0.012), rgb(60, 120, 50)).flat());
    }
    // The slice pulled out.
    parts.push(
        Part::new(
            Sdf::Round(
                Box::new(poly_of(&[(0.12, 0.16), (0.74, 0.1), (0.72, 0.26)])),
                0.015,
            ),
            rgb(236, 200, 100),
        )
        .shade(0.5)
        .tex(0.15, 30.0),
    );
    parts.push(Part::new(ellipse(0.5, 0.17, 0.04, 0.015), rgb(190, 50, 36)));
    Model::new(parts, 0.3, 0.75)
}

fn burger() -> Model {
    let bun = rgb(214, 150, 70);
    let parts = vec![
        plate(0.5),
        Part::new(rect(-0.36, 0.06, 0.36, 0.16, 0.05), bun).shade(0.7),
        Part::new(rect(-0.38, 0.16, 0.38, 0.26, 0.05), rgb(110, 60, 36))
            .shade(0.7)
            .tex(0.2, 40.0),
        Part::new(rect(-0.4, 0.25, 0.4, 0.29, 0.02), rgb(250, 200, 50)),
        Part::new(
            union(
                (0..6)
                    .map(|i| circle(-0.33 + i as f32 * 0.13, 0.3, 0.05))
                    .collect(),
            ),
            rgb(80, 170, 60),
        ),
        Part::new(rect(-0.34, 0.3, 0.34, 0.34, 0.02), rgb(210, 50, 40)),
        Part::new(
            sub(
                ellipse(0.0, 0.34, 0.38, 0.28),
                rect(-0.5, 0.0, 0.5, 0.34, 0.0),
            ),
            bun,
        )
        .shade(0.8),
        Part::new(
            union(
                (0..7)
                    .map(|i| {
                        ellipse(
                            -0.22 + i as f32 * 0.07,
                            0.5 + (i as f32 * 1.7).sin() * 0.04,
                            0.012,
                            0.006,
                        )
                    })
                    .collect(),
            ),
            rgb(250, 240, 210),
        )
        .flat(),
    ];
    Model::new(parts, 0.62, 0.5)
}

fn cake(look: &Look, rng: &mut Rng) -> Model {
    let icing = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(250, 200, 220), rgb(250, 246, 240), rgb(120, 70, 50)],
        )
    });
    let mut parts = vec![
        plate(0.6),
        Part::new(rect(-0.45, 0.05, 0.45, 0.3, 0.03), rgb(240, 220, 190)).shade(0.5),
        Part::new(rect(-0.45, 0.15, 0.45, 0.18, 0.0), rgb(190, 60, 80)).flat(),
        Part::new(ellipse(0.0, 0.3, 0.45, 0.06), icing).shade(0.4),
        Part::new(
            union(
                (0..8)
                    .map(|i| ellipse(-0.4 + i as f32 * 0.115, 0.26, 0.04, 0.06))
                    .collect(),
            ),
            icing,
        )
        .shade(0.5),
        Part::new(rect(-0.3, 0.32, 0.3, 0.5, 0.03), rgb(240, 220, 190)).shade(0.5),
        Part::new(ellipse(0.0, 0.5, 0.3, 0.045), icing).shade(0.4),
    ];
    for i in 0..4 {
        let x = -0.18 + i as f32 * 0.12;
        parts.push(Part::new(
            rect(x - 0.012, 0.5, x + 0.012, 0.62, 0.005),
            pick(
                rng,
                &[rgb(80, 140, 230), rgb(240, 200, 60), rgb(230, 80, 120)],
            ),
        ));
        parts.push(Part::new(ellipse(x, 0.65, 0.018, 0.03), rgb(255, 200, 80)).glow());
    }
    parts.push(
        Part::new(
            union(vec![circle(-0.2, 0.54, 0.03), circle(0.22, 0.54, 0.03)]),
            rgb(200, 30, 40),
        )
        .shade(0.4),
    );
    let mut m = Model::new(parts, 0.7, 0.6);
    m.lamps.push(super::objects::Lamp {
        x: 0.0,
        y: 0.65,
        r: 0.3,
        color: rgb(255, 200, 110),
        strength: 0.25,
    });
    m
}

fn bread() -> Model {
    let crust = rgb(200, 130, 60);
    let loaf = smooth(0.05, vec![ellipse(0.0, 0.2, 0.55, 0.2)]);
    let cuts = union(
        (0..4)
            .map(|i| {
                let x = -0.3 + i as f32 * 0.2;
                rotated(
                    &[
                        (x - 0.08, 0.3),
                        (x + 0.08, 0.34),
                        (x + 0.08, 0.32),
                        (x - 0.08, 0.28),
                    ],
                    x,
                    0.31,
                    0.4,
                )
            })
            .collect(),
    );
    let parts = vec![
        Part::new(rect(-0.7, 0.0, 0.7, 0.04, 0.01), rgb(160, 110, 70)).shade(0.4),
        Part::new(loaf, crust).shade(0.8).tex(0.08, 30.0),
        Part::new(cuts, rgb(240, 210, 150)).flat(),
        highlight(-0.1, 0.32, 0.25, 0.03),
    ];
    Model::new(parts, 0.42, 0.7)
}

fn ice_cream(look: &Look, rng: &mut Rng) -> Model {
    let scoop = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(250, 200, 220),
                rgb(250, 246, 230),
                rgb(130, 80, 50),
                rgb(180, 230, 180),
            ],
        )
    });
    let cone = poly_of(&[(-0.16, 0.5), (0.16, 0.5), (0.0, 0.0)]);
    let parts = vec![
        Part::fill(
            cone,
            Fill::Func(Box::new(|x, y| {
                if ((x + y) * 30.0).sin() > 0.7 || ((x - y) * 30.0).sin() > 0.7 {
                    rgb(180, 120, 60)
                } else {
                    rgb(222, 170, 100)
                }
            })),
        )
        .shade(0.5),
        Part::new(
            smooth(
                0.05,
                vec![circle(0.0, 0.62, 0.17), ellipse(0.0, 0.52, 0.2, 0.05)],
            ),
            scoop,
        )
        .shade(0.7),
        Part::new(circle(0.03, 0.82, 0.04), rgb(200, 30, 40)).shade(0.4),
        highlight(-0.06, 0.68, 0.03, 0.05),
    ];
    Model::new(parts, 0.86, 0.22)
}

fn donut(look: &Look, rng: &mut Rng) -> Model {
    let glaze = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(240, 140, 180), rgb(110, 60, 40), rgb(250, 246, 240)],
        )
    });
    let ring = sub(ellipse(0.0, 0.2, 0.4, 0.2), ellipse(0.0, 0.23, 0.12, 0.05));
    let mut parts = vec![
        Part::new(ring, rgb(210, 150, 80)).shade(0.8),
        Part::new(
            sub(
                ellipse(0.0, 0.24, 0.36, 0.15),
                ellipse(0.0, 0.23, 0.14, 0.06),
            ),
            glaze,
        )
        .shade(0.5),
    ];
    for i in 0..9 {
        let a = i as f32 * 0.7;
        let (x, y) = (a.cos() * 0.25, 0.24 + a.sin() * 0.1);
        parts.push(
            Part::new(
                rotated(
                    &[
                        (x - 0.025, y),
                        (x + 0.025, y),
                        (x + 0.025, y + 0.01),
                        (x - 0.025, y + 0.01),
                    ],
                    x,
                    y,
                    a,
                ),
                pick(
                    rng,
                    &[rgb(250, 240, 80), rgb(80, 200, 240), rgb(250, 250, 250)],
                ),
            )
            .flat(),
        );
    }
    Model::new(parts, 0.4, 0.42)
}

fn bottle(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(40, 110, 60), rgb(110, 60, 30), rgb(150, 190, 210)],
        )
    });
    let parts = vec![
        Part::new(
            smooth(
                0.06,
                vec![
                    rect(-0.16, 0.0, 0.16, 0.6, 0.04),
                    rect(-0.05, 0.6, 0.05, 0.95, 0.02),
                ],
            ),
            c,
        )
        .alpha(0.9)
        .shade(0.9),
        Part::new(rect(-0.16, 0.2, 0.16, 0.42, 0.0), rgb(240, 230, 200)).flat(),
        Part::new(rect(-0.055, 0.92, 0.055, 1.0, 0.01), rgb(200, 170, 90)),
        highlight(-0.09, 0.4, 0.02, 0.2),
    ];
    Model::new(parts, 1.0, 0.18)
}

fn wine_glass(look: &Look) -> Model {
    let wine = look.color.unwrap_or(rgb(130, 20, 40));
    let glass = rgb(220, 230, 240);
    let parts = vec![
        Part::new(ellipse(0.0, 0.02, 0.16, 0.03), glass).alpha(0.6),
        Part::new(rect(-0.015, 0.02, 0.015, 0.4, 0.01), glass).alpha(0.6),
        Part::new(
            sub(
                ellipse(0.0, 0.62, 0.2, 0.26),
                rect(-0.3, 0.75, 0.3, 1.0, 0.0),
            ),
            glass,
        )
        .alpha(0.35),
        Part::new(
            sub(
                ellipse(0.0, 0.62, 0.185, 0.24),
                rect(-0.3, 0.64, 0.3, 1.0, 0.0),
            ),
            wine,
        )
        .shade(0.5),
        highlight(-0.1, 0.66, 0.02, 0.08),
    ];
    Model::new(parts, 0.86, 0.2)
}

fn bowl(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(246, 244, 238), rgb(60, 100, 160), rgb(190, 60, 40)],
        )
    });
    let food = pick(
        rng,
        &[rgb(230, 190, 110), rgb(200, 60, 40), rgb(110, 170, 70)],
    );
    let parts = vec![
        Part::new(
            sub(ellipse(0.0, 0.3, 0.5, 0.3), rect(-0.6, 0.3, 0.6, 0.8, 0.0)),
            c,
        )
        .shade(0.8),
        Part::new(rect(-0.16, 0.0, 0.16, 0.05, 0.01), dark(c, 0.85)),
        Part::new(ellipse(0.0, 0.3, 0.5, 0.08), dark(c, 0.9)),
        Part::new(ellipse(0.0, 0.31, 0.45, 0.06), food).tex(0.25, 40.0),
        Part::new(
            union(vec![
                cap(0.1, 0.34, 0.5, 0.7, 0.012, 0.012),
                cap(0.16, 0.34, 0.55, 0.66, 0.012, 0.012),
            ]),
            rgb(150, 110, 70),
        ),
        Part::new(
            union(
                (0..2)
                    .map(|i| {
                        chain(
                            &(0..6)
                                .map(|k| {
                                    (
                                        -0.15 + i as f32 * 0.15 + (k as f32).sin() * 0.03,
                                        0.42 + k as f32 * 0.06,
                                    )
                                })
                                .collect::<Vec<_>>(),
                            0.015,
                            0.006,
                        )
                    })
                    .collect(),
            ),
            rgb(255, 255, 255),
        )
        .flat()
        .alpha(0.3),
    ];
    Model::new(parts, 0.72, 0.55)
}

fn strawberry() -> Model {
    let berry = smooth(
        0.04,
        vec![
            circle(0.0, 0.32, 0.18),
            poly_of(&[(-0.17, 0.34), (0.17, 0.34), (0.0, 0.0)]),
        ],
    );
    let mut parts = vec![Part::new(berry, rgb(220, 40, 50)).shade(0.7)];
    for i in 0..10 {
        let (x, y) = (
            ((i * 37) % 11) as f32 / 11.0 * 0.24 - 0.12,
            0.1 + ((i * 53) % 13) as f32 / 13.0 * 0.3,
        );
        parts.push(Part::new(ellipse(x, y, 0.01, 0.014), rgb(250, 220, 120)).flat());
    }
    parts.push(Part::new(
        union(vec![
            poly_of(&[(-0.16, 0.46), (0.0, 0.5), (-0.05, 0.42)]),
            poly_of(&[(0.16, 0.46), (0.0, 0.5), (0.05, 0.42)]),
            poly_of(&[(-0.04, 0.48), (0.04, 0.48), (0.0, 0.6)]),
        ]),
        rgb(60, 140, 50),
    ));
    Model::new(parts, 0.6, 0.2)
}

fn watermelon() -> Model {
    let slice = sub(circle(0.0, 0.5, 0.5), rect(-0.6, 0.5, 0.6, 1.1, 0.0));
    let mut parts = vec![
        Part::new(slice.clone(), rgb(40, 120, 50)).shade(0.4),
        Part::new(
            sub(circle(0.0, 0.5, 0.45), rect(-0.6, 0.5, 0.6, 1.1, 0.0)),
            rgb(240, 240, 210),
        )
        .flat(),
        Part::new(
            sub(circle(0.0, 0.5, 0.42), rect(-0.6, 0.5, 0.6, 1.1, 0.0)),
            rgb(230, 60, 70),
        )
        .shade(0.3),
    ];
    for i in 0..7 {
        let a = -2.6 + i as f32 * 0.35;
        parts.push(
            Part::new(
                ellipse(a.cos() * 0.28, 0.5 + a.sin() * 0.28, 0.015, 0.025),
                rgb(30, 20, 20),
            )
            .flat(),
        );
    }
    Model::new(parts, 0.5, 0.5)
}

fn grapes(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(110, 50, 120));
    let mut berries = Vec::new();
    for row in 0..5 {
        let n = 5 - row;
        for k in 0..n {
            let x = (k as f32 - (n as f32 - 1.0) / 2.0) * 0.12;
            berries.push(circle(x, 0.58 - row as f32 * 0.11, 0.07));
        }
    }
    let parts = vec![
        Part::new(
            chain(&[(0.0, 0.62), (0.02, 0.72), (0.06, 0.78)], 0.015, 0.01),
            rgb(100, 80, 40),
        ),
        Part::new(
            poly_of(&[(0.04, 0.72), (0.3, 0.82), (0.2, 0.66)]),
            rgb(70, 140, 50),
        ),
        Part::fill(
            union(berries),
            Fill::Func(Box::new(move |x, y| {
                if value2(x * 9.0, y * 9.0, 3) > 0.5 {
                    c
                } else {
                    dark(c, 0.8)
                }
            })),
        )
        .shade(0.9),
        highlight(-0.08, 0.58, 0.015, 0.02),
    ];
    Model::new(parts, 0.82, 0.34)
}

// ---------------------------------------------------------------------------------------------
// Household things.

fn teapot(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(246, 244, 238), rgb(60, 100, 160), rgb(190, 60, 40)],
        )
    });
    let parts = vec![
        Part::new(
            sub(
                ellipse(-0.36, 0.36, 0.14, 0.16),
                ellipse(-0.36, 0.36, 0.08, 0.1),
            ),
            c,
        )
        .shade(0.7),
        Part::new(
            chain(&[(0.2, 0.28), (0.36, 0.38), (0.46, 0.55)], 0.06, 0.03),
            c,
        )
        .shade(0.7),
        Part::new(ellipse(0.0, 0.3, 0.3, 0.28), c).shade(0.9),
        Part::new(ellipse(0.0, 0.56, 0.16, 0.04), dark(c, 0.85)),
        Part::new(circle(0.0, 0.62, 0.04), dark(c, 0.85)),
        highlight(-0.12, 0.36, 0.04, 0.1),
    ];
    Model::new(parts, 0.66, 0.5)
}

fn candle(look: &Look) -> Model {
    let wax = look.color.unwrap_or(rgb(246, 240, 226));
    let parts = vec![
        Part::new(ellipse(0.0, 0.02, 0.16, 0.03), rgb(200, 170, 90)).shade(0.5),
        Part::new(rect(-0.08, 0.02, 0.08, 0.62, 0.02), wax).shade(0.7),
        Part::new(cap(0.0, 0.62, 0.0, 0.66, 0.005, 0.005), rgb(30, 30, 30)),
        Part::new(
            smooth(
                0.02,
                vec![
                    ellipse(0.0, 0.72, 0.03, 0.06),
                    poly_of(&[(-0.025, 0.72), (0.025, 0.72), (0.0, 0.82)]),
                ],
            ),
            rgb(255, 200, 80),
        )
        .glow(),
    ];
    let mut m = Model::new(parts, 0.82, 0.16);
    m.lamps.push(super::objects::Lamp {
        x: 0.0,
        y: 0.72,
        r: 0.35,
        color: rgb(255, 190, 100),
        strength: 0.45,
    });
    m
}

fn book(look: &Look, rng: &mut Rng) -> Model {
    let c = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(150, 40, 40), rgb(40, 70, 130), rgb(40, 100, 60)]));
    let parts = vec![
        Part::new(rect(-0.45, 0.0, 0.45, 0.16, 0.02), c).shade(0.6),
        Part::new(rect(-0.42, 0.03, 0.44, 0.13, 0.0), rgb(246, 240, 224)).flat(),
        Part::new(rect(-0.42, 0.05, 0.44, 0.055, 0.0), rgb(220, 210, 190)).flat(),
        Part::new(rect(-0.42, 0.1, 0.44, 0.105, 0.0), rgb(220, 210, 190)).flat(),
        Part::new(rect(-0.47, 0.16, 0.4, 0.22, 0.02), dark(c, 0.9)).shade(0.5),
        Part::new(rect(-0.2, 0.18, 0.2, 0.2, 0.0), rgb(220, 190, 90)).flat(),
    ];
    Model::new(parts, 0.22, 0.47)
}

fn vase(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(60, 100, 160), rgb(236, 232, 220), rgb(190, 110, 60)],
        )
    });
    let mut parts = Vec::new();
    for i in 0..5 {
        let a = -0.6 + i as f32 * 0.3;
        let (x, y) = (a.sin() * 0.3, 0.55 + a.cos() * 0.4);
        parts.push(Part::new(
            chain(&[(0.0, 0.4), (x * 0.5, 0.7), (x, y)], 0.012, 0.01),
            rgb(60, 120, 50),
        ));
        let petal = pick(
            rng,
            &[
                rgb(230, 60, 70),
                rgb(250, 220, 80),
                rgb(240, 150, 200),
                rgb(250, 250, 250),
            ],
        );
        parts.push(
            Part::new(
                union(
                    (0..5)
                        .map(|k| {
                            let b = k as f32 * 1.2566;
                            circle(x + b.cos() * 0.05, y + b.sin() * 0.05, 0.045)
                        })
                        .collect(),
                ),
                petal,
            )
            .shade(0.5),
        );
        parts.push(Part::new(circle(x, y, 0.03), rgb(240, 190, 40)).flat());
    }
    parts.push(
        Part::new(
            smooth(
                0.05,
                vec![
                    ellipse(0.0, 0.2, 0.2, 0.2),
                    rect(-0.08, 0.3, 0.08, 0.5, 0.02),
                ],
            ),
            c,
        )
        .shade(0.9),
    );
    parts.push(highlight(-0.08, 0.22, 0.03, 0.08));
    Model::new(parts, 1.0, 0.36)
}

fn lamp(look: &Look) -> Model {
    let shade_c = look.color.unwrap_or(rgb(240, 220, 170));
    let parts = vec![
        Part::new(ellipse(0.0, 0.03, 0.18, 0.04), rgb(90, 70, 50)).shade(0.6),
        Part::new(rect(-0.02, 0.03, 0.02, 0.6, 0.01), rgb(110, 90, 60)),
        Part::new(
            poly_of(&[(-0.14, 0.92), (0.14, 0.92), (0.26, 0.55), (-0.26, 0.55)]),
            shade_c,
        )
        .glow(),
    ];
    let mut m = Model::new(parts, 0.94, 0.27);
    m.lamps.push(super::objects::Lamp {
        x: 0.0,
        y: 0.62,
        r: 0.6,
        color: rgb(255, 210, 140),
        strength: 0.4,
    });
    m
}

fn laptop(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(180, 184, 190));
    let parts = vec![
        Part::new(
            poly_of(&[(-0.5, 0.0), (0.55, 0.0), (0.5, 0.05), (-0.45, 0.05)]),
            c,
        )
        .shade(0.5),
        Part::new(
            poly_of(&[(-0.45, 0.05), (-0.35, 0.68), (0.38, 0.68), (0.42, 0.05)]),
            dark(c, 0.7),
        )
        .shade(0.4),
        Part::new(
            poly_of(&[(-0.4, 0.09), (-0.31, 0.63), (0.34, 0.63), (0.37, 0.09)]),
            rgb(60, 130, 200),
        )
        .glow(),
        Part::new(rect(-0.2, 0.36, 0.2, 0.4, 0.01), rgb(240, 240, 250)).glow(),
    ];
    Model::new(parts, 0.7, 0.55)
}

fn phone(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(30, 30, 34));
    let parts = vec![
        Part::new(rect(-0.26, 0.0, 0.26, 1.0, 0.08), c).shade(0.6),
        Part::new(rect(-0.22, 0.08, 0.22, 0.9, 0.04), rgb(70, 120, 200)).glow(),
        Part::new(
            union(
                (0..3)
                    .map(|i| {
                        rect(
                            -0.16 + i as f32 * 0.12,
                            0.7,
                            -0.08 + i as f32 * 0.12,
                            0.78,
                            0.02,
                        )
                    })
                    .collect(),
            ),
            rgb(240, 240, 250),
        )
        .glow(),
    ];
    Model::new(parts, 1.0, 0.26)
}

fn clock(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(190, 60, 40));
    let parts = vec![
        Part::new(
            union(vec![
                cap(-0.2, 0.1, -0.28, 0.0, 0.03, 0.03),
                cap(0.2, 0.1, 0.28, 0.0, 0.03, 0.03),
            ]),
            rgb(60, 60, 60),
        ),
        Part::new(circle(0.0, 0.45, 0.38), c).shade(0.8),
        Part::new(circle(0.0, 0.45, 0.31), rgb(250, 248, 240)).shade(0.2),
        Part::new(
            union(
                (0..12)
                    .map(|i| {
                        let a = i as f32 * std::f32::consts::FRAC_PI_6;
                        circle(a.cos() * 0.26, 0.45 + a.sin() * 0.26, 0.015)
                    })
                    .collect(),
            ),
            rgb(30, 30, 30),
        )
        .flat(),
        Part::new(
            union(vec![
                cap(0.0, 0.45, 0.0, 0.68, 0.014, 0.01),
                cap(0.0, 0.45, 0.15, 0.4, 0.018, 0.012),
            ]),
            rgb(30, 30, 30),
        )
        .flat(),
        Part::new(
            union(vec![circle(-0.22, 0.82, 0.09), circle(0.22, 0.82, 0.09)]),
            c,
        )
        .shade(0.6),
    ];
    Model::new(parts, 0.92, 0.4)
}

fn chair(look: &Look, rng: &mut Rng) -> Model {
    let wood = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(140, 90, 50), rgb(90, 60, 40), rgb(200, 170, 120)],
        )
    });
    let parts = vec![
        Part::new(
            union(vec![
                rect(-0.3, 0.0, -0.25, 0.48, 0.01),
                rect(0.25, 0.0, 0.3, 0.48, 0.01),
            ]),
            dark(wood, 0.8),
        ),
        Part::new(rect(-0.34, 0.46, 0.34, 0.54, 0.02), wood).shade(0.6),
        Part::new(rect(-0.34, 0.54, -0.27, 1.1, 0.02), wood).shade(0.6),
        Part::new(
            union(vec![
                rect(-0.32, 0.75, -0.27, 0.8, 0.0),
                rect(-0.32, 0.95, -0.27, 1.0, 0.0),
            ]),
            dark(wood, 0.8),
        ),
        Part::new(
            union(vec![
                rect(-0.25, 0.0, -0.2, 0.46, 0.01),
                rect(0.3, 0.0, 0.35, 0.46, 0.01),
            ]),
            wood,
        ),
    ];
    let mut m = Model::new(parts, 1.1, 0.36);
    m.saddle = Some((0.0, 0.54, 1.6));
    m
}

fn sofa(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(120, 60, 60),
                rgb(60, 90, 120),
                rgb(90, 110, 80),
                rgb(200, 180, 150),
            ],
        )
    });
    let parts = vec![
        Part::new(
            union(vec![
                rect(-0.8, 0.0, -0.74, 0.1, 0.01),
                rect(0.74, 0.0, 0.8, 0.1, 0.01),
            ]),
            rgb(60, 40, 30),
        ),
        Part::new(rect(-0.8, 0.35, 0.8, 0.8, 0.1), dark(c, 0.85)).shade(0.7),
        Part::new(rect(-0.74, 0.1, 0.74, 0.42, 0.06), c)
            .shade(0.7)
            .tex(0.05, 30.0),
        Part::new(
            union(vec![
                rect(-0.72, 0.4, -0.02, 0.5, 0.05),
                rect(0.02, 0.4, 0.72, 0.5, 0.05),
            ]),
            light(c, 0.1),
        )
        .shade(0.6),
        Part::new(
            union(vec![
                rect(-0.92, 0.1, -0.72, 0.62, 0.08),
                rect(0.72, 0.1, 0.92, 0.62, 0.08),
            ]),
            c,
        )
        .shade(0.8),
    ];
    let mut m = Model::new(parts, 0.8, 0.92);
    m.saddle = Some((-0.2, 0.46, 1.6));
    m
}

fn bench(look: &Look) -> Model {
    let wood = look.color.unwrap_or(rgb(150, 100, 60));
    let iron = rgb(40, 40, 44);
    let parts = vec![
        Part::new(
            union(vec![
                rect(-0.7, 0.0, -0.64, 0.4, 0.01),
                rect(0.64, 0.0, 0.7, 0.4, 0.01),
                rect(-0.7, 0.4, -0.64, 0.85, 0.01),
                rect(0.64, 0.4, 0.7, 0.85, 0.01),
            ]),
            iron,
        ),
        Part::new(
            union(vec![
                rect(-0.8, 0.36, 0.8, 0.42, 0.01),
                rect(-0.8, 0.44, 0.8, 0.48, 0.01),
            ]),
            wood,
        )
        .shade(0.5),
        Part::new(
            union(vec![
                rect(-0.8, 0.58, 0.8, 0.64, 0.01),
                rect(-0.8, 0.7, 0.8, 0.76, 0.01),
            ]),
            wood,
        )
        .shade(0.5),
    ];
    let mut m = Model::new(parts, 0.86, 0.82);
    m.saddle = Some((-0.2, 0.46, 1.7));
    m
}

fn piano(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(24, 22, 24));
    let keys = Fill::Func(Box::new(|x, _| {
        if ((x + 1.0) * 30.0) as i32 % 2 == 0 {
            rgb(250, 250, 246)
        } else {
            rgb(220, 220, 216)
        }
    }));
    let parts = vec![
        Part::new(
            union(vec![
                rect(-0.62, 0.0, -0.56, 0.5, 0.01),
                rect(0.56, 0.0, 0.62, 0.5, 0.01),
            ]),
            c,
        ),
        Part::new(rect(-0.7, 0.5, 0.7, 1.2, 0.03), c).shade(0.5),
        Part::fill(rect(-0.66, 0.56, 0.66, 0.64, 0.0), keys).flat(),
        Part::new(
            union(
                (0..9)
                    .map(|i| {
                        rect(
                            -0.6 + i as f32 * 0.14,
                            0.6,
                            -0.56 + i as f32 * 0.14,
                            0.64,
                            0.0,
                        )
                    })
                    .collect(),
            ),
            rgb(10, 10, 10),
        )
        .flat(),
        Part::new(rect(-0.3, 0.8, 0.3, 0.95, 0.01), rgb(240, 236, 220)).flat(),
        highlight(-0.4, 1.05, 0.2, 0.02),
    ];
    Model::new(parts, 1.2, 0.7)
}

fn guitar(look: &Look, rng: &mut Rng) -> Model {
    let wood = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(210, 140, 60), rgb(150, 40, 40), rgb(30, 30, 30)]));
    let body = smooth(0.05, vec![circle(0.0, 0.22, 0.22), circle(0.0, 0.5, 0.16)]);
    let parts = vec![
        Part::new(body, wood).shade(0.8),
        Part::new(circle(0.0, 0.42, 0.07), rgb(30, 20, 14)).flat(),
        Part::new(rect(-0.035, 0.45, 0.035, 1.05, 0.01), rgb(90, 60, 30)),
        Part::new(rect(-0.05, 1.02, 0.05, 1.18, 0.02), rgb(60, 40, 24)),
        Part::new(
            union(
                (0..3)
                    .map(|i| {
                        rect(
                            -0.02 + i as f32 * 0.02,
                            0.2,
                            -0.015 + i as f32 * 0.02,
                            1.05,
                            0.0,
                        )
                    })
                    .collect(),
            ),
            rgb(230, 230, 220),
        )
        .flat(),
        Part::new(rect(-0.08, 0.14, 0.08, 0.17, 0.01), rgb(40, 30, 20)),
    ];
    Model::new(parts, 1.18, 0.22)
}

fn violin(look: &Look) -> Model {
    let wood = look.color.unwrap_or(rgb(170, 80, 30));
    let body = smooth(
        0.03,
        vec![
            ellipse(0.0, 0.2, 0.18, 0.17),
            ellipse(0.0, 0.5, 0.14, 0.14),
            rect(-0.1, 0.2, 0.1, 0.5, 0.0),
        ],
    );
    let parts = vec![
        Part::new(body, wood).shade(0.8),
        Part::new(
            union(vec![
                chain(&[(-0.06, 0.38), (-0.08, 0.32), (-0.06, 0.26)], 0.01, 0.01),
                chain(&[(0.06, 0.38), (0.08, 0.32), (0.06, 0.26)], 0.01, 0.01),
            ]),
            rgb(30, 20, 10),
        )
        .flat(),
        Part::new(rect(-0.03, 0.4, 0.03, 0.95, 0.01), rgb(30, 24, 20)),
        Part::new(circle(0.0, 0.98, 0.04), wood),
        Part::new(cap(-0.4, 0.1, 0.4, 0.7, 0.01, 0.01), rgb(200, 170, 120)),
    ];
    Model::new(parts, 1.02, 0.4)
}

fn drum(look: &Look, rng: &mut Rng) -> Model {
    let c = look
        .color
        .unwrap_or_else(|| pick(rng, &[rgb(200, 40, 40), rgb(40, 80, 170)]));
    let parts = vec![
        Part::new(rect(-0.4, 0.0, 0.4, 0.5, 0.02), c).shade(0.8),
        Part::new(
            union(
                (0..5)
                    .map(|i| {
                        let x = -0.36 + i as f32 * 0.18;
                        cap(x, 0.04, x + 0.09, 0.46, 0.008, 0.008)
                    })
                    .collect(),
            ),
            rgb(230, 210, 120),
        )
        .flat(),
        Part::new(ellipse(0.0, 0.5, 0.4, 0.08), rgb(246, 242, 232)).shade(0.3),
        Part::new(
            union(vec![
                cap(-0.2, 0.56, 0.25, 0.85, 0.015, 0.012),
                cap(0.1, 0.56, 0.45, 0.8, 0.015, 0.012),
            ]),
            rgb(210, 170, 110),
        ),
    ];
    Model::new(parts, 0.88, 0.42)
}

fn television(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(30, 30, 34));
    let parts = vec![
        Part::new(rect(-0.3, 0.0, 0.3, 0.05, 0.01), c),
        Part::new(rect(-0.05, 0.05, 0.05, 0.14, 0.0), c),
        Part::new(rect(-0.8, 0.14, 0.8, 1.0, 0.03), c).shade(0.4),
        Part::fill(
            rect(-0.74, 0.2, 0.74, 0.94, 0.01),
            Fill::Func(Box::new(|_, y| {
                mix(
                    rgb(80, 160, 230),
                    rgb(240, 170, 90),
                    ((y - 0.2) / 0.74).clamp(0.0, 1.0),
                )
            })),
        )
        .glow(),
        Part::new(
            poly_of(&[
                (-0.74, 0.2),
                (-0.2, 0.6),
                (0.2, 0.35),
                (0.74, 0.7),
                (0.74, 0.2),
            ]),
            rgb(40, 90, 60),
        )
        .glow(),
    ];
    Model::new(parts, 1.0, 0.8)
}

fn umbrella(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(200, 40, 40),
                rgb(30, 30, 34),
                rgb(240, 190, 40),
                rgb(40, 100, 190),
            ],
        )
    });
    let canopy = sub(
        ellipse(0.0, 0.72, 0.55, 0.3),
        union(vec![rect(-0.7, 0.4, 0.7, 0.72, 0.0)]),
    );
    let scallops = union(
        (0..4)
            .map(|i| ellipse(-0.41 + i as f32 * 0.275, 0.72, 0.14, 0.05))
            .collect(),
    );
    let parts = vec![
        Part::new(
            chain(
                &[
                    (0.0, 0.98),
                    (0.0, 0.1),
                    (0.02, 0.04),
                    (0.07, 0.04),
                    (0.08, 0.09),
                ],
                0.016,
                0.016,
            ),
            rgb(50, 40, 34),
        ),
        Part::fill(
            sub(canopy, scallops),
            Fill::Func(Box::new(move |x, _| {
                if ((x + 1.0) * 3.6) as i32 % 2 == 0 {
                    c
                } else {
                    dark(c, 0.82)
                }
            })),
        )
        .shade(0.6),
    ];
    Model::new(parts, 1.02, 0.56)
}

fn ball(look: &Look, rng: &mut Rng) -> Model {
    let kind = if let Some(c) = look.color {
        (c, rgb(30, 30, 30))
    } else {
        match rng.below(3) {
            0 => (rgb(246, 246, 242), rgb(24, 24, 24)),
            1 => (rgb(230, 120, 40), rgb(40, 24, 20)),
            _ => (rgb(210, 230, 60), rgb(250, 250, 240)),
        }
    };
    let (base, line) = kind;
    let parts = vec![
        Part::new(circle(0.0, 0.5, 0.5), base).shade(0.9),
        Part::new(
            union(vec![
                sub(circle(-0.55, 0.5, 0.5), circle(-0.55, 0.5, 0.46)),
                sub(circle(0.55, 0.5, 0.5), circle(0.55, 0.5, 0.46)),
                rect(-0.5, 0.48, 0.5, 0.52, 0.0),
            ]),
            line,
        )
        .flat(),
        highlight(-0.16, 0.7, 0.08, 0.06),
    ];
    Model::new(parts, 1.0, 0.5)
}
