//! The object library: animals, trees, buildings, vessels, balloons, rockets, fruit and cups as
//! signed-distance drawings ([`shapes`]). Each builder returns a [`Model`] in a local frame
//! (base at y = 0, facing right, about one unit tall) that the scene places, lights and mirrors.
//!
//! Shapes are drawn for recognisable silhouettes first (ears and a curled tail make a cat, long
//! legs and a mane a horse, a banded tower with a lantern a lighthouse), because at dusk and at
//! night objects are seen as silhouettes against the sky; by day the fills, rounded shading and
//! details (eyes, windows, stripes) take over.

use super::canvas::{Rgb, mix, rgb, scale};
use super::noise::{Rng, value2};
use super::prompt::{Age, Garment, Pose, Season, Subject, Thing};
use super::shapes::{
    Fill, Part, Sdf, cap, chain, circle, ellipse, inter, poly_of, rect, rotated, smooth, sub, union,
};

/// What a drawing depends on besides the thing itself.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// The colour the prompt gave the thing.
    pub color: Option<Rgb>,
    pub season: Option<Season>,
    /// Windows and lanterns are lit.
    pub lit: bool,
    /// Snow lies on roofs and branches.
    pub snow: bool,
    /// Underwater variant (whales swim instead of showing their tail).
    pub underwater: bool,
    /// Flying variant (birds with spread wings).
    pub flying: bool,
    pub seed: u32,
    /// For people: hair, clothes, age, pose and what they hold.
    pub figure: Figure,
}

/// How a person looks (see `library::figure`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Figure {
    pub hair: Option<Rgb>,
    pub age: Option<Age>,
    pub female: Option<bool>,
    pub pose: Option<Pose>,
    /// Garments worn, each with the colour the prompt gave it.
    pub wear: [Option<Option<Rgb>>; 7],
    pub held: Option<Thing>,
    /// The colour the prompt gave the held thing.
    pub held_color: Option<Rgb>,
    /// Sits on a seat (bench, chair, sofa) rather than on the ground.
    pub seated: bool,
}

impl Figure {
    pub fn from_subject(s: &Subject, held: Option<&Subject>, seated: bool) -> Figure {
        let mut wear = [None; 7];
        for (g, c) in &s.wear {
            wear[*g as usize] = Some(*c);
        }
        Figure {
            hair: s.hair,
            age: s.age,
            female: s.female,
            pose: s.pose,
            wear,
            held: held.map(|h| h.thing),
            held_color: held.and_then(|h| h.color),
            seated,
        }
    }

    /// Worn, and in which colour if the prompt said.
    pub fn worn(&self, g: Garment) -> Option<Option<Rgb>> {
        self.wear[g as usize]
    }
}

/// A light source on an object: local position, radius (units) and colour.
#[derive(Debug, Clone, Copy)]
pub struct Lamp {
    pub x: f32,
    pub y: f32,
    pub r: f32,
    pub color: Rgb,
    pub strength: f32,
}

pub struct Model {
    pub parts: Vec<Part>,
    /// Top of the drawing (units); the scene scales objects by it.
    pub height: f32,
    /// Half the footprint, for contact shadows and spacing.
    pub half_width: f32,
    pub lamps: Vec<Lamp>,
    /// A lighthouse beam starts here.
    pub beam: Option<(f32, f32)>,
    /// Where a rider or sitter sits (local units), and how tall a standing person is in the
    /// same units, for things that can be ridden or sat on.
    pub saddle: Option<(f32, f32, f32)>,
}

impl Model {
    pub(super) fn new(parts: Vec<Part>, height: f32, half_width: f32) -> Model {
        Model {
            parts,
            height,
            half_width,
            lamps: Vec::new(),
            beam: None,
            saddle: None,
        }
    }
}

const WINDOW_LIT: Rgb = [1.0, 0.8, 0.45];
const WINDOW_DAY: Rgb = [0.46, 0.58, 0.7];

pub(super) fn pick(rng: &mut Rng, options: &[Rgb]) -> Rgb {
    options[rng.below(options.len())]
}

pub(super) fn dark(c: Rgb, k: f32) -> Rgb {
    scale(c, k)
}

pub(super) fn light(c: Rgb, k: f32) -> Rgb {
    mix(c, [1.0, 1.0, 1.0], k)
}

pub fn build(thing: Thing, look: &Look) -> Model {
    let mut rng = Rng::new(u64::from(look.seed) ^ 0x000B_1EC7);
    match thing {
        Thing::Cat => cat(look, &mut rng),
        Thing::Dog => dog(look, &mut rng),
        Thing::Deer => deer(look),
        Thing::Fox => fox(look),
        Thing::Wolf => wolf(look),
        Thing::Bear => bear(look),
        Thing::Rabbit => rabbit(look, &mut rng),
        Thing::Bird => {
            if look.flying {
                flying_bird(look)
            } else {
                songbird(look, &mut rng)
            }
        }
        Thing::Owl => owl(look),
        Thing::Swan => swan(look),
        Thing::Duck => duck(look),
        Thing::Fish => fish(look, &mut rng),
        Thing::Whale => {
            if look.underwater {
                whale(look)
            } else {
                whale_tail(look)
            }
        }
        Thing::Dolphin => dolphin(look),
        Thing::Butterfly => butterfly(look, &mut rng),
        Thing::Person => super::library::figure(Thing::Person, look, &mut rng),
        Thing::Tree => tree(look, &mut rng, false),
        Thing::Sakura => tree(look, &mut rng, true),
        Thing::Pine => pine(look),
        Thing::Palm => palm(look, &mut rng),
        Thing::Birch => birch(look),
        Thing::House => house(look, &mut rng),
        Thing::Cabin => cabin(look),
        Thing::Castle => castle(look),
        Thing::Lighthouse => lighthouse(look),
        Thing::Windmill => windmill(look, &mut rng),
        Thing::Pagoda => pagoda(look),
        Thing::Boat => boat(look, &mut rng),
        Thing::Ship => ship(look),
        Thing::Balloon => balloon(look, &mut rng),
        Thing::Rocket => rocket(look),
        Thing::Snowman => snowman(look),
        Thing::Apple => apple(look),
        Thing::Orange => orange(look),
        Thing::Pear => pear(look),
        Thing::Banana => banana(look),
        Thing::Cherry => cherry(look),
        Thing::Lemon => lemon(look),
        Thing::Cup => cup(look, &mut rng),
        Thing::Unicorn => {
            let mut m = horse(look, &mut rng);
            m.parts.push(
                Part::new(
                    poly_of(&[(0.6, 1.04), (0.7, 1.4), (0.66, 1.02)]),
                    rgb(240, 214, 130),
                )
                .shade(0.5),
            );
            m.height = 1.4;
            m.saddle = Some((-0.08, 0.8, 1.15));
            m
        }
        Thing::Horse => {
            let mut m = horse(look, &mut rng);
            m.saddle = Some((-0.08, 0.8, 1.15));
            m
        }
        other => super::library::draw(other, look, &mut rng),
    }
}

// ---------------------------------------------------------------------------------------------
// Animals.

pub(super) fn fur(p: Part) -> Part {
    p.shade(0.9).tex(0.05, 60.0)
}

pub(super) fn eye(x: f32, y: f32, r: f32, iris: Rgb) -> Vec<Part> {
    vec![
        Part::new(ellipse(x, y, r, r * 1.15), iris).shade(0.3),
        Part::new(
            ellipse(x + r * 0.15, y, r * 0.45, r * 0.95),
            rgb(12, 10, 10),
        )
        .flat(),
        Part::new(
            circle(x + r * 0.35, y + r * 0.4, r * 0.25),
            rgb(250, 250, 250),
        )
        .flat(),
    ]
}

fn cat(look: &Look, rng: &mut Rng) -> Model {
    let coat = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(214, 124, 52),
                rgb(120, 116, 112),
                rgb(40, 36, 40),
                rgb(226, 220, 208),
                rgb(150, 110, 80),
            ],
        )
    });
    let body = smooth(
        0.07,
        vec![
            ellipse(-0.06, 0.24, 0.25, 0.24),
            cap(-0.02, 0.3, 0.09, 0.55, 0.19, 0.12),
            cap(0.15, 0.05, 0.14, 0.45, 0.055, 0.06),
            ellipse(0.17, 0.03, 0.075, 0.032),
            circle(0.13, 0.68, 0.145),
            ellipse(0.24, 0.635, 0.065, 0.05),
        ],
    );
    let ears = union(vec![
        poly_of(&[(0.02, 0.72), (0.045, 0.95), (0.14, 0.8)]),
        poly_of(&[(0.13, 0.81), (0.22, 0.96), (0.25, 0.72)]),
    ]);
    let tail = chain(
        &[
            (-0.26, 0.07),
            (-0.38, 0.1),
            (-0.46, 0.22),
            (-0.46, 0.38),
            (-0.38, 0.5),
        ],
        0.05,
        0.038,
    );
    let mut parts = vec![
        fur(Part::new(union(vec![tail]), dark(coat, 0.9))),
        fur(Part::new(union(vec![body, ears]), coat)),
        Part::new(
            union(vec![
                poly_of(&[(0.05, 0.77), (0.06, 0.9), (0.12, 0.8)]),
                poly_of(&[(0.15, 0.81), (0.21, 0.91), (0.23, 0.76)]),
            ]),
            mix(coat, rgb(230, 150, 150), 0.6),
        )
        .flat(),
        Part::new(ellipse(0.23, 0.6, 0.05, 0.03), light(coat, 0.35)).shade(0.3),
        Part::new(
            poly_of(&[(0.28, 0.66), (0.31, 0.665), (0.295, 0.64)]),
            rgb(200, 110, 120),
        )
        .flat(),
    ];
    parts.extend(eye(0.2, 0.7, 0.024, rgb(140, 190, 60)));
    Model::new(parts, 0.96, 0.4)
}

fn dog(look: &Look, rng: &mut Rng) -> Model {
    let coat = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(206, 156, 86),
                rgb(120, 78, 46),
                rgb(46, 40, 38),
                rgb(230, 222, 206),
            ],
        )
    });
    let body = smooth(
        0.06,
        vec![
            cap(-0.32, 0.56, 0.22, 0.58, 0.16, 0.18),
            circle(0.25, 0.56, 0.18),
            ellipse(-0.3, 0.5, 0.16, 0.18),
            cap(0.27, 0.45, 0.28, 0.04, 0.06, 0.045),
            cap(-0.3, 0.42, -0.2, 0.22, 0.08, 0.05),
            cap(-0.2, 0.22, -0.25, 0.04, 0.05, 0.043),
            cap(0.3, 0.6, 0.42, 0.8, 0.1, 0.09),
            circle(0.45, 0.84, 0.115),
            cap(0.5, 0.82, 0.66, 0.78, 0.068, 0.05),
        ],
    );
    let far_legs = union(vec![
        cap(0.17, 0.45, 0.15, 0.04, 0.055, 0.043),
        cap(-0.38, 0.42, -0.36, 0.04, 0.06, 0.043),
    ]);
    let tail = chain(&[(-0.44, 0.62), (-0.55, 0.76), (-0.6, 0.9)], 0.045, 0.025);
    let mut parts = vec![
        fur(Part::new(union(vec![far_legs, tail]), dark(coat, 0.78))),
        fur(Part::new(body, coat)),
        fur(Part::new(
            cap(0.4, 0.93, 0.35, 0.75, 0.05, 0.045),
            dark(coat, 0.7),
        )),
        Part::new(circle(0.665, 0.79, 0.03), rgb(20, 16, 16)).shade(0.3),
        Part::new(
            union(vec![
                ellipse(0.28, 0.03, 0.07, 0.03),
                ellipse(0.18, 0.03, 0.065, 0.028),
                ellipse(-0.24, 0.03, 0.065, 0.028),
                ellipse(-0.35, 0.03, 0.065, 0.028),
            ]),
            dark(coat, 0.85),
        ),
    ];
    parts.extend(eye(0.49, 0.87, 0.022, rgb(90, 60, 30)));
    Model::new(parts, 1.0, 0.5)
}

fn horse(look: &Look, rng: &mut Rng) -> Model {
    let coat = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(120, 70, 40),
                rgb(60, 40, 30),
                rgb(220, 214, 204),
                rgb(160, 110, 70),
            ],
        )
    });
    let mane_c = if lum3(coat) > 0.6 {
        dark(coat, 0.75)
    } else {
        dark(coat, 0.4)
    };
    let body = smooth(
        0.07,
        vec![
            cap(-0.42, 0.64, 0.28, 0.66, 0.18, 0.19),
            circle(0.28, 0.62, 0.18),
            circle(-0.4, 0.66, 0.18),
            cap(0.3, 0.5, 0.32, 0.24, 0.06, 0.042),
            cap(0.32, 0.24, 0.31, 0.03, 0.04, 0.034),
            cap(-0.43, 0.52, -0.36, 0.28, 0.085, 0.045),
            cap(-0.36, 0.28, -0.42, 0.03, 0.042, 0.034),
            cap(0.3, 0.7, 0.5, 0.98, 0.13, 0.075),
            cap(0.5, 1.0, 0.69, 0.83, 0.085, 0.05),
        ],
    );
    let far_legs = union(vec![
        cap(0.2, 0.5, 0.16, 0.26, 0.055, 0.04),
        cap(0.16, 0.26, 0.19, 0.03, 0.038, 0.034),
        cap(-0.3, 0.52, -0.26, 0.28, 0.07, 0.042),
        cap(-0.26, 0.28, -0.3, 0.03, 0.04, 0.034),
    ]);
    let hooves = union(vec![
        rect(0.27, 0.0, 0.35, 0.04, 0.01),
        rect(-0.46, 0.0, -0.38, 0.04, 0.01),
    ]);
    let mane = chain(&[(0.25, 0.82), (0.36, 0.96), (0.47, 1.06)], 0.05, 0.04);
    let tail = chain(
        &[(-0.57, 0.74), (-0.66, 0.58), (-0.66, 0.36), (-0.62, 0.22)],
        0.05,
        0.065,
    );
    let ear = poly_of(&[(0.46, 1.02), (0.48, 1.13), (0.53, 1.04)]);
    let mut parts = vec![
        fur(Part::new(far_legs, dark(coat, 0.75))),
        fur(Part::new(union(vec![tail]), mane_c)).tex(0.12, 90.0),
        fur(Part::new(union(vec![body, ear]), coat)),
        fur(Part::new(mane, mane_c)).tex(0.12, 90.0),
        Part::new(hooves, rgb(40, 34, 30)),
    ];
    parts.extend(eye(0.56, 0.96, 0.02, rgb(40, 26, 18)));
    Model::new(parts, 1.12, 0.55)
}

fn deer(look: &Look) -> Model {
    let coat = look.color.unwrap_or(rgb(158, 104, 62));
    let body = smooth(
        0.06,
        vec![
            cap(-0.32, 0.62, 0.2, 0.64, 0.14, 0.15),
            circle(0.22, 0.62, 0.14),
            cap(0.22, 0.52, 0.24, 0.25, 0.045, 0.03),
            cap(0.24, 0.25, 0.23, 0.02, 0.03, 0.025),
            cap(-0.33, 0.55, -0.27, 0.28, 0.07, 0.032),
            cap(-0.27, 0.28, -0.31, 0.02, 0.03, 0.025),
            cap(0.24, 0.68, 0.36, 0.95, 0.085, 0.06),
            circle(0.37, 0.98, 0.07),
            cap(0.38, 0.97, 0.5, 0.9, 0.05, 0.032),
        ],
    );
    let far_legs = union(vec![
        cap(0.14, 0.52, 0.12, 0.02, 0.04, 0.025),
        cap(-0.22, 0.55, -0.2, 0.02, 0.05, 0.025),
    ]);
    let antlers = union(vec![
        chain(
            &[(0.35, 1.03), (0.31, 1.18), (0.24, 1.3), (0.16, 1.36)],
            0.016,
            0.01,
        ),
        chain(&[(0.31, 1.17), (0.38, 1.27)], 0.012, 0.008),
        chain(&[(0.26, 1.27), (0.27, 1.38)], 0.011, 0.007),
        chain(&[(0.38, 1.03), (0.4, 1.17), (0.46, 1.27)], 0.014, 0.009),
    ]);
    let ears = union(vec![
        cap(0.33, 1.02, 0.25, 1.07, 0.025, 0.015),
        cap(0.4, 1.03, 0.45, 1.08, 0.022, 0.014),
    ]);
    let mut parts = vec![
        fur(Part::new(far_legs, dark(coat, 0.75))),
        fur(Part::new(union(vec![body, ears]), coat)),
        Part::new(circle(-0.45, 0.66, 0.035), rgb(240, 236, 226)),
        Part::new(antlers, rgb(120, 96, 70)).shade(0.4),
        Part::new(circle(0.505, 0.9, 0.018), rgb(20, 16, 16)),
    ];
    parts.extend(eye(0.4, 1.0, 0.016, rgb(30, 20, 14)));
    Model::new(parts, 1.38, 0.45)
}

fn canine(coat: Rgb, belly: Rgb, tail: Sdf, ears: Sdf, legs: f32) -> Vec<Part> {
    let body = smooth(
        0.05,
        vec![
            cap(-0.3, 0.45 + legs, 0.2, 0.47 + legs, 0.13, 0.15),
            circle(0.22, 0.45 + legs, 0.15),
            cap(0.24, 0.38 + legs, 0.25, 0.03, 0.05, 0.035),
            cap(-0.3, 0.38 + legs, -0.22, 0.2, 0.07, 0.04),
            cap(-0.22, 0.2, -0.26, 0.03, 0.04, 0.035),
            cap(0.26, 0.5 + legs, 0.36, 0.68 + legs, 0.09, 0.08),
            circle(0.39, 0.7 + legs, 0.1),
            cap(0.42, 0.68 + legs, 0.58, 0.64 + legs, 0.06, 0.03),
            ears,
        ],
    );
    let far_legs = union(vec![
        cap(0.15, 0.38 + legs, 0.13, 0.03, 0.045, 0.033),
        cap(-0.36, 0.38 + legs, -0.35, 0.03, 0.05, 0.033),
    ]);
    let mut parts = vec![
        fur(Part::new(far_legs, dark(coat, 0.7))),
        fur(Part::new(tail, coat)).tex(0.1, 70.0),
        fur(Part::new(body, coat)),
        fur(Part::new(ellipse(0.3, 0.42 + legs, 0.07, 0.1), belly)),
        Part::new(circle(0.585, 0.645 + legs, 0.022), rgb(18, 14, 14)),
    ];
    parts.extend(eye(0.43, 0.73 + legs, 0.017, rgb(190, 140, 40)));
    parts
}

fn fox(look: &Look) -> Model {
    let coat = look.color.unwrap_or(rgb(222, 112, 38));
    let tail = union(vec![cap(-0.36, 0.42, -0.72, 0.28, 0.06, 0.11)]);
    let ears = union(vec![
        poly_of(&[(0.32, 0.75), (0.35, 0.9), (0.41, 0.77)]),
        poly_of(&[(0.39, 0.77), (0.45, 0.9), (0.47, 0.74)]),
    ]);
    let mut parts = canine(coat, rgb(244, 238, 226), tail, ears, 0.0);
    parts.push(fur(Part::new(circle(-0.8, 0.25, 0.07), rgb(244, 238, 226))));
    parts.push(Part::new(
        union(vec![
            rect(0.21, 0.0, 0.29, 0.12, 0.02),
            rect(-0.3, 0.0, -0.22, 0.1, 0.02),
        ]),
        rgb(40, 28, 24),
    ));
    Model::new(parts, 0.9, 0.5)
}

fn wolf(look: &Look) -> Model {
    let coat = look.color.unwrap_or(rgb(128, 126, 122));
    let tail = cap(-0.38, 0.5, -0.6, 0.2, 0.06, 0.075);
    let ears = union(vec![
        poly_of(&[(0.3, 0.83), (0.33, 0.98), (0.39, 0.85)]),
        poly_of(&[(0.37, 0.85), (0.42, 0.98), (0.45, 0.82)]),
    ]);
    let parts = canine(coat, rgb(210, 206, 198), tail, ears, 0.1);
    Model::new(parts, 0.98, 0.5)
}

fn bear(look: &Look) -> Model {
    let coat = look.color.unwrap_or(rgb(98, 64, 40));
    let body = smooth(
        0.1,
        vec![
            ellipse(-0.05, 0.45, 0.48, 0.3),
            circle(-0.08, 0.62, 0.22),
            cap(0.3, 0.38, 0.32, 0.04, 0.1, 0.08),
            cap(-0.38, 0.38, -0.36, 0.04, 0.11, 0.08),
            cap(0.35, 0.55, 0.5, 0.56, 0.12, 0.11),
            circle(0.55, 0.57, 0.14),
            cap(0.6, 0.53, 0.72, 0.5, 0.07, 0.05),
            circle(0.48, 0.71, 0.05),
            circle(0.6, 0.71, 0.045),
        ],
    );
    let far = union(vec![
        cap(0.18, 0.38, 0.2, 0.04, 0.09, 0.08),
        cap(-0.26, 0.38, -0.24, 0.04, 0.1, 0.08),
    ]);
    let mut parts = vec![
        fur(Part::new(far, dark(coat, 0.7))),
        fur(Part::new(body, coat)).tex(0.08, 50.0),
        Part::new(circle(0.735, 0.51, 0.028), rgb(18, 14, 12)),
    ];
    parts.extend(eye(0.6, 0.61, 0.016, rgb(30, 20, 14)));
    Model::new(parts, 0.78, 0.55)
}

fn rabbit(look: &Look, rng: &mut Rng) -> Model {
    let coat = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[rgb(170, 140, 110), rgb(236, 232, 226), rgb(120, 110, 100)],
        )
    });
    let body = smooth(
        0.07,
        vec![
            ellipse(-0.04, 0.24, 0.26, 0.24),
            circle(0.16, 0.5, 0.14),
            ellipse(0.22, 0.04, 0.09, 0.04),
            cap(0.14, 0.1, 0.16, 0.3, 0.05, 0.05),
        ],
    );
    let ears = union(vec![
        cap(0.1, 0.58, 0.03, 0.96, 0.045, 0.05),
        cap(0.18, 0.6, 0.22, 0.97, 0.045, 0.05),
    ]);
    let mut parts = vec![
        fur(Part::new(union(vec![body, ears]), coat)),
        Part::new(
            cap(0.19, 0.66, 0.215, 0.92, 0.018, 0.025),
            mix(coat, rgb(230, 150, 150), 0.5),
        )
        .flat(),
        fur(Part::new(circle(-0.3, 0.2, 0.075), rgb(244, 242, 238))),
        Part::new(circle(0.295, 0.5, 0.018), rgb(200, 110, 120)),
    ];
    parts.extend(eye(0.22, 0.54, 0.022, rgb(30, 20, 14)));
    Model::new(parts, 0.98, 0.35)
}

fn songbird(look: &Look, rng: &mut Rng) -> Model {
    let back = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(110, 80, 56),
                rgb(60, 110, 180),
                rgb(80, 80, 86),
                rgb(200, 60, 40),
            ],
        )
    });
    let breast = if look.color.is_some() {
        light(back, 0.4)
    } else {
        rgb(232, 120, 50)
    };
    let body = smooth(
        0.05,
        vec![
            cap(-0.14, 0.34, 0.14, 0.5, 0.17, 0.16),
            circle(0.2, 0.62, 0.13),
        ],
    );
    let tail = poly_of(&[(-0.2, 0.36), (-0.58, 0.16), (-0.52, 0.1), (-0.16, 0.26)]);
    let branch = union(vec![
        cap(-0.85, 0.12, 0.85, 0.07, 0.03, 0.022),
        cap(0.45, 0.08, 0.7, 0.22, 0.015, 0.008),
    ]);
    let leaves = union(vec![
        ellipse(0.72, 0.25, 0.07, 0.035),
        ellipse(-0.6, 0.17, 0.07, 0.03),
    ]);
    let mut parts = vec![
        Part::new(branch, rgb(92, 66, 44)).tex(0.1, 40.0),
        Part::new(leaves, rgb(70, 130, 60)),
        Part::new(
            union(vec![
                cap(0.0, 0.22, 0.02, 0.11, 0.012, 0.01),
                cap(0.08, 0.22, 0.1, 0.1, 0.012, 0.01),
            ]),
            rgb(60, 50, 40),
        ),
        fur(Part::new(tail, dark(back, 0.8))),
        fur(Part::fill(
            body,
            Fill::Func(Box::new(move |x, y| {
                let k = ((x - 0.05) * 2.0 + (0.55 - y) * 3.0).clamp(0.0, 1.0);
                mix(back, breast, k)
            })),
        )),
        fur(Part::new(ellipse(-0.06, 0.43, 0.17, 0.09), dark(back, 0.8))),
        Part::new(
            poly_of(&[(0.31, 0.65), (0.43, 0.61), (0.31, 0.57)]),
            rgb(240, 190, 70),
        ),
    ];
    parts.extend(eye(0.24, 0.65, 0.022, rgb(20, 16, 14)));
    Model::new(parts, 0.78, 0.6)
}

fn flying_bird(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(40, 38, 44));
    let wings = union(vec![
        chain(&[(0.0, 0.1), (-0.22, 0.24), (-0.5, 0.18)], 0.035, 0.008),
        chain(&[(0.0, 0.1), (0.22, 0.24), (0.5, 0.18)], 0.035, 0.008),
        ellipse(0.0, 0.09, 0.07, 0.035),
        circle(0.06, 0.11, 0.028),
    ]);
    Model::new(vec![Part::new(wings, c).shade(0.3)], 0.28, 0.5)
}

fn owl(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(140, 100, 66));
    let body = smooth(
        0.12,
        vec![ellipse(0.0, 0.42, 0.27, 0.34), circle(0.0, 0.74, 0.22)],
    );
    let tufts = union(vec![
        poly_of(&[(-0.2, 0.85), (-0.24, 1.02), (-0.08, 0.92)]),
        poly_of(&[(0.2, 0.85), (0.24, 1.02), (0.08, 0.92)]),
    ]);
    let branch = cap(-0.8, 0.1, 0.8, 0.08, 0.035, 0.025);
    let mut parts = vec![
        Part::new(branch, rgb(92, 66, 44)).tex(0.1, 40.0),
        fur(Part::new(union(vec![body, tufts]), c)).tex(0.1, 45.0),
        fur(Part::new(ellipse(0.0, 0.38, 0.17, 0.22), light(c, 0.45))).tex(0.12, 35.0),
        fur(Part::new(ellipse(-0.22, 0.42, 0.09, 0.22), dark(c, 0.75))),
        fur(Part::new(ellipse(0.22, 0.42, 0.09, 0.22), dark(c, 0.75))),
        Part::new(
            union(vec![circle(-0.095, 0.76, 0.1), circle(0.095, 0.76, 0.1)]),
            light(c, 0.55),
        )
        .shade(0.3),
        Part::new(
            poly_of(&[(-0.03, 0.7), (0.03, 0.7), (0.0, 0.62)]),
            rgb(60, 50, 40),
        ),
        Part::new(
            union(vec![
                cap(-0.06, 0.12, -0.05, 0.07, 0.02, 0.02),
                cap(0.06, 0.12, 0.05, 0.07, 0.02, 0.02),
            ]),
            rgb(200, 160, 60),
        ),
    ];
    for x in [-0.095, 0.095] {
        parts.push(
            Part::new(circle(x, 0.76, 0.06), rgb(250, 200, 40))
                .shade(0.2)
                .glow_if(look.lit),
        );
        parts.push(Part::new(circle(x, 0.76, 0.03), rgb(10, 8, 8)).flat());
        parts.push(Part::new(circle(x + 0.015, 0.775, 0.01), rgb(255, 255, 255)).flat());
    }
    Model::new(parts, 1.02, 0.3)
}

trait GlowIf {
    fn glow_if(self, on: bool) -> Part;
}

impl GlowIf for Part {
    fn glow_if(self, on: bool) -> Part {
        if on { self.glow() } else { self }
    }
}

fn swan(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(246, 244, 240));
    let above = rect(-2.0, 0.0, 2.0, 3.0, 0.0);
    let body = smooth(
        0.05,
        vec![
            ellipse(-0.02, 0.05, 0.42, 0.18),
            poly_of(&[(-0.42, 0.08), (-0.55, 0.28), (-0.3, 0.16)]),
        ],
    );
    let neck = chain(
        &[
            (0.3, 0.12),
            (0.36, 0.36),
            (0.28, 0.56),
            (0.3, 0.72),
            (0.4, 0.76),
        ],
        0.06,
        0.035,
    );
    let parts = vec![
        Part::new(inter(union(vec![body, neck]), above), c).shade(0.8),
        Part::new(
            inter(
                ellipse(-0.08, 0.12, 0.28, 0.11),
                rect(-2.0, 0.04, 2.0, 3.0, 0.0),
            ),
            dark(c, 0.9),
        )
        .shade(0.9),
        Part::new(circle(0.4, 0.75, 0.055), c).shade(0.6),
        Part::new(
            poly_of(&[(0.43, 0.78), (0.56, 0.72), (0.43, 0.71)]),
            rgb(236, 120, 30),
        ),
        Part::new(circle(0.41, 0.765, 0.012), rgb(10, 10, 10)),
    ];
    Model::new(parts, 0.8, 0.45)
}

fn duck(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(130, 100, 70));
    let above = rect(-2.0, 0.0, 2.0, 3.0, 0.0);
    let body = smooth(
        0.06,
        vec![
            ellipse(0.0, 0.08, 0.36, 0.17),
            poly_of(&[(-0.34, 0.1), (-0.46, 0.26), (-0.26, 0.18)]),
        ],
    );
    let head = smooth(
        0.05,
        vec![
            cap(0.22, 0.2, 0.26, 0.38, 0.07, 0.06),
            circle(0.28, 0.44, 0.1),
        ],
    );
    let head_c = if look.color.is_some() {
        dark(c, 0.7)
    } else {
        rgb(30, 110, 60)
    };
    let mut parts = vec![
        Part::new(inter(body, above.clone()), c)
            .shade(0.8)
            .tex(0.05, 50.0),
        Part::new(inter(ellipse(-0.06, 0.15, 0.22, 0.08), above), dark(c, 0.8)).shade(0.7),
        Part::new(head, head_c).shade(0.8),
        Part::new(ellipse(0.41, 0.42, 0.08, 0.03), rgb(240, 180, 40)),
    ];
    parts.extend(eye(0.31, 0.47, 0.018, rgb(20, 16, 14)));
    Model::new(parts, 0.56, 0.4)
}

fn fish(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(244, 130, 30),
                rgb(60, 140, 220),
                rgb(240, 200, 50),
                rgb(220, 70, 90),
            ],
        )
    });
    let stripes = rng.chance(0.5) && look.color.is_none();
    // Centred at y = 0.3 so the base is y = 0.
    let body = smooth(
        0.04,
        vec![
            inter(circle(0.0, 0.0, 0.42), circle(0.0, 0.6, 0.42)),
            ellipse(0.0, 0.3, 0.36, 0.2),
        ],
    );
    let tail = poly_of(&[(-0.3, 0.3), (-0.56, 0.5), (-0.5, 0.3), (-0.56, 0.1)]);
    let fins = union(vec![
        poly_of(&[(-0.12, 0.46), (0.0, 0.58), (0.1, 0.47)]),
        poly_of(&[(-0.05, 0.15), (0.02, 0.06), (0.08, 0.16)]),
    ]);
    let body_fill = Fill::Func(Box::new(move |x, y| {
        let band = stripes && ((x + 0.05).abs() < 0.04 || (x - 0.2).abs() < 0.03);
        let base = if band { rgb(250, 250, 246) } else { c };
        if y < 0.24 {
            light(base, 0.35)
        } else if y > 0.4 {
            dark(base, 0.85)
        } else {
            base
        }
    }));
    let mut parts = vec![
        Part::new(union(vec![tail, fins]), dark(c, 0.8))
            .shade(0.5)
            .alpha(0.95),
        Part::fill(body, body_fill).shade(0.9).tex(0.05, 70.0),
        Part::new(cap(0.05, 0.24, 0.2, 0.24, 0.01, 0.006), dark(c, 0.7)).flat(),
    ];
    parts.extend(eye(0.22, 0.34, 0.03, rgb(240, 240, 230)));
    Model::new(parts, 0.6, 0.55)
}

fn whale(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(52, 70, 92));
    let belly = light(c, 0.5);
    let body = smooth(
        0.12,
        vec![
            cap(-0.95, 0.3, 0.3, 0.32, 0.08, 0.26),
            ellipse(0.42, 0.3, 0.3, 0.25),
        ],
    );
    let fluke = union(vec![poly_of(&[
        (-0.95, 0.3),
        (-1.2, 0.52),
        (-1.12, 0.3),
        (-1.2, 0.08),
    ])]);
    let fin = chain(&[(0.2, 0.18), (0.05, 0.0), (-0.12, -0.08)], 0.06, 0.02);
    let parts = vec![
        Part::new(fin.clone(), dark(c, 0.8)).shade(0.6),
        Part::new(fluke, c).shade(0.6),
        Part::fill(
            body,
            Fill::Func(Box::new(move |x, y| {
                let grooves = y < 0.22 && x > -0.3 && ((y * 60.0).sin() > 0.6);
                if y < 0.2 {
                    if grooves { dark(belly, 0.85) } else { belly }
                } else {
                    c
                }
            })),
        )
        .shade(1.0)
        .tex(0.05, 25.0),
        Part::new(cap(0.3, 0.24, 0.7, 0.22, 0.008, 0.004), dark(c, 0.6)).flat(),
        Part::new(circle(0.45, 0.33, 0.02), rgb(16, 16, 20)),
        Part::new(fin, dark(c, 0.85)).shade(0.6),
    ];
    Model::new(parts, 0.6, 1.2)
}

fn whale_tail(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(44, 52, 62));
    let stem = cap(0.0, -0.05, 0.03, 0.45, 0.12, 0.055);
    let fluke = smooth(
        0.04,
        vec![
            poly_of(&[(0.03, 0.45), (-0.45, 0.72), (-0.5, 0.68), (-0.2, 0.52)]),
            poly_of(&[(0.03, 0.45), (0.5, 0.74), (0.55, 0.7), (0.25, 0.52)]),
            circle(0.03, 0.47, 0.07),
        ],
    );
    let drip = union(vec![
        cap(-0.46, 0.66, -0.47, 0.2, 0.01, 0.004),
        cap(0.5, 0.68, 0.51, 0.3, 0.01, 0.004),
    ]);
    let parts = vec![
        Part::new(drip, rgb(220, 232, 240)).alpha(0.5).flat(),
        Part::new(
            inter(union(vec![stem, fluke]), rect(-3.0, 0.0, 3.0, 3.0, 0.0)),
            c,
        )
        .shade(0.8),
        Part::new(ellipse(0.0, 0.0, 0.28, 0.03), rgb(236, 244, 250))
            .alpha(0.8)
            .flat(),
    ];
    Model::new(parts, 0.75, 0.5)
}

fn dolphin(look: &Look) -> Model {
    let c = look.color.unwrap_or(rgb(110, 128, 146));
    let body = smooth(
        0.06,
        vec![
            cap(-0.5, 0.15, -0.15, 0.36, 0.04, 0.12),
            cap(-0.15, 0.36, 0.3, 0.36, 0.12, 0.1),
            cap(0.3, 0.36, 0.52, 0.26, 0.1, 0.03),
            poly_of(&[(-0.05, 0.46), (-0.16, 0.62), (0.08, 0.46)]),
            poly_of(&[(-0.5, 0.15), (-0.66, 0.28), (-0.6, 0.12), (-0.62, 0.0)]),
        ],
    );
    let parts = vec![
        Part::fill(
            body,
            Fill::Func(Box::new(
                move |_, y| if y < 0.3 { light(c, 0.45) } else { c },
            )),
        )
        .shade(1.0),
        Part::new(
            chain(&[(0.1, 0.28), (0.0, 0.16), (-0.08, 0.12)], 0.04, 0.015),
            dark(c, 0.8),
        ),
        Part::new(circle(0.36, 0.36, 0.018), rgb(16, 16, 20)),
    ];
    Model::new(parts, 0.62, 0.6)
}

fn butterfly(look: &Look, rng: &mut Rng) -> Model {
    let c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(240, 130, 30),
                rgb(60, 120, 230),
                rgb(230, 80, 160),
                rgb(250, 210, 60),
            ],
        )
    });
    let upper = union(vec![
        rotated(
            &[(0.0, 0.5), (-0.48, 0.95), (-0.5, 0.6), (-0.2, 0.45)],
            0.0,
            0.5,
            0.0,
        ),
        rotated(
            &[(0.0, 0.5), (0.48, 0.95), (0.5, 0.6), (0.2, 0.45)],
            0.0,
            0.5,
            0.0,
        ),
    ]);
    let lower = union(vec![
        ellipse(-0.2, 0.3, 0.18, 0.16),
        ellipse(0.2, 0.3, 0.18, 0.16),
    ]);
    let wings = smooth(0.08, vec![upper, lower]);
    let inner = Sdf::Round(Box::new(wings.clone()), -0.035);
    let parts = vec![
        Part::new(wings, rgb(20, 16, 18)).shade(0.2),
        Part::fill(
            inner,
            Fill::Func(Box::new(move |x, y| {
                let spot = ((x.abs() - 0.3).powi(2) + (y - 0.72).powi(2)) < 0.004;
                if spot {
                    rgb(250, 250, 240)
                } else {
                    mix(c, dark(c, 0.6), (x.abs() * 1.5).min(1.0) * 0.4)
                }
            })),
        )
        .shade(0.3),
        Part::new(cap(0.0, 0.18, 0.0, 0.68, 0.03, 0.025), rgb(30, 24, 22)),
        Part::new(
            union(vec![
                chain(&[(0.0, 0.66), (-0.08, 0.82), (-0.13, 0.88)], 0.008, 0.006),
                chain(&[(0.0, 0.66), (0.08, 0.82), (0.13, 0.88)], 0.008, 0.006),
            ]),
            rgb(30, 24, 22),
        ),
    ];
    Model::new(parts, 0.95, 0.5)
}

// ---------------------------------------------------------------------------------------------
// Trees.

fn foliage_color(season: Option<Season>, rng: &mut Rng) -> Rgb {
    match season {
        Some(Season::Autumn) => pick(
            rng,
            &[rgb(214, 110, 36), rgb(190, 60, 30), rgb(228, 170, 40)],
        ),
        Some(Season::Spring) => rgb(120, 176, 70),
        _ => pick(rng, &[rgb(60, 120, 50), rgb(70, 130, 46), rgb(50, 104, 52)]),
    }
}

fn tree(look: &Look, rng: &mut Rng, blossom: bool) -> Model {
    let bark = rgb(84, 60, 44);
    let bare = look.snow && !blossom;
    let leaves = if blossom {
        look.color.unwrap_or(rgb(246, 182, 204))
    } else {
        look.color
            .unwrap_or_else(|| foliage_color(look.season, rng))
    };
    let trunk = union(vec![
        cap(0.0, 0.0, 0.02, 0.5, 0.075, 0.045),
        poly_of(&[(-0.12, 0.0), (0.12, 0.0), (0.05, 0.1), (-0.05, 0.1)]),
        chain(&[(0.02, 0.42), (-0.16, 0.6), (-0.26, 0.72)], 0.035, 0.012),
        chain(&[(0.02, 0.45), (0.18, 0.62), (0.28, 0.7)], 0.032, 0.012),
        chain(&[(0.02, 0.5), (0.03, 0.72), (-0.02, 0.86)], 0.03, 0.01),
        chain(&[(-0.12, 0.56), (-0.06, 0.74)], 0.015, 0.008),
        chain(&[(0.14, 0.58), (0.1, 0.8)], 0.015, 0.008),
    ]);
    let mut parts = vec![Part::new(trunk, bark).shade(0.7).tex(0.12, 50.0)];
    if bare {
        parts.push(
            Part::new(
                union(vec![
                    chain(&[(-0.26, 0.72), (-0.36, 0.8)], 0.01, 0.005),
                    chain(&[(0.28, 0.7), (0.38, 0.78)], 0.01, 0.005),
                    chain(&[(-0.02, 0.86), (-0.08, 0.96)], 0.009, 0.005),
                    chain(&[(0.1, 0.8), (0.16, 0.9)], 0.008, 0.004),
                ]),
                bark,
            )
            .shade(0.4),
        );
        parts.push(
            Part::new(
                union(vec![
                    cap(-0.26, 0.735, -0.16, 0.615, 0.012, 0.012),
                    cap(0.18, 0.635, 0.28, 0.715, 0.012, 0.012),
                ]),
                rgb(244, 248, 255),
            )
            .flat(),
        );
        return Model::new(parts, 0.98, 0.35);
    }
    // The crown: overlapping lumps, placed per tree.
    let mut lumps = vec![
        circle(0.0, 0.7, 0.26),
        circle(-0.22, 0.62, 0.18),
        circle(0.23, 0.6, 0.18),
    ];
    for _ in 0..9 {
        let a = rng.range(0.0, std::f32::consts::PI);
        let r = rng.range(0.18, 0.3);
        lumps.push(circle(
            a.cos() * r * 1.3,
            0.68 + a.sin() * r,
            rng.range(0.1, 0.16),
        ));
    }
    let crown = smooth(0.06, lumps);
    let dark_leaves = dark(leaves, 0.7);
    parts.push(
        Part::fill(
            crown,
            Fill::Func(Box::new(move |x, y| {
                // Clumps: lighter tops of leaf masses.
                let n = value2(x * 9.0, y * 9.0, 0x1EAF);
                let m = value2(x * 22.0 + 3.0, y * 22.0, 0x1EB0);
                mix(dark_leaves, leaves, (n * 0.7 + m * 0.5).min(1.0))
            })),
        )
        .shade(1.0),
    );
    Model::new(parts, 1.0, 0.4)
}

fn pine(look: &Look) -> Model {
    let needles = look.color.unwrap_or(rgb(34, 78, 50));
    let trunk = rect(-0.035, 0.0, 0.035, 0.16, 0.0);
    let mut tiers = Vec::new();
    let mut snow = Vec::new();
    for i in 0..5 {
        let t = i as f32;
        let y0 = 0.1 + t * 0.17;
        let half = 0.34 - t * 0.06;
        let apex = y0 + 0.3 - t * 0.01;
        tiers.push(poly_of(&[
            (-half, y0),
            (-half * 0.6, y0 + 0.04),
            (0.0, apex),
            (half * 0.6, y0 + 0.04),
            (half, y0),
        ]));
        if look.snow {
            let sy = y0 + 0.04;
            snow.push(poly_of(&[
                (-half * 0.62, sy + 0.005),
                (0.0, apex),
                (half * 0.62, sy + 0.005),
                (half * 0.3, sy + 0.05),
                (-half * 0.3, sy + 0.05),
            ]));
        }
    }
    let mut parts = vec![
        Part::new(trunk, rgb(80, 56, 40)),
        Part::new(union(tiers), needles).shade(0.7).tex(0.12, 40.0),
    ];
    if !snow.is_empty() {
        parts.push(Part::new(union(snow), rgb(240, 246, 255)).shade(0.5));
    }
    Model::new(parts, 1.0, 0.34)
}

fn palm(look: &Look, rng: &mut Rng) -> Model {
    let lean = rng.range(0.12, 0.26);
    let top = (lean, 0.86);
    let trunk_pts = [(0.0, 0.0), (lean * 0.2, 0.3), (lean * 0.6, 0.6), top];
    let trunk = chain(&trunk_pts, 0.045, 0.03);
    let mut fronds = Vec::new();
    for k in 0..8 {
        let a = std::f32::consts::PI * (0.05 + 0.9 * k as f32 / 7.0);
        let len = rng.range(0.3, 0.42);
        let (dx, dy) = (a.cos(), a.sin());
        let mid = (top.0 + dx * len * 0.55, top.1 + dy * len * 0.35 + 0.04);
        let end = (top.0 + dx * len, top.1 + dy * len * 0.1 - 0.12);
        fronds.push(chain(&[top, mid, end], 0.03, 0.006));
    }
    let leaves = look.color.unwrap_or(rgb(52, 120, 52));
    let parts = vec![
        Part::fill(
            trunk,
            Fill::Func(Box::new(|_, y| {
                if (y * 40.0).fract() < 0.25 {
                    rgb(110, 84, 56)
                } else {
                    rgb(140, 108, 72)
                }
            })),
        )
        .shade(0.7),
        Part::new(union(fronds), leaves).shade(0.6).tex(0.1, 60.0),
        Part::new(
            union(vec![
                circle(top.0 - 0.03, top.1 - 0.03, 0.03),
                circle(top.0 + 0.03, top.1 - 0.035, 0.03),
            ]),
            rgb(100, 72, 40),
        ),
    ];
    Model::new(parts, 1.0, 0.4)
}

fn birch(look: &Look) -> Model {
    let trunk = union(vec![
        cap(0.0, 0.0, 0.01, 0.8, 0.035, 0.018),
        chain(&[(0.0, 0.5), (-0.12, 0.68)], 0.014, 0.006),
        chain(&[(0.01, 0.6), (0.13, 0.76)], 0.012, 0.006),
    ]);
    let leaves = look.color.unwrap_or(match look.season {
        Some(Season::Autumn) => rgb(236, 190, 50),
        _ => rgb(120, 170, 70),
    });
    let mut parts = vec![
        Part::fill(
            trunk,
            Fill::Func(Box::new(|x, y| {
                let n = value2(x * 90.0, y * 30.0, 0xB12C);
                if n > 0.72 {
                    rgb(40, 36, 34)
                } else {
                    rgb(236, 232, 224)
                }
            })),
        )
        .shade(0.7),
    ];
    if !look.snow {
        let crown = smooth(
            0.05,
            vec![
                ellipse(0.0, 0.72, 0.2, 0.24),
                circle(-0.12, 0.62, 0.12),
                circle(0.12, 0.66, 0.12),
                circle(0.02, 0.9, 0.1),
            ],
        );
        let dark_leaves = dark(leaves, 0.75);
        parts.push(
            Part::fill(
                crown,
                Fill::Func(Box::new(move |x, y| {
                    mix(dark_leaves, leaves, value2(x * 18.0, y * 18.0, 0xB1C))
                })),
            )
            .shade(0.9)
            .alpha(0.96),
        );
    }
    Model::new(parts, 1.0, 0.25)
}

// ---------------------------------------------------------------------------------------------
// Buildings.

fn window(x0: f32, y0: f32, x1: f32, y1: f32, lit: bool) -> Vec<Part> {
    let frame = rect(x0 - 0.012, y0 - 0.012, x1 + 0.012, y1 + 0.012, 0.0);
    let glass = rect(x0, y0, x1, y1, 0.0);
    let bars = union(vec![
        rect(
            (x0 + x1) / 2.0 - 0.006,
            y0,
            (x0 + x1) / 2.0 + 0.006,
            y1,
            0.0,
        ),
        rect(
            x0,
            (y0 + y1) / 2.0 - 0.006,
            x1,
            (y0 + y1) / 2.0 + 0.006,
            0.0,
        ),
    ]);
    let glass = if lit {
        Part::new(glass, WINDOW_LIT).glow()
    } else {
        Part::new(glass, WINDOW_DAY).shade(0.2)
    };
    vec![
        Part::new(frame, rgb(238, 234, 226)).flat(),
        glass,
        Part::new(bars, rgb(238, 234, 226)).flat(),
    ]
}

fn lamps_for(windows: &[(f32, f32)], r: f32, lit: bool) -> Vec<super::objects::Lamp> {
    if !lit {
        return Vec::new();
    }
    windows
        .iter()
        .map(|&(x, y)| Lamp {
            x,
            y,
            r,
            color: WINDOW_LIT,
            strength: 0.5,
        })
        .collect()
}

fn house(look: &Look, rng: &mut Rng) -> Model {
    let wall = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(236, 226, 204),
                rgb(200, 80, 60),
                rgb(240, 214, 150),
                rgb(170, 196, 214),
            ],
        )
    });
    let roof = pick(rng, &[rgb(150, 56, 44), rgb(70, 60, 60), rgb(110, 70, 50)]);
    let mut parts = vec![
        Part::new(rect(0.14, 0.55, 0.24, 0.86, 0.0), rgb(140, 80, 64)).shade(0.4),
        Part::new(rect(-0.36, 0.0, 0.36, 0.52, 0.0), wall)
            .shade(0.3)
            .tex(0.04, 30.0),
        Part::new(
            poly_of(&[
                (-0.45, 0.49),
                (0.0, 0.88),
                (0.45, 0.49),
                (0.41, 0.46),
                (-0.41, 0.46),
            ]),
            roof,
        )
        .shade(0.5)
        .tex(0.1, 40.0),
        Part::new(rect(-0.06, 0.0, 0.06, 0.24, 0.01), rgb(110, 70, 44)).shade(0.3),
        Part::new(circle(0.035, 0.12, 0.008), rgb(230, 200, 90)).flat(),
    ];
    if look.snow {
        parts.push(
            Part::new(
                poly_of(&[
                    (-0.46, 0.5),
                    (0.0, 0.9),
                    (0.46, 0.5),
                    (0.42, 0.53),
                    (0.0, 0.86),
                    (-0.42, 0.53),
                ]),
                rgb(244, 248, 255),
            )
            .shade(0.4),
        );
    }
    for x in [-0.22, 0.22] {
        parts.extend(window(x - 0.07, 0.22, x + 0.07, 0.38, look.lit));
    }
    parts.extend(window(-0.06, 0.55, 0.06, 0.66, look.lit));
    let mut m = Model::new(parts, 0.88, 0.4);
    m.lamps = lamps_for(&[(-0.22, 0.3), (0.22, 0.3), (0.0, 0.6)], 0.12, look.lit);
    m
}

fn cabin(look: &Look) -> Model {
    let log = look.color.unwrap_or(rgb(128, 82, 48));
    let walls = rect(-0.4, 0.0, 0.4, 0.42, 0.0);
    let mut parts = vec![
        Part::new(rect(0.18, 0.4, 0.28, 0.8, 0.0), rgb(120, 116, 110)).tex(0.2, 40.0),
        Part::fill(walls, Fill::Bands(log, dark(log, 0.72), 0.07))
            .shade(0.3)
            .tex(0.08, 60.0),
        Part::new(
            poly_of(&[
                (-0.5, 0.38),
                (0.0, 0.78),
                (0.5, 0.38),
                (0.46, 0.35),
                (-0.46, 0.35),
            ]),
            rgb(70, 50, 40),
        )
        .shade(0.5)
        .tex(0.1, 40.0),
        Part::new(rect(-0.3, 0.0, -0.16, 0.26, 0.0), rgb(80, 52, 34)),
    ];
    if look.snow {
        parts.push(
            Part::new(
                poly_of(&[
                    (-0.52, 0.38),
                    (0.0, 0.8),
                    (0.52, 0.38),
                    (0.48, 0.43),
                    (0.0, 0.74),
                    (-0.48, 0.43),
                ]),
                rgb(244, 248, 255),
            )
            .shade(0.4),
        );
    }
    parts.extend(window(0.0, 0.14, 0.16, 0.28, look.lit));
    // Smoke from the chimney.
    let smoke: Vec<Sdf> = (0..6)
        .map(|i| {
            let t = i as f32;
            circle(
                0.23 + t * 0.05 + (t * 1.7).sin() * 0.03,
                0.88 + t * 0.1,
                0.045 + t * 0.012,
            )
        })
        .collect();
    parts.push(
        Part::new(smooth(0.05, smoke), rgb(200, 200, 206))
            .flat()
            .alpha(0.35),
    );
    let mut m = Model::new(parts, 0.8, 0.45);
    m.lamps = lamps_for(&[(0.08, 0.21)], 0.14, look.lit);
    m
}

fn castle(look: &Look) -> Model {
    let stone = look.color.unwrap_or(rgb(156, 150, 140));
    let roof = rgb(60, 70, 110);
    let merlons = |x0: f32, x1: f32, y: f32| -> Sdf {
        let n = ((x1 - x0) / 0.06).round().max(2.0) as usize;
        let w = (x1 - x0) / n as f32;
        union(
            (0..n)
                .filter(|i| i % 2 == 0)
                .map(|i| {
                    rect(
                        x0 + i as f32 * w,
                        y,
                        x0 + (i as f32 + 1.0) * w,
                        y + 0.04,
                        0.0,
                    )
                })
                .collect(),
        )
    };
    let body = union(vec![
        rect(-0.55, 0.0, 0.55, 0.36, 0.0),
        merlons(-0.55, 0.55, 0.36),
        rect(-0.62, 0.0, -0.44, 0.56, 0.0),
        rect(0.44, 0.0, 0.62, 0.56, 0.0),
        rect(-0.2, 0.0, 0.2, 0.7, 0.0),
        merlons(-0.2, 0.2, 0.7),
        rect(0.06, 0.0, 0.2, 0.84, 0.0),
    ]);
    let roofs = union(vec![
        poly_of(&[(-0.65, 0.56), (-0.53, 0.78), (-0.41, 0.56)]),
        poly_of(&[(0.41, 0.56), (0.53, 0.78), (0.65, 0.56)]),
        poly_of(&[(0.04, 0.84), (0.13, 1.02), (0.22, 0.84)]),
    ]);
    let flags = union(vec![
        poly_of(&[(0.13, 1.1), (0.22, 1.07), (0.13, 1.04)]),
        poly_of(&[(-0.53, 0.86), (-0.45, 0.83), (-0.53, 0.8)]),
    ]);
    let poles = union(vec![
        rect(0.125, 1.0, 0.135, 1.1, 0.0),
        rect(-0.535, 0.76, -0.525, 0.86, 0.0),
    ]);
    let gate = union(vec![
        rect(-0.08, 0.0, 0.08, 0.16, 0.0),
        circle(0.0, 0.16, 0.08),
    ]);
    let mut parts = vec![
        Part::fill(
            body,
            Fill::Func(Box::new(move |x, y| {
                // Courses of stone blocks.
                let row = (y / 0.045).floor();
                let off = if row as i64 % 2 == 0 { 0.0 } else { 0.04 };
                let joint = (y / 0.045).fract() < 0.12 || ((x + off) / 0.08).fract() < 0.08;
                if joint { dark(stone, 0.82) } else { stone }
            })),
        )
        .shade(0.5)
        .tex(0.08, 40.0),
        Part::new(roofs, roof).shade(0.6),
        Part::new(poles, rgb(60, 50, 40)).flat(),
        Part::new(flags, rgb(200, 40, 40)).flat(),
        Part::new(gate, rgb(40, 32, 28)).flat(),
    ];
    let mut lamps = Vec::new();
    for (x, y) in [
        (-0.53, 0.42),
        (0.53, 0.42),
        (0.0, 0.5),
        (0.13, 0.68),
        (-0.3, 0.22),
        (0.3, 0.22),
    ] {
        let w = rect(x - 0.018, y - 0.035, x + 0.018, y + 0.035, 0.01);
        parts.push(if look.lit {
            Part::new(w, WINDOW_LIT).glow()
        } else {
            Part::new(w, rgb(40, 36, 40)).flat()
        });
        lamps.push((x, y));
    }
    let mut m = Model::new(parts, 1.1, 0.62);
    m.lamps = lamps_for(&lamps, 0.07, look.lit);
    m
}

fn lighthouse(look: &Look) -> Model {
    let band = look.color.unwrap_or(rgb(196, 44, 40));
    let tower = poly_of(&[(-0.11, 0.0), (0.11, 0.0), (0.072, 0.72), (-0.072, 0.72)]);
    let lantern = rect(-0.055, 0.755, 0.055, 0.86, 0.0);
    let mut parts = vec![
        Part::new(rect(0.06, 0.0, 0.3, 0.14, 0.0), rgb(236, 232, 222)).shade(0.3),
        Part::new(
            poly_of(&[(0.04, 0.13), (0.18, 0.22), (0.32, 0.13)]),
            rgb(120, 50, 40),
        )
        .shade(0.4),
        Part::fill(tower, Fill::Bands(rgb(244, 242, 236), band, 0.12)).shade(0.9),
        Part::new(rect(-0.1, 0.72, 0.1, 0.755, 0.0), rgb(40, 40, 44)),
        Part::new(
            union(vec![
                rect(-0.1, 0.755, -0.092, 0.79, 0.0),
                rect(0.092, 0.755, 0.1, 0.79, 0.0),
                rect(-0.1, 0.786, 0.1, 0.792, 0.0),
            ]),
            rgb(40, 40, 44),
        ),
        if look.lit {
            Part::new(lantern, rgb(255, 236, 170)).glow()
        } else {
            Part::new(lantern, rgb(170, 200, 214)).shade(0.3)
        },
        Part::new(
            union(vec![
                rect(-0.006, 0.755, 0.006, 0.86, 0.0),
                rect(-0.058, 0.755, -0.05, 0.86, 0.0),
                rect(0.05, 0.755, 0.058, 0.86, 0.0),
            ]),
            rgb(40, 40, 44),
        ),
        Part::new(
            poly_of(&[(-0.08, 0.86), (0.08, 0.86), (0.0, 0.95)]),
            rgb(40, 40, 44),
        )
        .shade(0.5),
        Part::new(circle(0.0, 0.96, 0.015), rgb(40, 40, 44)),
        Part::new(rect(-0.03, 0.0, 0.03, 0.09, 0.01), rgb(60, 44, 36)),
    ];
    for y in [0.3, 0.52] {
        parts.push(Part::new(rect(-0.015, y, 0.015, y + 0.05, 0.008), rgb(40, 44, 54)).flat());
    }
    let mut m = Model::new(parts, 0.97, 0.3);
    if look.lit {
        m.lamps.push(Lamp {
            x: 0.0,
            y: 0.81,
            r: 0.12,
            color: rgb(255, 236, 170),
            strength: 0.9,
        });
        m.beam = Some((0.0, 0.81));
    }
    m
}

fn windmill(look: &Look, rng: &mut Rng) -> Model {
    let body = look.color.unwrap_or(rgb(232, 226, 212));
    let tower = poly_of(&[(-0.16, 0.0), (0.16, 0.0), (0.1, 0.6), (-0.1, 0.6)]);
    let cap_shape = smooth(0.02, vec![ellipse(0.0, 0.62, 0.13, 0.09)]);
    let hub = (0.0, 0.64);
    let a0 = rng.range(0.0, 1.5);
    let mut blades = Vec::new();
    let mut frames = Vec::new();
    for k in 0..4 {
        let a = a0 + k as f32 * std::f32::consts::FRAC_PI_2;
        let (s, c) = a.sin_cos();
        let p = |u: f32, v: f32| (hub.0 + c * u - s * v, hub.1 + s * u + c * v);
        blades.push(poly_of(&[
            p(0.06, 0.0),
            p(0.46, 0.0),
            p(0.46, 0.09),
            p(0.08, 0.07),
        ]));
        let (ax, ay) = p(0.0, 0.0);
        let (bx, by) = p(0.47, 0.0);
        frames.push(cap(ax, ay, bx, by, 0.012, 0.008));
    }
    let parts = vec![
        Part::new(tower, body).shade(0.5).tex(0.05, 40.0),
        Part::new(rect(-0.05, 0.0, 0.05, 0.16, 0.03), rgb(90, 60, 40)),
        Part::new(
            rect(-0.035, 0.3, 0.035, 0.38, 0.01),
            if look.lit {
                WINDOW_LIT
            } else {
                rgb(60, 60, 70)
            },
        ),
        Part::new(cap_shape, rgb(110, 70, 50)).shade(0.6),
        Part::fill(
            union(blades),
            Fill::Func(Box::new(|x, y| {
                if ((x * 40.0).sin() * (y * 40.0).sin()) > 0.3 {
                    rgb(200, 190, 170)
                } else {
                    rgb(238, 232, 218)
                }
            })),
        )
        .shade(0.2)
        .alpha(0.95),
        Part::new(union(frames), rgb(90, 60, 40)),
        Part::new(circle(hub.0, hub.1, 0.025), rgb(60, 50, 40)),
    ];
    Model::new(parts, 1.1, 0.25)
}

fn pagoda(look: &Look) -> Model {
    let wood = look.color.unwrap_or(rgb(188, 50, 40));
    let roof = rgb(50, 52, 58);
    let mut parts = Vec::new();
    let mut y = 0.0;
    let mut half = 0.3;
    for tier in 0..4 {
        let h = 0.14 - tier as f32 * 0.012;
        parts.push(Part::new(rect(-half * 0.72, y, half * 0.72, y + h, 0.0), wood).shade(0.4));
        if look.lit {
            parts.push(
                Part::new(
                    rect(-half * 0.3, y + h * 0.25, half * 0.3, y + h * 0.75, 0.0),
                    WINDOW_LIT,
                )
                .glow(),
            );
        }
        let ry = y + h;
        parts.push(
            Part::new(
                poly_of(&[
                    (-half - 0.08, ry + 0.05),
                    (-half, ry + 0.01),
                    (-half * 0.5, ry + 0.035),
                    (0.0, ry + 0.1),
                    (half * 0.5, ry + 0.035),
                    (half, ry + 0.01),
                    (half + 0.08, ry + 0.05),
                    (half * 0.7, ry - 0.01),
                    (-half * 0.7, ry - 0.01),
                ]),
                roof,
            )
            .shade(0.5),
        );
        y = ry + 0.07;
        half *= 0.8;
    }
    parts.push(Part::new(cap(0.0, y, 0.0, y + 0.14, 0.012, 0.006), roof));
    Model::new(parts, y + 0.14, 0.38)
}

// ---------------------------------------------------------------------------------------------
// Vessels, balloons, rockets.

fn boat(look: &Look, rng: &mut Rng) -> Model {
    let hull_c = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(240, 240, 236),
                rgb(180, 50, 40),
                rgb(40, 60, 100),
                rgb(120, 80, 50),
            ],
        )
    });
    let sail = if look.color.is_some() && lum3(hull_c) < 0.5 {
        rgb(246, 244, 236)
    } else {
        rgb(250, 248, 240)
    };
    let hull = poly_of(&[(-0.42, 0.14), (0.5, 0.14), (0.36, -0.03), (-0.34, -0.03)]);
    let parts = vec![
        Part::new(
            poly_of(&[(-0.03, 0.17), (-0.03, 0.95), (-0.38, 0.19)]),
            sail,
        )
        .shade(0.6),
        Part::new(
            poly_of(&[(0.02, 0.9), (0.02, 0.2), (0.4, 0.18)]),
            dark(sail, 0.95),
        )
        .shade(0.6),
        Part::new(cap(0.0, 0.1, 0.0, 1.0, 0.012, 0.01), rgb(90, 70, 50)),
        Part::new(hull, hull_c).shade(0.6),
        Part::new(rect(-0.4, 0.085, 0.47, 0.11, 0.0), dark(hull_c, 0.6)).flat(),
    ];
    Model::new(parts, 1.0, 0.45)
}

fn ship(look: &Look) -> Model {
    let wood = look.color.unwrap_or(rgb(100, 62, 38));
    let hull = poly_of(&[
        (-0.6, 0.3),
        (-0.48, 0.24),
        (0.5, 0.2),
        (0.7, 0.26),
        (0.5, -0.02),
        (-0.45, -0.02),
    ]);
    let sails: Vec<Sdf> = [(-0.3, 0.7), (0.05, 0.85), (0.38, 0.66)]
        .iter()
        .flat_map(|&(x, h)| {
            vec![
                rect(x - 0.13, 0.34, x + 0.13, 0.34 + h * 0.42, 0.02),
                rect(x - 0.1, 0.4 + h * 0.44, x + 0.1, 0.3 + h * 0.82, 0.02),
            ]
        })
        .collect();
    let masts = union(vec![
        rect(-0.31, 0.2, -0.29, 1.0, 0.0),
        rect(0.04, 0.2, 0.06, 1.12, 0.0),
        rect(0.37, 0.2, 0.39, 0.96, 0.0),
    ]);
    let parts = vec![
        Part::new(masts, rgb(70, 50, 36)),
        Part::new(union(sails), rgb(240, 232, 210)).shade(0.7),
        Part::new(
            poly_of(&[(0.05, 1.14), (0.16, 1.1), (0.05, 1.06)]),
            rgb(190, 40, 40),
        ),
        Part::new(hull, wood).shade(0.6).tex(0.06, 50.0),
        Part::new(rect(-0.5, 0.12, 0.55, 0.15, 0.0), rgb(200, 160, 80)).flat(),
    ];
    Model::new(parts, 1.14, 0.6)
}

fn balloon(look: &Look, rng: &mut Rng) -> Model {
    let main = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(220, 50, 50),
                rgb(240, 160, 40),
                rgb(60, 120, 210),
                rgb(120, 60, 170),
                rgb(40, 160, 110),
            ],
        )
    });
    let second = pick(
        rng,
        &[rgb(250, 226, 90), rgb(250, 248, 240), rgb(240, 120, 40)],
    );
    let envelope = smooth(
        0.08,
        vec![
            circle(0.0, 0.66, 0.31),
            poly_of(&[(-0.28, 0.56), (0.28, 0.56), (0.09, 0.24), (-0.09, 0.24)]),
        ],
    );
    let parts = vec![
        Part::new(
            union(vec![
                cap(-0.08, 0.24, -0.05, 0.09, 0.006, 0.006),
                cap(0.08, 0.24, 0.05, 0.09, 0.006, 0.006),
            ]),
            rgb(70, 56, 44),
        ),
        Part::fill(
            envelope,
            Fill::Func(Box::new(move |x, y| {
                // Gores: vertical stripes that follow the balloon's roundness.
                let width = if y > 0.56 {
                    (0.31f32.powi(2) - (y - 0.66).powi(2)).max(0.01).sqrt()
                } else {
                    0.09 + (y - 0.24) / 0.32 * 0.19
                };
                let u = (x / width.max(0.02)).clamp(-1.0, 1.0).asin();
                if ((u * 3.0 + 10.0).floor() as i64) % 2 == 0 {
                    main
                } else {
                    second
                }
            })),
        )
        .shade(1.0),
        Part::new(rect(-0.055, 0.0, 0.055, 0.09, 0.012), rgb(130, 90, 50)).tex(0.15, 80.0),
    ];
    Model::new(parts, 0.97, 0.31)
}

fn rocket(look: &Look) -> Model {
    let accent = look.color.unwrap_or(rgb(210, 50, 44));
    let body = smooth(
        0.03,
        vec![
            cap(0.0, 0.16, 0.0, 0.62, 0.1, 0.1),
            inter(
                ellipse(0.0, 0.62, 0.1, 0.34),
                rect(-0.2, 0.62, 0.2, 1.0, 0.0),
            ),
        ],
    );
    let nose = inter(body.clone(), rect(-0.2, 0.8, 0.2, 1.0, 0.0));
    let fins = union(vec![
        poly_of(&[(-0.095, 0.38), (-0.24, 0.1), (-0.24, 0.0), (-0.095, 0.14)]),
        poly_of(&[(0.095, 0.38), (0.24, 0.1), (0.24, 0.0), (0.095, 0.14)]),
    ]);
    let flame = smooth(
        0.05,
        vec![ellipse(0.0, -0.1, 0.07, 0.2), ellipse(0.0, 0.0, 0.08, 0.08)],
    );
    let parts = vec![
        Part::fill(
            flame,
            Fill::Func(Box::new(|_, y| {
                mix(
                    rgb(255, 120, 30),
                    rgb(255, 248, 200),
                    ((y + 0.28) / 0.3).clamp(0.0, 1.0),
                )
            })),
        )
        .glow(),
        Part::new(rect(-0.07, 0.04, 0.07, 0.16, 0.01), rgb(70, 70, 76)),
        Part::new(fins, accent).shade(0.6),
        Part::new(body, rgb(236, 236, 240)).shade(1.0),
        Part::new(nose, accent).shade(1.0),
        Part::new(circle(0.0, 0.6, 0.055), rgb(70, 70, 76)),
        Part::new(circle(0.0, 0.6, 0.04), rgb(110, 170, 220)).shade(0.5),
        Part::new(rect(-0.01, 0.14, 0.01, 0.42, 0.0), accent).flat(),
    ];
    let mut m = Model::new(parts, 1.0, 0.24);
    m.lamps.push(Lamp {
        x: 0.0,
        y: -0.06,
        r: 0.16,
        color: rgb(255, 180, 90),
        strength: 0.8,
    });
    m
}

fn snowman(look: &Look) -> Model {
    let snow = rgb(246, 248, 255);
    let scarf = look.color.unwrap_or(rgb(200, 40, 44));
    let parts = vec![
        Part::new(
            union(vec![
                chain(&[(-0.13, 0.5), (-0.32, 0.62), (-0.38, 0.7)], 0.014, 0.008),
                chain(&[(0.13, 0.5), (0.32, 0.6), (0.4, 0.7)], 0.014, 0.008),
            ]),
            rgb(90, 64, 44),
        ),
        Part::new(
            smooth(
                0.03,
                vec![
                    circle(0.0, 0.2, 0.2),
                    circle(0.0, 0.5, 0.15),
                    circle(0.0, 0.75, 0.11),
                ],
            ),
            snow,
        )
        .shade(1.0),
        Part::new(
            union(vec![
                rect(-0.12, 0.83, 0.12, 0.86, 0.0),
                rect(-0.08, 0.85, 0.08, 1.0, 0.01),
            ]),
            rgb(30, 28, 32),
        )
        .shade(0.4),
        Part::new(
            union(vec![
                rect(-0.12, 0.62, 0.12, 0.67, 0.02),
                rect(0.04, 0.46, 0.1, 0.66, 0.02),
            ]),
            scarf,
        )
        .shade(0.5),
        Part::new(
            poly_of(&[(0.02, 0.76), (0.2, 0.73), (0.02, 0.72)]),
            rgb(240, 120, 30),
        ),
        Part::new(
            union(vec![
                circle(-0.04, 0.79, 0.014),
                circle(0.05, 0.79, 0.014),
                circle(0.0, 0.52, 0.016),
                circle(0.0, 0.42, 0.016),
                circle(0.0, 0.26, 0.018),
            ]),
            rgb(30, 28, 32),
        )
        .flat(),
    ];
    Model::new(parts, 1.0, 0.22)
}

// ---------------------------------------------------------------------------------------------
// Still life.

pub(super) fn highlight(x: f32, y: f32, rx: f32, ry: f32) -> Part {
    Part::new(ellipse(x, y, rx, ry), rgb(255, 255, 255))
        .flat()
        .alpha(0.45)
}

fn stem_leaf(x: f32, y: f32) -> Vec<Part> {
    vec![
        Part::new(
            chain(
                &[(x, y - 0.04), (x + 0.01, y + 0.06), (x + 0.04, y + 0.1)],
                0.014,
                0.01,
            ),
            rgb(90, 64, 40),
        ),
        Part::new(
            rotated(
                &[
                    (x + 0.02, y + 0.05),
                    (x + 0.12, y + 0.1),
                    (x + 0.22, y + 0.06),
                    (x + 0.12, y + 0.02),
                ],
                x + 0.02,
                y + 0.05,
                0.2,
            ),
            rgb(70, 140, 50),
        )
        .shade(0.5),
    ]
}

fn apple(look: &Look) -> Model {
    let skin = look.color.unwrap_or(rgb(200, 30, 36));
    let shape = sub(
        smooth(0.1, vec![circle(-0.08, 0.3, 0.27), circle(0.08, 0.3, 0.27)]),
        circle(0.0, 0.6, 0.05),
    );
    let mut parts = vec![
        Part::fill(
            shape,
            Fill::Func(Box::new(move |x, y| {
                let streak = value2(x * 30.0, y * 6.0, 0xA991);
                mix(
                    skin,
                    mix(skin, rgb(240, 200, 60), 0.5),
                    ((y - 0.35) * 2.0).clamp(0.0, 1.0) * 0.5 + streak * 0.12,
                )
            })),
        )
        .shade(1.0),
        highlight(-0.13, 0.4, 0.05, 0.08),
    ];
    parts.extend(stem_leaf(0.0, 0.58));
    Model::new(parts, 0.7, 0.34)
}

fn orange(look: &Look) -> Model {
    let skin = look.color.unwrap_or(rgb(240, 140, 30));
    let mut parts = vec![
        Part::new(circle(0.0, 0.32, 0.32), skin)
            .shade(1.0)
            .tex(0.06, 120.0),
        highlight(-0.12, 0.44, 0.05, 0.07),
    ];
    parts.extend(stem_leaf(0.0, 0.64));
    Model::new(parts, 0.75, 0.32)
}

fn pear(look: &Look) -> Model {
    let skin = look.color.unwrap_or(rgb(190, 200, 70));
    let mut parts = vec![
        Part::new(
            smooth(
                0.22,
                vec![circle(0.0, 0.24, 0.24), circle(0.02, 0.58, 0.12)],
            ),
            skin,
        )
        .shade(1.0)
        .tex(0.04, 60.0),
        highlight(-0.1, 0.3, 0.04, 0.08),
    ];
    parts.extend(stem_leaf(0.02, 0.7));
    Model::new(parts, 0.82, 0.25)
}

fn banana(look: &Look) -> Model {
    let skin = look.color.unwrap_or(rgb(246, 210, 60));
    let pts: Vec<(f32, f32)> = (0..9)
        .map(|i| {
            let t = i as f32 / 8.0;
            let x = -0.5 + t;
            let y = 0.1 + 1.1 * (x * x) * 0.9;
            (x, y)
        })
        .collect();
    let mut segs = Vec::new();
    for (i, w) in pts.windows(2).enumerate() {
        let t = i as f32 / 7.0;
        let r = 0.035 + 0.075 * (std::f32::consts::PI * t).sin();
        let r2 = 0.035 + 0.075 * (std::f32::consts::PI * (i + 1) as f32 / 7.0).sin();
        segs.push(cap(w[0].0, w[0].1, w[1].0, w[1].1, r, r2));
    }
    let body = smooth(0.02, segs);
    let parts = vec![
        Part::new(body, skin).shade(1.0).tex(0.04, 40.0),
        Part::new(
            union(vec![
                circle(pts[0].0, pts[0].1, 0.03),
                cap(
                    pts[8].0,
                    pts[8].1,
                    pts[8].0 + 0.06,
                    pts[8].1 + 0.06,
                    0.025,
                    0.02,
                ),
            ]),
            rgb(90, 70, 40),
        ),
    ];
    Model::new(parts, 0.46, 0.52)
}

fn cherry(look: &Look) -> Model {
    let skin = look.color.unwrap_or(rgb(160, 10, 30));
    let stems = union(vec![
        chain(&[(-0.12, 0.22), (-0.06, 0.5), (0.04, 0.72)], 0.01, 0.008),
        chain(&[(0.13, 0.2), (0.1, 0.5), (0.04, 0.72)], 0.01, 0.008),
    ]);
    let parts = vec![
        Part::new(stems, rgb(90, 110, 50)),
        Part::new(
            rotated(
                &[(0.04, 0.72), (0.16, 0.8), (0.3, 0.76), (0.16, 0.7)],
                0.04,
                0.72,
                0.1,
            ),
            rgb(70, 140, 50),
        )
        .shade(0.5),
        Part::new(
            union(vec![circle(-0.12, 0.13, 0.13), circle(0.13, 0.12, 0.12)]),
            skin,
        )
        .shade(1.0),
        highlight(-0.16, 0.18, 0.025, 0.035),
        highlight(0.09, 0.17, 0.022, 0.03),
    ];
    Model::new(parts, 0.8, 0.26)
}

fn lemon(look: &Look) -> Model {
    let skin = look.color.unwrap_or(rgb(246, 220, 60));
    let parts = vec![
        Part::new(
            smooth(
                0.05,
                vec![
                    ellipse(0.0, 0.22, 0.32, 0.22),
                    circle(-0.33, 0.24, 0.04),
                    circle(0.33, 0.2, 0.04),
                ],
            ),
            skin,
        )
        .shade(1.0)
        .tex(0.05, 110.0),
        highlight(-0.1, 0.32, 0.08, 0.04),
    ];
    Model::new(parts, 0.44, 0.36)
}

fn cup(look: &Look, rng: &mut Rng) -> Model {
    let glaze = look.color.unwrap_or_else(|| {
        pick(
            rng,
            &[
                rgb(244, 242, 236),
                rgb(190, 50, 44),
                rgb(60, 100, 160),
                rgb(236, 200, 90),
            ],
        )
    });
    let body = poly_of(&[(-0.3, 0.62), (0.3, 0.62), (0.25, 0.06), (-0.25, 0.06)]);
    let body = Sdf::Round(Box::new(body), 0.015);
    let handle = sub(
        ellipse(0.32, 0.36, 0.16, 0.17),
        ellipse(0.31, 0.36, 0.09, 0.1),
    );
    let steam: Vec<Sdf> = [-0.1f32, 0.06]
        .iter()
        .map(|&x0| {
            let pts: Vec<(f32, f32)> = (0..7)
                .map(|i| {
                    let t = i as f32 / 6.0;
                    (x0 + (t * 7.0).sin() * 0.05, 0.72 + t * 0.42)
                })
                .collect();
            chain(&pts, 0.022, 0.008)
        })
        .collect();
    let parts = vec![
        Part::new(ellipse(0.0, 0.04, 0.46, 0.06), rgb(246, 244, 240)).shade(0.6),
        Part::new(handle, glaze).shade(0.9),
        Part::new(body, glaze).shade(1.0),
        Part::new(ellipse(0.0, 0.62, 0.3, 0.05), dark(glaze, 0.85)).flat(),
        Part::new(ellipse(0.0, 0.615, 0.27, 0.04), rgb(92, 56, 30)).flat(),
        Part::new(ellipse(0.02, 0.618, 0.12, 0.018), rgb(200, 160, 110))
            .flat()
            .alpha(0.7),
        highlight(-0.18, 0.35, 0.03, 0.18),
        Part::new(union(steam), rgb(255, 255, 255))
            .flat()
            .alpha(0.28),
    ];
    Model::new(parts, 1.1, 0.46)
}

pub(super) fn lum3(c: Rgb) -> f32 {
    0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thing_has_a_drawing_with_bounds() {
        let look = Look {
            color: None,
            season: None,
            lit: true,
            snow: true,
            underwater: false,
            flying: false,
            seed: 3,
            figure: Figure::default(),
        };
        for &thing in Thing::ALL {
            let m = build(thing, &look);
            assert!(!m.parts.is_empty(), "{thing:?}");
            assert!(m.height > 0.2 && m.half_width > 0.05, "{thing:?}");
            for p in &m.parts {
                let b = p.sdf.bounds();
                assert!(b.0.is_finite() && b.3.is_finite(), "{thing:?}");
            }
        }
    }
}
