//! Content edits: change what is in a picture, not only how it looks.
//!
//! On any picture (an upload or one of Pictor's): recolour a region the instruction names (the
//! sky, water, grass and foliage, the background), add sky bodies, weather and things from the
//! painter's library at a plausible place and scale, and change the time of day. Regions come
//! from colour and position: the picture is shrunk to a small grid, the sky is grown from the top
//! edge through smooth steps, water and greenery are picked by hue below it, the background is
//! grown from the borders; the masks are scaled back up with soft edges.
//!
//! On a picture the painter made (its PNG still carries the painter's `parameters`), remove or
//! replace what the painter placed: the scene is planned again from the prompt and seed, the
//! picture is checked to be that scene, and it is painted again with the change.

use image::RgbaImage;

use super::canvas::{Canvas, Rgb, lum, mix, rgb};
use super::compose::{self, Placed, Spot};
use super::noise::Rng;
use super::objects::{self, Figure, Look};
use super::prompt::{Element, Habitat, Pose, Subject, Theme, Thing};
use super::shapes::{self, Light, Xform};
use crate::edit::{Region, TimeOfDay, Weather};

/// Sky bodies and weather an "add" draws and the painter can take out of its own picture
/// (an added storm is rain).
const REMOVABLE: &[Element] = &[
    Element::Sun,
    Element::Moon,
    Element::Stars,
    Element::Rainbow,
    Element::Clouds,
    Element::Rain,
    Element::Fog,
    Element::Snow,
];

/// Whether an "add …" clause names something [`add`] draws.
pub fn can_add(clause: &str) -> bool {
    let theme = Theme::read(clause);
    !theme.subjects.is_empty()
        || theme
            .elements
            .iter()
            .any(|e| *e == Element::Storm || REMOVABLE.contains(e))
}

/// Whether a "remove …" clause names a thing or a sky element.
pub fn can_remove(clause: &str) -> bool {
    let theme = Theme::read(clause);
    !theme.subjects.is_empty() || theme.elements.iter().any(|e| REMOVABLE.contains(e))
}

/// Whether an "add …" clause starts with clothes ("a red hat on the girl"): putting them on
/// someone already in the picture, which the painter cannot do (it does not find people in a
/// picture); "a girl in a red hat" adds a new person and is not this.
pub fn dresses(clause: &str) -> bool {
    use super::prompt::Mention;
    matches!(
        Theme::read(clause).mentions.first(),
        Some(Mention::Garment(_))
    )
}

/// Whether the words name a person, an animal or a thing (not only a place such as the sea or
/// the sky): after "next to", "on", "behind" in an "add" clause that is something already in
/// the picture, which the painter cannot find.
pub fn names_subject(words: &str) -> bool {
    !Theme::read(words).subjects.is_empty()
}

/// Whether a "replace … with …" clause names two things.
pub fn can_replace(clause: &str) -> bool {
    Theme::read(clause).subjects.len() >= 2
}

// ---------------------------------------------------------------------------------------------
// Masks

/// The picture shrunk to at most `GRID` cells on the long side (box-averaged, so film grain and
/// noise average out), the working resolution of every mask.
struct Grid {
    w: usize,
    h: usize,
    cell: f32,
    px: Vec<Rgb>,
}

const GRID: usize = 160;

impl Grid {
    fn of(img: &RgbaImage) -> Grid {
        let (iw, ih) = (img.width() as usize, img.height() as usize);
        let cell = (iw.max(ih) as f32 / GRID as f32).max(1.0);
        let w = ((iw as f32 / cell).round() as usize).max(1);
        let h = ((ih as f32 / cell).round() as usize).max(1);
        let mut sum = vec![([0.0f32; 3], 0u32); w * h];
        for (x, y, p) in img.enumerate_pixels() {
            let gx = ((x as f32 / cell) as usize).min(w - 1);
            let gy = ((y as f32 / cell) as usize).min(h - 1);
            let s = &mut sum[gy * w + gx];
            for k in 0..3 {
                s.0[k] += f32::from(p[k]) / 255.0;
            }
            s.1 += 1;
        }
        let px = sum
            .into_iter()
            .map(|(s, n)| {
                let n = n.max(1) as f32;
                [s[0] / n, s[1] / n, s[2] / n]
            })
            .collect();
        Grid { w, h, cell, px }
    }

    fn at(&self, x: usize, y: usize) -> Rgb {
        self.px[y * self.w + x]
    }

    fn neighbours(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let (x, y) = (i % self.w, i / self.w);
        let w = self.w;
        [
            (x > 0).then(|| i - 1),
            (x + 1 < w).then(|| i + 1),
            (y > 0).then(|| i - w),
            (y + 1 < self.h).then(|| i + w),
        ]
        .into_iter()
        .flatten()
    }
}

fn diff(a: Rgb, b: Rgb) -> f32 {
    (a[0] - b[0])
        .abs()
        .max((a[1] - b[1]).abs())
        .max((a[2] - b[2]).abs())
}

/// Hue in degrees, saturation and value of a colour.
fn hsv(c: Rgb) -> (f32, f32, f32) {
    let max = c[0].max(c[1]).max(c[2]);
    let min = c[0].min(c[1]).min(c[2]);
    let d = max - min;
    let h = if d < 1e-6 {
        0.0
    } else if max == c[0] {
        60.0 * ((c[1] - c[2]) / d).rem_euclid(6.0)
    } else if max == c[1] {
        60.0 * ((c[2] - c[0]) / d + 2.0)
    } else {
        60.0 * ((c[0] - c[1]) / d + 4.0)
    };
    let s = if max > 1e-6 { d / max } else { 0.0 };
    (h, s, max)
}

/// Grows a region from `seeds` through steps smaller than `step` that stay within `reach` of
/// the seed they started from.
fn grow(
    g: &Grid,
    seeds: &[usize],
    step: f32,
    reach: f32,
    allowed: impl Fn(usize) -> bool,
) -> Vec<bool> {
    let mut inside = vec![false; g.w * g.h];
    let mut origin = vec![[0.0f32; 3]; g.w * g.h];
    let mut queue = std::collections::VecDeque::new();
    for &s in seeds {
        if !inside[s] && allowed(s) {
            inside[s] = true;
            origin[s] = g.px[s];
            queue.push_back(s);
        }
    }
    while let Some(i) = queue.pop_front() {
        for j in g.neighbours(i) {
            if !inside[j]
                && allowed(j)
                && diff(g.px[i], g.px[j]) < step
                && diff(origin[i], g.px[j]) < reach
            {
                inside[j] = true;
                origin[j] = origin[i];
                queue.push_back(j);
            }
        }
    }
    inside
}

/// The sky: everything above a skyline. Each cell is scored by whether it looks more like the
/// top band of the picture (the sky, with its clouds) or the bottom band (the land or water),
/// by its nearest colour in each; the skyline is the path across the columns, each jump up or
/// down paid for, that leaves the most sky-like cells above it and land-like
/// cells below (dynamic programming), so it is one coherent line rather than a walk per column.
fn sky_cells(g: &Grid) -> Vec<bool> {
    let (w, h) = (g.w, g.h);
    let band = |from: f32, to: f32| -> Vec<Rgb> {
        let (y0, y1) = (
            (h as f32 * from) as usize,
            ((h as f32 * to).ceil() as usize).min(h),
        );
        let cells: Vec<Rgb> = (y0..y1.max(y0 + 1).min(h))
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .map(|(x, y)| g.at(x, y))
            .collect();
        let step = (cells.len() / 96).max(1);
        cells.into_iter().step_by(step).collect()
    };
    let top = band(0.0, 0.12);
    let nearest = |c: Rgb, set: &[Rgb]| {
        set.iter()
            .map(|s| {
                let d = [c[0] - s[0], c[1] - s[1], c[2] - s[2]];
                d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
            })
            .fold(f32::MAX, f32::min)
            .sqrt()
    };
    // Water at the bottom mirrors the sky: those samples say nothing about land.
    let mut bottom: Vec<Rgb> = band(0.85, 1.0)
        .into_iter()
        .filter(|&c| nearest(c, &top) > 0.1)
        .collect();
    if bottom.is_empty() {
        bottom = band(0.85, 1.0);
    }
    // +1: surely sky, -1: surely land. Lower cells lean towards land (water mirrors the sky's
    // colours, but lies below it).
    let vote: Vec<f32> =
        g.px.iter()
            .enumerate()
            .map(|(i, &c)| {
                let (ds, dl) = (nearest(c, &top), nearest(c, &bottom));
                (dl - ds) / (dl + ds + 1e-3) - 0.5 * (i / w) as f32 / h as f32
            })
            .collect();
    // gain[x][y]: the column's score with its sky ending at row y (rows < y are sky).
    let floor = ((h as f32 * 0.9) as usize).max(1);
    let mut gain = vec![0.0f32; w * (floor + 1)];
    for x in 0..w {
        let total: f32 = (0..h).map(|y| vote[y * w + x]).sum();
        let mut above = 0.0;
        for y in 0..=floor {
            // Sky votes above count for, land votes below count for.
            gain[x * (floor + 1) + y] = above - (total - above);
            if y < h {
                above += vote[y * w + x];
            }
        }
    }
    // A step of the skyline between two columns costs this much per row it jumps: enough to
    // keep it from chasing noise, little enough for the straight sides of a tower.
    const JUMP: f32 = 0.25;
    let mut best = gain[..=floor].to_vec();
    let mut from = vec![0usize; w * (floor + 1)];
    for x in 1..w {
        let mut next = vec![f32::MIN; floor + 1];
        for y in 0..=floor {
            let (arg, val) = (0..=floor)
                .map(|p| (p, best[p] - JUMP * p.abs_diff(y) as f32))
                .fold((0, f32::MIN), |a, b| if b.1 > a.1 { b } else { a });
            next[y] = val + gain[x * (floor + 1) + y];
            from[x * (floor + 1) + y] = arg;
        }
        best = next;
    }
    let mut y = (0..=floor).fold(0, |a, b| if best[b] > best[a] { b } else { a });
    let mut line = vec![0usize; w];
    for x in (0..w).rev() {
        line[x] = y;
        y = from[x * (floor + 1) + y];
    }
    // A narrow dip of the skyline into the land below (water mirroring the sky) is cut off;
    // narrow peaks (a tower, a tree) stay.
    let median = |x: usize, reach: usize| {
        let mut near = line[x.saturating_sub(reach)..(x + reach + 1).min(w)].to_vec();
        near.sort_unstable();
        near[near.len() / 2]
    };
    let mut end: Vec<usize> = (0..w)
        .map(|x| line[x].min(median(x, (w / 12).max(1))))
        .collect();
    // A wider dip is cut off too when what fills it looks like the land beside it (mist in
    // front of a cliff, the sun's path on the water) rather than the sky above it; a gap
    // between two buildings shows the sky's own colour and stays.
    let wide: Vec<usize> = (0..w).map(|x| median(x, (w / 6).max(1))).collect();
    let mean = |cells: &mut dyn Iterator<Item = (usize, usize)>| -> Option<Rgb> {
        let (mut s, mut n) = ([0.0f32; 3], 0.0f32);
        for (x, y) in cells {
            let c = g.at(x, y);
            for k in 0..3 {
                s[k] += c[k];
            }
            n += 1.0;
        }
        (n > 0.0).then(|| [s[0] / n, s[1] / n, s[2] / n])
    };
    let mut x = 0;
    while x < w {
        if end[x] <= wide[x] + 1 {
            x += 1;
            continue;
        }
        let start = x;
        while x < w && end[x] > wide[x] + 1 {
            x += 1;
        }
        let run = start..x;
        let (top, bottom) = (
            run.clone().map(|c| wide[c]).min().unwrap_or(0),
            run.clone().map(|c| end[c]).max().unwrap_or(0).min(h),
        );
        let side = (x - start).div_ceil(2).max(2);
        let (l0, r1) = (start.saturating_sub(side), (x + side).min(w));
        let dip = mean(
            &mut run
                .clone()
                .flat_map(|c| (wide[c]..end[c].min(h)).map(move |y| (c, y))),
        );
        let beside = mean(
            &mut (l0..start)
                .chain(x..r1)
                .flat_map(|c| (top.max(end[c])..bottom).map(move |y| (c, y))),
        );
        let above = mean(
            &mut run
                .clone()
                .flat_map(|c| (wide[c].saturating_sub(3)..wide[c]).map(move |y| (c, y))),
        );
        // Haze is a blend of the land and the sky: how far the dip's colour lies along the way
        // from the land beside it to the sky above.
        let haze = |dip: Rgb, beside: Rgb, above: Rgb| {
            let (d, e) = (
                [dip[0] - beside[0], dip[1] - beside[1], dip[2] - beside[2]],
                [
                    above[0] - beside[0],
                    above[1] - beside[1],
                    above[2] - beside[2],
                ],
            );
            let t = (d[0] * e[0] + d[1] * e[1] + d[2] * e[2])
                / (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]).max(1e-6);
            t < 0.9
        };
        if let (Some(dip), Some(beside), Some(above)) = (dip, beside, above)
            && (diff(dip, beside) < diff(dip, above) || haze(dip, beside, above))
        {
            for c in run {
                end[c] = wide[c];
            }
        }
    }
    let mut sky = vec![false; w * h];
    for x in 0..w {
        for row in 0..end[x].min(h) {
            sky[row * w + x] = true;
        }
    }
    sky
}

fn region_cells(g: &Grid, region: Region) -> Vec<bool> {
    region_cells_under(g, sky_cells(g), region)
}

/// [`region_cells`] with the sky already found.
fn region_cells_under(g: &Grid, sky: Vec<bool>, region: Region) -> Vec<bool> {
    match region {
        Region::Sky => sky,
        Region::Water => {
            let lowest_sky = (0..g.h)
                .rev()
                .find(|&y| (0..g.w).filter(|&x| sky[y * g.w + x]).count() * 3 > g.w)
                .unwrap_or(0);
            let wet: Vec<bool> = (0..g.w * g.h)
                .map(|i| {
                    let (h, s, v) = hsv(g.px[i]);
                    !sky[i]
                        && i / g.w >= lowest_sky.max(g.h / 5)
                        && (165.0..=255.0).contains(&h)
                        && s > 0.12
                        && v > 0.08
                })
                .collect();
            // A blue window or a car is not water: only sizeable pieces count.
            let wet = denoise(g, &wet);
            let min = (g.w * g.h / 300).max(12);
            components(g, &wet)
                .into_iter()
                .filter(|c| c.len() >= min)
                .flatten()
                .fold(vec![false; wet.len()], |mut m, i| {
                    m[i] = true;
                    m
                })
        }
        Region::Greenery | Region::Grass => {
            let green: Vec<bool> = (0..g.w * g.h)
                .map(|i| {
                    let (h, s, v) = hsv(g.px[i]);
                    !sky[i] && (50.0..=170.0).contains(&h) && s > 0.18 && v > 0.06
                })
                .collect();
            let green = denoise(g, &green);
            if region == Region::Greenery {
                return green;
            }
            // Grass is the ground's greenery: grown from the smooth green cells of the lowest
            // rows that have any, through like colours; trees and bushes (darker or lighter,
            // and textured at their edges) stop it.
            let smooth = |i: usize| {
                green[i]
                    && g.neighbours(i)
                        .map(|j| diff(g.px[i], g.px[j]))
                        .fold(0.0f32, f32::max)
                        < 0.06
            };
            let lowest = (0..g.h)
                .rev()
                .find(|&y| (0..g.w).filter(|&x| smooth(y * g.w + x)).count() * 4 > g.w);
            let seeds: Vec<usize> = match lowest {
                Some(y0) => (y0.saturating_sub(g.h / 20)..=y0)
                    .flat_map(|y| (0..g.w).map(move |x| y * g.w + x))
                    .filter(|&i| smooth(i))
                    .collect(),
                None => (0..green.len()).filter(|&i| smooth(i)).collect(),
            };
            let grass = grow(g, &seeds, 0.04, 0.16, |i| green[i]);
            // Trees as green as the meadow grow out of it: the ground's top edge is the grass's
            // profile opened over a fifth of the width (peaks narrower than that are cut off;
            // slopes and wide hills stay).
            let height: Vec<usize> = (0..g.w)
                .map(|x| {
                    (0..g.h)
                        .find(|&y| grass[y * g.w + x])
                        .map_or(0, |y| g.h - y)
                })
                .collect();
            let k = (g.w / 10).max(1);
            let window = |x: usize| x.saturating_sub(k)..(x + k + 1).min(g.w);
            let eroded: Vec<usize> = (0..g.w)
                .map(|x| window(x).map(|j| height[j]).min().unwrap_or(0))
                .collect();
            let opened: Vec<usize> = (0..g.w)
                .map(|x| window(x).map(|j| eroded[j]).max().unwrap_or(0))
                .collect();
            (0..grass.len())
                .map(|i| grass[i] && i / g.w >= g.h - opened[i % g.w])
                .collect()
        }
        Region::Background => {
            let border: Vec<usize> = (0..g.w * g.h)
                .filter(|&i| {
                    let (x, y) = (i % g.w, i / g.w);
                    x == 0 || y == 0 || x + 1 == g.w || y + 1 == g.h
                })
                .collect();
            grow(g, &border, 0.06, 0.3, |_| true)
        }
    }
}

/// The 4-connected pieces of a cell mask.
fn components(g: &Grid, cells: &[bool]) -> Vec<Vec<usize>> {
    let mut seen = vec![false; cells.len()];
    let mut out = Vec::new();
    for start in 0..cells.len() {
        if !cells[start] || seen[start] {
            continue;
        }
        seen[start] = true;
        let mut piece = vec![start];
        let mut k = 0;
        while k < piece.len() {
            let i = piece[k];
            k += 1;
            for j in g.neighbours(i) {
                if cells[j] && !seen[j] {
                    seen[j] = true;
                    piece.push(j);
                }
            }
        }
        out.push(piece);
    }
    out
}

/// Drops cells with fewer than two like neighbours (specks).
fn denoise(g: &Grid, cells: &[bool]) -> Vec<bool> {
    (0..cells.len())
        .map(|i| cells[i] && g.neighbours(i).filter(|&j| cells[j]).count() >= 2)
        .collect()
}

/// A grid mask scaled to the picture with bilinear filtering: soft edges about a cell wide.
fn upsample(g: &Grid, cells: &[bool], w: usize, h: usize) -> Vec<f32> {
    let val = |x: i64, y: i64| -> f32 {
        let x = x.clamp(0, g.w as i64 - 1) as usize;
        let y = y.clamp(0, g.h as i64 - 1) as usize;
        if cells[y * g.w + x] { 1.0 } else { 0.0 }
    };
    let mut out = vec![0.0f32; w * h];
    for y in 0..h {
        let fy = (y as f32 + 0.5) / g.cell - 0.5;
        let (y0, ty) = (fy.floor() as i64, fy - fy.floor());
        for x in 0..w {
            let fx = (x as f32 + 0.5) / g.cell - 0.5;
            let (x0, tx) = (fx.floor() as i64, fx - fx.floor());
            let top = val(x0, y0) * (1.0 - tx) + val(x0 + 1, y0) * tx;
            let bottom = val(x0, y0 + 1) * (1.0 - tx) + val(x0 + 1, y0 + 1) * tx;
            out[y * w + x] = top * (1.0 - ty) + bottom * ty;
        }
    }
    out
}

/// The region's mask at the picture's size (0 outside, 1 inside): found on the grid, scaled up,
/// and its cell-sized steps moved onto the picture's own colour edges ([`refine`]).
fn mask(img: &RgbaImage, region: Region) -> Vec<f32> {
    let g = Grid::of(img);
    let cells = region_cells(&g, region);
    let coarse = upsample(&g, &cells, img.width() as usize, img.height() as usize);
    refine(img, &coarse, g.cell * 2.0)
}

/// The guided filter (He, Sun and Tang, 2010) with the picture's colour as the guide: each
/// window of radius `radius` fits the mask as a linear function of the colour, so the mask
/// follows the picture's edges inside the window and is smooth where the colour is. Computed
/// at about 512 pixels on the long side (the coefficients are smooth, so they are scaled up
/// and applied to the full-size colours: the "fast guided filter"). Keeps 0 and 1 where the
/// mask is flat, so a region's inside and outside stay as found.
fn refine(img: &RgbaImage, coarse: &[f32], radius: f32) -> Vec<f32> {
    let (w, h) = (img.width() as usize, img.height() as usize);
    if w * h == 0 {
        return coarse.to_vec();
    }
    let s = ((w.max(h) as f32 / 512.0).round() as usize).max(1);
    let (lw, lh) = (w.div_ceil(s), h.div_ceil(s));
    let n = lw * lh;
    // The guide's channels and the mask, box-averaged down.
    let mut low = vec![[0.0f32; 4]; n];
    let mut count = vec![0.0f32; n];
    for (i, p) in img.pixels().enumerate() {
        let (x, y) = (i % w, i / w);
        let j = (y / s) * lw + x / s;
        for k in 0..3 {
            low[j][k] += f32::from(p[k]) / 255.0;
        }
        low[j][3] += coarse[i];
        count[j] += 1.0;
    }
    for (v, c) in low.iter_mut().zip(&count) {
        for k in v.iter_mut() {
            *k /= c.max(1.0);
        }
    }
    let r = ((radius / s as f32).round() as usize).max(1);
    // Means of I (3), p, I·Iᵀ (6) and I·p (3) over each window.
    const PAIRS: [(usize, usize); 6] = [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)];
    let mut planes: Vec<Vec<f32>> = Vec::with_capacity(13);
    for k in 0..4 {
        planes.push(low.iter().map(|v| v[k]).collect());
    }
    for (a, b) in PAIRS {
        planes.push(low.iter().map(|v| v[a] * v[b]).collect());
    }
    for k in 0..3 {
        planes.push(low.iter().map(|v| v[k] * v[3]).collect());
    }
    let means: Vec<Vec<f32>> = planes.iter().map(|p| box_mean(p, lw, lh, r)).collect();
    // The regulariser: how strong an edge must be to cut the mask (colour steps well below
    // sqrt(EPS) are smoothed over).
    const EPS: f32 = 4e-4;
    let mut coef: Vec<Vec<f32>> = vec![vec![0.0; n]; 4];
    for i in 0..n {
        let mi = [means[0][i], means[1][i], means[2][i]];
        let mp = means[3][i];
        let cov = |k: usize| means[4 + k][i];
        let mut m = [
            [
                cov(0) - mi[0] * mi[0] + EPS,
                cov(1) - mi[0] * mi[1],
                cov(2) - mi[0] * mi[2],
            ],
            [0.0, cov(3) - mi[1] * mi[1] + EPS, cov(4) - mi[1] * mi[2]],
            [0.0, 0.0, cov(5) - mi[2] * mi[2] + EPS],
        ];
        m[1][0] = m[0][1];
        m[2][0] = m[0][2];
        m[2][1] = m[1][2];
        let cp = [
            means[10][i] - mi[0] * mp,
            means[11][i] - mi[1] * mp,
            means[12][i] - mi[2] * mp,
        ];
        let a = solve3(m, cp);
        coef[0][i] = a[0];
        coef[1][i] = a[1];
        coef[2][i] = a[2];
        coef[3][i] = mp - a[0] * mi[0] - a[1] * mi[1] - a[2] * mi[2];
    }
    let coef: Vec<Vec<f32>> = coef.iter().map(|p| box_mean(p, lw, lh, r)).collect();
    // Coefficients scaled up (bilinear) and applied to the full-size colours.
    let mut out = vec![0.0f32; w * h];
    for y in 0..h {
        let fy = ((y as f32 + 0.5) / s as f32 - 0.5).clamp(0.0, (lh - 1) as f32);
        let (y0, ty) = (fy as usize, fy.fract());
        let y1 = (y0 + 1).min(lh - 1);
        for x in 0..w {
            let fx = ((x as f32 + 0.5) / s as f32 - 0.5).clamp(0.0, (lw - 1) as f32);
            let (x0, tx) = (fx as usize, fx.fract());
            let x1 = (x0 + 1).min(lw - 1);
            let at = |p: &[f32]| {
                let top = p[y0 * lw + x0] * (1.0 - tx) + p[y0 * lw + x1] * tx;
                let bottom = p[y1 * lw + x0] * (1.0 - tx) + p[y1 * lw + x1] * tx;
                top * (1.0 - ty) + bottom * ty
            };
            let px = img.get_pixel(x as u32, y as u32);
            let q = at(&coef[3])
                + (0..3)
                    .map(|k| at(&coef[k]) * f32::from(px[k]) / 255.0)
                    .sum::<f32>();
            out[y * w + x] = q.clamp(0.0, 1.0);
        }
    }
    out
}

/// The mean of each `(2r+1)`² window (clipped at the borders), from a summed-area table.
fn box_mean(p: &[f32], w: usize, h: usize, r: usize) -> Vec<f32> {
    let sw = w + 1;
    let mut sat = vec![0.0f64; sw * (h + 1)];
    for y in 0..h {
        let mut row = 0.0f64;
        for x in 0..w {
            row += f64::from(p[y * w + x]);
            sat[(y + 1) * sw + x + 1] = sat[y * sw + x + 1] + row;
        }
    }
    let mut out = vec![0.0f32; w * h];
    for y in 0..h {
        let (y0, y1) = (y.saturating_sub(r), (y + r + 1).min(h));
        for x in 0..w {
            let (x0, x1) = (x.saturating_sub(r), (x + r + 1).min(w));
            let sum = sat[y1 * sw + x1] - sat[y0 * sw + x1] - sat[y1 * sw + x0] + sat[y0 * sw + x0];
            out[y * w + x] = (sum / ((y1 - y0) * (x1 - x0)) as f64) as f32;
        }
    }
    out
}

/// Solves the symmetric positive definite 3×3 system `m · a = v` (Cramer's rule).
fn solve3(m: [[f32; 3]; 3], v: [f32; 3]) -> [f32; 3] {
    let det3 = |m: [[f32; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det3(m);
    if d.abs() < 1e-18 {
        return [0.0; 3];
    }
    let mut a = [0.0f32; 3];
    for (k, ak) in a.iter_mut().enumerate() {
        let mut mk = m;
        for row in 0..3 {
            mk[row][k] = v[row];
        }
        *ak = det3(mk) / d;
    }
    a
}

/// Where the sky ends: the lowest row that is still mostly sky (a share of the height).
fn horizon(sky: &[f32], w: usize, h: usize) -> f32 {
    (0..h)
        .rev()
        .find(|&y| sky[y * w..(y + 1) * w].iter().sum::<f32>() > w as f32 * 0.3)
        .map_or(0.45, |y| (y + 1) as f32 / h as f32)
}

fn mean_in(c: &Canvas, m: &[f32]) -> Option<Rgb> {
    let mut s = [0.0f32; 3];
    let mut n = 0.0f32;
    for (p, &k) in c.px.iter().zip(m) {
        for i in 0..3 {
            s[i] += p[i] * k;
        }
        n += k;
    }
    (n > 1.0).then(|| [s[0] / n, s[1] / n, s[2] / n])
}

// ---------------------------------------------------------------------------------------------
// The canvas round trip keeps the picture's own alpha.

fn canvas(img: &RgbaImage) -> Canvas {
    let mut c = Canvas::new(img.width() as usize, img.height() as usize);
    for (p, q) in img.pixels().zip(c.px.iter_mut()) {
        *q = rgb(p[0], p[1], p[2]);
    }
    c
}

fn write_back(c: &Canvas, img: &mut RgbaImage) {
    for (p, q) in img.pixels_mut().zip(&c.px) {
        for k in 0..3 {
            p[k] = (q[k] * 255.0 + 0.5).clamp(0.0, 255.0) as u8;
        }
    }
}

/// The picture's mean luminance, read from its bytes.
fn mean_lum(img: &RgbaImage) -> f32 {
    let total: f64 = img
        .pixels()
        .map(|p| f64::from(lum(rgb(p[0], p[1], p[2]))))
        .sum();
    (total / f64::from((img.width() * img.height()).max(1))) as f32
}

/// Content edits draw nothing on pictures too small to hold a drawing.
fn too_small(img: &RgbaImage) -> bool {
    img.width() < 16 || img.height() < 16
}

// ---------------------------------------------------------------------------------------------
// Recolour

/// Gives the region the colour: its hue and saturation, and its mean lightness moved to the
/// colour's, keeping the light and shade inside the region.
pub fn recolor(img: &mut RgbaImage, region: Region, color: [u8; 3]) {
    if too_small(img) {
        return;
    }
    let m = mask(img, region);
    let mut c = canvas(img);
    let Some(mean) = mean_in(&c, &m) else {
        return;
    };
    let target = rgb(color[0], color[1], color[2]);
    // Most of the way to the colour's lightness: all the way would flatten the light and shade
    // of a region much darker or lighter than the colour into white or black.
    let shift = (lum(target) - lum(mean)) * 0.7;
    for (p, &k) in c.px.iter_mut().zip(&m) {
        if k <= 0.0 {
            continue;
        }
        let l = (lum(*p) + shift).clamp(0.0, 1.0);
        let tl = lum(target).max(1e-3);
        // The target colour at this pixel's lightness (towards white or black beyond it).
        let painted = if l <= tl {
            scale3(target, l / tl)
        } else {
            mix(target, [1.0; 3], ((l - tl) / (1.0 - tl).max(1e-3)).min(1.0))
        };
        *p = mix(*p, painted, k);
    }
    write_back(&c, img);
}

fn scale3(c: Rgb, k: f32) -> Rgb {
    [c[0] * k, c[1] * k, c[2] * k]
}

// ---------------------------------------------------------------------------------------------
// Time of day and weather

/// A vertical gradient through `stops` (position 0 = top of the sky, 1 = the horizon).
fn ramp(stops: &[(f32, Rgb)], t: f32) -> Rgb {
    let t = t.clamp(0.0, 1.0);
    for w in stops.windows(2) {
        if t <= w[1].0 {
            let k = (t - w[0].0) / (w[1].0 - w[0].0).max(1e-6);
            return mix(w[0].1, w[1].1, k);
        }
    }
    stops.last().map_or([0.0; 3], |s| s.1)
}

/// Repaints the sky as `stops` (keeping clouds' light and shade) and grades the rest of the
/// picture with `land`.
fn regrade(
    img: &mut RgbaImage,
    stops: &[(f32, Rgb)],
    land: impl Fn(Rgb) -> Rgb,
) -> (Canvas, Vec<f32>) {
    let (w, h) = (img.width() as usize, img.height() as usize);
    let sky = mask(img, Region::Sky);
    let hz = horizon(&sky, w, h);
    let mut c = canvas(img);
    let sky_mean = mean_in(&c, &sky).map_or(0.6, lum).max(0.05);
    for y in 0..h {
        let base = ramp(stops, y as f32 / h as f32 / hz.max(0.05));
        for x in 0..w {
            let i = y * w + x;
            let p = c.px[i];
            // Clouds brighter than the sky stay brighter, darker ones darker.
            let detail = (lum(p) / sky_mean).clamp(0.4, 1.8);
            let sky_px = [
                (base[0] * detail).min(1.0),
                (base[1] * detail).min(1.0),
                (base[2] * detail).min(1.0),
            ];
            c.px[i] = mix(land(p), sky_px, sky[i]);
        }
    }
    (c, sky)
}

fn desaturate(p: Rgb, k: f32) -> Rgb {
    let l = lum(p);
    mix(p, [l, l, l], k)
}

/// Night, dusk or day.
pub fn time_of_day(img: &mut RgbaImage, time: TimeOfDay, seed: u32) {
    if too_small(img) {
        return;
    }
    match time {
        TimeOfDay::Night => night(img, seed),
        TimeOfDay::Sunset => {
            let stops = [
                (0.0, rgb(58, 48, 110)),
                (0.45, rgb(196, 96, 110)),
                (0.8, rgb(246, 148, 80)),
                (1.0, rgb(255, 196, 110)),
            ];
            let (c, _) = regrade(img, &stops, |p| {
                let p = desaturate(p, 0.15);
                [p[0] * 0.92 + 0.03, p[1] * 0.74, p[2] * 0.58]
            });
            write_back(&c, img);
        }
        TimeOfDay::Dawn => {
            let stops = [
                (0.0, rgb(96, 112, 170)),
                (0.5, rgb(214, 160, 176)),
                (1.0, rgb(255, 212, 170)),
            ];
            let (c, _) = regrade(img, &stops, |p| [p[0] * 0.95, p[1] * 0.86, p[2] * 0.82]);
            write_back(&c, img);
        }
        TimeOfDay::Day => {
            let stops = [(0.0, rgb(70, 130, 215)), (1.0, rgb(178, 212, 240))];
            let mean = mean_lum(img);
            // Lift a dark picture towards daylight; a bright one keeps its exposure.
            let lift = (0.42 / mean.max(0.02)).clamp(1.0, 3.5);
            let (c, _) = regrade(img, &stops, |p| {
                let p = [p[0] * lift, p[1] * lift, p[2] * lift * 0.9];
                [p[0].min(1.0), p[1].min(1.0), p[2].min(1.0)]
            });
            write_back(&c, img);
        }
    }
}

fn night(img: &mut RgbaImage, seed: u32) {
    let stops = [
        (0.0, rgb(6, 9, 28)),
        (0.7, rgb(16, 24, 56)),
        (1.0, rgb(34, 44, 82)),
    ];
    let (mut c, sky) = regrade(img, &stops, |p| {
        let p = desaturate(p, 0.35);
        [p[0] * 0.24, p[1] * 0.28, p[2] * 0.4]
    });
    stars(&mut c, &sky, seed);
    write_back(&c, img);
}

fn stars(c: &mut Canvas, sky: &[f32], seed: u32) {
    let mut rng = Rng::new(u64::from(seed) ^ 0x57A25);
    let area: f32 = sky.iter().sum();
    let count = (area / 700.0) as usize;
    // Sizes follow the picture's area, not its long side (a long strip is not a big picture).
    let long = ((c.w * c.h) as f32).sqrt();
    for _ in 0..count {
        let x = rng.range(0.0, c.w as f32);
        let y = rng.range(0.0, c.h as f32);
        let i = (y as usize).min(c.h - 1) * c.w + (x as usize).min(c.w - 1);
        if sky[i] < 0.95 {
            continue;
        }
        let b = rng.unit().powi(3);
        let r = long / 1400.0 * (0.6 + 1.4 * b);
        c.disc(x, y, r, rgb(255, 250, 235), 0.45 + 0.55 * b);
        if b > 0.8 {
            shapes::glow(c, x, y, r * 2.0, rgb(200, 215, 255), 0.25);
        }
    }
}

/// Rain, snow or fog over the picture.
pub fn weather(img: &mut RgbaImage, weather: Weather, seed: u32) {
    if too_small(img) {
        return;
    }
    let mut rng = Rng::new(u64::from(seed) ^ 0x3EA7);
    let (w, h) = (img.width() as usize, img.height() as usize);
    let long = ((w * h) as f32).sqrt();
    match weather {
        Weather::Rain => {
            let stops = [(0.0, rgb(92, 98, 108)), (1.0, rgb(150, 156, 164))];
            let (mut c, _) = regrade(img, &stops, |p| {
                let p = desaturate(p, 0.35);
                [p[0] * 0.72, p[1] * 0.74, p[2] * 0.78]
            });
            let count = w * h / 900;
            let len = h as f32 * 0.035;
            for _ in 0..count {
                let x = rng.range(0.0, w as f32);
                let y = rng.range(-len, h as f32);
                let a = rng.range(0.12, 0.3);
                let steps = len as usize;
                for s in 0..steps {
                    let t = s as f32;
                    c.blend((x + t * 0.18) as i64, (y + t) as i64, rgb(205, 210, 220), a);
                }
            }
            write_back(&c, img);
        }
        Weather::Snow => {
            let mut c = canvas(img);
            for p in &mut c.px {
                *p = mix(desaturate(*p, 0.2), rgb(225, 232, 245), 0.12);
            }
            let count = w * h / 650;
            for _ in 0..count {
                let x = rng.range(0.0, w as f32);
                let y = rng.range(0.0, h as f32);
                let near = rng.unit().powi(2);
                let r = long / 1000.0 * (1.0 + 3.0 * near);
                c.disc(x, y, r, rgb(250, 252, 255), 0.55 + 0.4 * near);
            }
            write_back(&c, img);
        }
        Weather::Fog => {
            let mut c = canvas(img);
            let fog = rgb(204, 208, 212);
            for y in 0..h {
                // Thicker far away (higher in the picture) than in the foreground.
                let a = 0.2 + 0.5 * (1.0 - y as f32 / h as f32).powf(0.8);
                for p in c.row_mut(y) {
                    *p = mix(*p, fog, a);
                }
            }
            write_back(&c, img);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Adding things

/// Draws what the clause names: sky bodies, a rainbow, clouds, weather, birds and any thing of
/// the painter's library, each where it belongs (the sky, the water, the ground), sized for the
/// picture and lit to match it.
pub fn add(img: &mut RgbaImage, clause: &str, seed: u32) {
    if too_small(img) {
        return;
    }
    // Each part ("a cat and the moon") is read on its own: in a part that names a thing, the
    // sky and weather words only say where it is ("a cat in the snow" does not snow).
    let mut done: Vec<Element> = Vec::new();
    for (p, part) in parts(clause).iter().enumerate() {
        let theme = Theme::read(part);
        if !theme.subjects.is_empty() {
            for (k, s) in theme.subjects.iter().enumerate() {
                if theme.subjects.iter().any(|o| o.holds == Some(k)) {
                    continue; // drawn in its holder's hand
                }
                let held = s.holds.and_then(|h| theme.subjects.get(h));
                put_thing(img, s, held, seed ^ (p * 31 + k) as u32);
            }
            continue;
        }
        for e in &theme.elements {
            // A storm is rain here: each weather once.
            let e = if *e == Element::Storm {
                Element::Rain
            } else {
                *e
            };
            if done.contains(&e) {
                continue;
            }
            done.push(e);
            match e {
                Element::Rain => weather(img, Weather::Rain, seed),
                Element::Snow => weather(img, Weather::Snow, seed),
                Element::Fog => weather(img, Weather::Fog, seed),
                Element::Stars => {
                    let sky = mask(img, Region::Sky);
                    let bright = mean_in(&canvas(img), &sky).is_none_or(|m| lum(m) > 0.3);
                    // Stars only show in a dark sky: a bright one is turned to night first.
                    if bright {
                        drop(sky);
                        night(img, seed);
                    } else {
                        let mut c = canvas(img);
                        stars(&mut c, &sky, seed);
                        write_back(&c, img);
                    }
                }
                Element::Sun | Element::Moon | Element::Rainbow | Element::Clouds => {
                    sky_thing(img, e, seed)
                }
                _ => {}
            }
        }
    }
}

/// The parts of a content edit's words, split at "and", commas and the like.
fn parts(clause: &str) -> Vec<String> {
    const JOINS: &[&str] = &[
        ",",
        "and",
        "then",
        "also",
        "plus",
        "и",
        "а",
        "затем",
        "потом",
        "еще",
    ];
    let mut out = vec![String::new()];
    for word in clause.split_whitespace() {
        if JOINS.contains(&word) {
            out.push(String::new());
        } else if let Some(last) = out.last_mut() {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(word);
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The most open place in the sky: the sky cell farthest from anything else, searched in the
/// upper part. Returns (x, y, clearance) in pixels.
fn open_sky(
    g: &Grid,
    sky: &[bool],
    upper: f32,
    seed: u32,
    taken: &[(f32, f32, f32)],
) -> Option<(f32, f32, f32)> {
    let mut sky = sky.to_vec();
    // Places already given to things added before are not open any more.
    for (i, cell) in sky.iter_mut().enumerate() {
        let (x, y) = ((i % g.w) as f32 * g.cell, (i / g.w) as f32 * g.cell);
        if taken
            .iter()
            .any(|&(tx, ty, r)| (x - tx).powi(2) + (y - ty).powi(2) < r * r)
        {
            *cell = false;
        }
    }
    // Distance (in cells) from each sky cell to the nearest non-sky cell or the bottom/sides.
    let mut dist = vec![u32::MAX; g.w * g.h];
    let mut queue = std::collections::VecDeque::new();
    for i in 0..g.w * g.h {
        let (x, y) = (i % g.w, i / g.w);
        if !sky[i] || x == 0 || y == 0 || x + 1 == g.w || y + 1 == g.h {
            dist[i] = 0;
            queue.push_back(i);
        }
    }
    while let Some(i) = queue.pop_front() {
        for j in g.neighbours(i) {
            if dist[j] == u32::MAX {
                dist[j] = dist[i] + 1;
                queue.push_back(j);
            }
        }
    }
    let limit = ((g.h as f32 * upper) as usize).max(1) * g.w;
    let best = dist[..limit.min(dist.len())].iter().copied().max()?;
    if best == 0 {
        return None;
    }
    // Among the places nearly as open, the seed picks one.
    let near: Vec<usize> = (0..limit.min(dist.len()))
        .filter(|&i| dist[i] * 5 >= best * 4)
        .collect();
    let i = near[(seed as usize) % near.len()];
    let (x, y) = (i % g.w, i / g.w);
    Some((
        (x as f32 + 0.5) * g.cell,
        (y as f32 + 0.5) * g.cell,
        best as f32 * g.cell,
    ))
}

fn sky_thing(img: &mut RgbaImage, e: Element, seed: u32) {
    let (w, h) = (img.width() as f32, img.height() as f32);
    let short = w.min(h);
    let grid = Grid::of(img);
    let mut c = canvas(img);
    match e {
        Element::Sun | Element::Moon => {
            let (x, y, room) = open_sky(&grid, &sky_cells(&grid), 0.6, seed, &[]).unwrap_or((
                w * 0.75,
                h * 0.18,
                short * 0.1,
            ));
            let r = (short * 0.055).min(room * 0.8).max(short * 0.02);
            if e == Element::Sun {
                shapes::glow(&mut c, x, y, r * 2.2, rgb(255, 226, 160), 0.75);
                c.disc(x, y, r, rgb(255, 248, 222), 1.0);
            } else {
                shapes::glow(&mut c, x, y, r * 1.8, rgb(190, 205, 240), 0.3);
                c.disc(x, y, r, rgb(236, 234, 220), 1.0);
                // Maria: a few soft darker patches.
                let mut rng = Rng::new(u64::from(seed) ^ 0x400E);
                for _ in 0..5 {
                    let (dx, dy) = (rng.range(-0.5, 0.5) * r, rng.range(-0.5, 0.5) * r);
                    c.disc(
                        x + dx,
                        y + dy,
                        r * rng.range(0.15, 0.3),
                        rgb(196, 196, 190),
                        0.35,
                    );
                }
            }
        }
        Element::Rainbow => {
            let sky = mask(img, Region::Sky);
            let hz = horizon(&sky, c.w, c.h) * h;
            let (cx, cy) = (
                w * (0.4 + 0.2 * ((seed % 100) as f32 / 100.0)),
                hz + h * 0.08,
            );
            let radius = w * 0.42;
            let band = w * 0.012;
            let colors = [
                rgb(230, 60, 60),
                rgb(240, 140, 50),
                rgb(240, 220, 70),
                rgb(80, 190, 80),
                rgb(70, 130, 230),
                rgb(110, 80, 200),
                rgb(150, 80, 190),
            ];
            for y in 0..c.h {
                for x in 0..c.w {
                    let d = ((x as f32 - cx).powi(2) + (y as f32 - cy).powi(2)).sqrt();
                    let k = (radius - d) / band;
                    if !(0.0..7.0).contains(&k) {
                        continue;
                    }
                    let i = y * c.w + x;
                    let fade = ((hz - y as f32) / (h * 0.15)).clamp(0.0, 1.0);
                    let a = 0.32 * sky[i] * fade * (1.0 - ((k - 3.5) / 3.5).abs().powi(4));
                    c.blend(x as i64, y as i64, colors[k as usize], a);
                }
            }
        }
        Element::Clouds => {
            let sky = mask(img, Region::Sky);
            let bright = mean_in(&c, &sky).map_or(0.7, lum);
            let tone = mix(rgb(70, 74, 86), rgb(250, 250, 252), (bright * 1.4).min(1.0));
            let mut rng = Rng::new(u64::from(seed) ^ 0xC10D);
            let hz = horizon(&sky, c.w, c.h) * h;
            // The clouds stay in the upper sky: the layer covers only the rows they can reach.
            let rows = ((0.6 * hz + short * 0.25).ceil() as usize).clamp(1, c.h);
            let mut layer = Canvas::new(c.w, rows);
            let mut alpha = vec![0.0f32; c.w * rows];
            for _ in 0..4 {
                let cx = rng.range(0.1, 0.9) * w;
                let cy = rng.range(0.08, 0.6) * hz;
                let size = short * rng.range(0.05, 0.09);
                for _ in 0..9 {
                    let x = cx + rng.range(-2.2, 2.2) * size;
                    let y = cy + rng.range(-0.5, 0.3) * size;
                    let r = size * rng.range(0.6, 1.2);
                    disc_alpha(&mut layer, &mut alpha, x, y, r, tone, y - cy);
                }
            }
            for (i, p) in c.px[..c.w * rows].iter_mut().enumerate() {
                *p = mix(*p, layer.px[i], alpha[i] * 0.9 * sky[i]);
            }
        }
        _ => {}
    }
    write_back(&c, img);
}

/// A soft disc into a separate layer (shaded darker below its centre) and its coverage.
fn disc_alpha(
    layer: &mut Canvas,
    alpha: &mut [f32],
    cx: f32,
    cy: f32,
    r: f32,
    tone: Rgb,
    below: f32,
) {
    let (x0, x1) = (
        (cx - r).floor().max(0.0) as usize,
        ((cx + r).ceil() as usize).min(layer.w),
    );
    let (y0, y1) = (
        (cy - r).floor().max(0.0) as usize,
        ((cy + r).ceil() as usize).min(layer.h),
    );
    for y in y0..y1 {
        for x in x0..x1 {
            let d = ((x as f32 - cx).powi(2) + (y as f32 - cy).powi(2)).sqrt() / r;
            if d >= 1.0 {
                continue;
            }
            let a = (1.0 - d * d).min(1.0);
            let i = y * layer.w + x;
            let shade = 1.0 - 0.18 * ((y as f32 - cy + below) / r).clamp(0.0, 1.0);
            if a > alpha[i] {
                alpha[i] = a;
                layer.px[i] = [tone[0] * shade, tone[1] * shade, tone[2] * shade];
            }
        }
    }
}

/// Draws one subject (with its count) where its kind belongs.
fn put_thing(img: &mut RgbaImage, s: &Subject, held: Option<&Subject>, seed: u32) {
    let (w, h) = (img.width() as f32, img.height() as f32);
    let mut rng = Rng::new(u64::from(seed) ^ 0xADD5);
    let n = s.count.clamp(1, 7);
    let habitat = s.thing.habitat();
    let flying = habitat == Habitat::Sky || s.thing == Thing::Bird;
    let look = Look {
        color: s.color,
        seed: rng.next_u32(),
        flying,
        figure: Figure::from_subject(s, held, false),
        season: None,
        lit: false,
        snow: false,
        underwater: false,
    };
    let model = objects::build(s.thing, &look);
    if model.height <= 0.0 {
        return;
    }
    // Light: as bright as the picture, so a cat added at night is not lit like noon.
    let mean = mean_lum(img);
    let k = (mean / 0.45).clamp(0.3, 1.05);
    let mut light = Light::plain();
    light.key = [k, k, k];
    let mut c = canvas(img);

    let spot = if flying {
        Spot::Sky
    } else if habitat == Habitat::Water || habitat == Habitat::Underwater {
        Spot::Water
    } else {
        Spot::Ground
    };
    let base = compose::base_size(s.thing, spot);
    let mut height = (base * h * if spot == Spot::Sky { 0.8 } else { 0.75 }).min(h * 0.45);
    if n > 1 {
        height *= 0.8;
    }
    // The grid and its regions once for all the things placed.
    let grid = Grid::of(img);
    let sky = sky_cells(&grid);
    let water_cells = region_cells_under(&grid, sky.clone(), Region::Water);
    let water = (spot == Spot::Water)
        .then(|| {
            let m = upsample(&grid, &water_cells, c.w, c.h);
            let rows: Vec<f32> = (0..c.h)
                .map(|y| m[y * c.w..(y + 1) * c.w].iter().sum::<f32>())
                .collect();
            let top = rows.iter().position(|r| *r > c.w as f32 * 0.3)?;
            let bottom = rows.iter().rposition(|r| *r > c.w as f32 * 0.3)?;
            (bottom > top + 4).then_some((top as f32, bottom as f32))
        })
        .flatten();

    let mut taken: Vec<(f32, f32, f32)> = Vec::new();
    for i in 0..n {
        let (x, y, size) = match spot {
            Spot::Sky => {
                let (x, y, room) = open_sky(
                    &grid,
                    &sky,
                    0.55,
                    seed.wrapping_add(i as u32 * 7919),
                    &taken,
                )
                .unwrap_or((
                    w * rng.range(0.2, 0.8),
                    h * rng.range(0.1, 0.3),
                    h * 0.2,
                ));
                let size = height.min(room * 1.6).max(h * 0.02);
                taken.push((x, y, size * 1.1));
                (x, y + size * 0.5, size)
            }
            Spot::Water if water.is_some() => {
                let (top, bottom) = water.unwrap_or_default();
                let t = rng.range(0.3, 0.7);
                let y = top + (bottom - top) * t;
                // Nearer (lower) boats are bigger.
                let size = height * (0.6 + 0.6 * t);
                (
                    w * (0.2 + 0.6 * (i as f32 + rng.range(0.2, 0.8)) / n as f32),
                    y,
                    size,
                )
            }
            _ => {
                let (x, y) = ground_spot(&grid, &sky, &water_cells, &c, height, i, n, seed);
                // Farther up the picture is farther away: smaller.
                (x, y, height * (0.55 + 0.45 * (y / h)).min(1.0))
            }
        };
        let s_px = size / model.height;
        let t = Xform {
            ox: x,
            oy: y,
            s: s_px,
            flip: if rng.unit() < 0.5 { 1.0 } else { -1.0 },
        };
        if spot != Spot::Sky {
            let rx = model.half_width * s_px * 1.05;
            shapes::ground_shadow(
                &mut c,
                x - rx * 0.1,
                y,
                rx,
                rx * 0.14 + 1.0,
                rgb(10, 10, 16),
                0.3 * k,
            );
        }
        shapes::draw(&mut c, &model.parts, t, &light, None);
        for lamp in &model.lamps {
            shapes::glow(
                &mut c,
                x + lamp.x * s_px * t.flip,
                y - lamp.y * s_px,
                lamp.r * s_px,
                lamp.color,
                lamp.strength,
            );
        }
    }
    write_back(&c, img);
}

/// Where the `i`-th of `n` ground things stands: on land (not sky, not water) in the lower part
/// of the picture, where the box it will fill holds the fewest edges (the emptiest place), the
/// `n` of them side by side. Falls back to the foreground's middle when no land is found.
#[allow(clippy::too_many_arguments)]
fn ground_spot(
    g: &Grid,
    sky: &[bool],
    water: &[bool],
    c: &Canvas,
    height: f32,
    i: usize,
    n: usize,
    seed: u32,
) -> (f32, f32) {
    let lo = (g.h as f32 * 0.62) as usize;
    let hi = (g.h as f32 * 0.96) as usize;
    // A meadow or lawn is where things stand when the picture has one (not on the tree tops
    // of a forest behind it); otherwise any land.
    let grass = region_cells_under(g, sky.to_vec(), Region::Grass);
    let meadow = (lo * g.w..hi.min(g.h) * g.w).filter(|&k| grass[k]).count() > g.w;
    let land = |x: usize, y: usize| {
        let k = y * g.w + x;
        if meadow {
            grass[k]
        } else {
            !sky[k] && !water[k]
        }
    };
    // Edge energy per grid cell, from the picture itself.
    let edge: Vec<f32> = (0..g.w * g.h)
        .map(|k| {
            let (x, y) = (k % g.w, k / g.w);
            let p = g.px[k];
            let r = if x + 1 < g.w {
                diff(p, g.at(x + 1, y))
            } else {
                0.0
            };
            let d = if y + 1 < g.h {
                diff(p, g.at(x, y + 1))
            } else {
                0.0
            };
            r + d
        })
        .collect();
    let tall = ((height / g.cell) as usize).max(1);
    let wide = (tall / 2).max(1);
    let mut best: Option<(f32, usize, usize)> = None;
    for y in lo..hi.min(g.h) {
        for x in wide..g.w.saturating_sub(wide) {
            // Its footprint must be land.
            if !(x - wide / 2..=x + wide / 2).all(|xx| xx < g.w && land(xx, y)) {
                continue;
            }
            let mut cost = 0.0;
            for yy in y.saturating_sub(tall)..=y {
                for xx in x - wide..(x + wide).min(g.w) {
                    cost += edge[yy * g.w + xx];
                }
            }
            // Lower is nearer, and nearer reads better: a small preference for it.
            cost -= y as f32 / g.h as f32 * 0.5;
            if best.is_none_or(|b| cost < b.0) {
                best = Some((cost, x, y));
            }
        }
    }
    let (w, h) = (c.w as f32, c.h as f32);
    let spread = if n > 1 {
        (i as f32 - (n - 1) as f32 / 2.0) * height * 0.9
    } else {
        0.0
    };
    let jitter = ((seed % 7) as f32 - 3.0) * g.cell * 0.3;
    match best {
        Some((_, x, y)) => (
            ((x as f32 + 0.5) * g.cell + spread + jitter).clamp(w * 0.05, w * 0.95),
            ((y as f32 + 0.9) * g.cell).min(h * 0.98),
        ),
        None => ((w * 0.5 + spread).clamp(w * 0.05, w * 0.95), h * 0.9),
    }
}

// ---------------------------------------------------------------------------------------------
// Removing and replacing what the painter placed

/// What to change in the painter's own plan.
pub enum Change<'a> {
    Remove(&'a str),
    Replace(&'a str),
}

/// Applies the changes to a freshly made plan; the error names what is not in the picture.
pub(super) fn change_plan(
    plan: &mut super::scene::Plan,
    changes: &[Change],
    ru: bool,
) -> Result<(), String> {
    for change in changes {
        match change {
            Change::Remove(clause) => {
                let mut found = false;
                for part in parts(clause) {
                    let theme = Theme::read(&part);
                    // A part that names a thing removes the thing; its sky and weather words
                    // only said where it was ("the boat in the fog").
                    // "one of the cats", "a cat", "two boats": that many, the nearest first;
                    // "the cats": all of them.
                    let limit = if theme.subjects.len() == 1 {
                        Theme::explicit_count(&part)
                    } else {
                        None
                    };
                    for s in &theme.subjects {
                        if !remove_thing(plan, s.thing, limit.unwrap_or(usize::MAX)) {
                            return Err(missing(s.thing.name(), ru));
                        }
                        found = true;
                    }
                    if !theme.subjects.is_empty() {
                        continue;
                    }
                    for e in &theme.elements {
                        let had = match e {
                            Element::Sun => plan.sun.take().is_some(),
                            Element::Moon => plan.moon.take().is_some(),
                            Element::Rainbow => std::mem::take(&mut plan.rainbow),
                            Element::Clouds => std::mem::take(&mut plan.clouds) > 0.0,
                            Element::Stars => {
                                plan.milky_way = None;
                                std::mem::take(&mut plan.stars) > 0.0
                            }
                            Element::Rain => {
                                plan.lightning = false;
                                std::mem::take(&mut plan.rain) > 0.0
                            }
                            Element::Fog => std::mem::take(&mut plan.fog) > 0.0,
                            Element::Snow => std::mem::take(&mut plan.snowfall) > 0.0,
                            _ => continue,
                        };
                        if !had {
                            return Err(missing(e.name(), ru));
                        }
                        found = true;
                    }
                }
                if !found {
                    return Err(missing(clause, ru));
                }
            }
            Change::Replace(clause) => {
                let theme = Theme::read(clause);
                let (Some(old), Some(new)) = (theme.subjects.first(), theme.subjects.get(1)) else {
                    return Err(missing(clause, ru));
                };
                let mut found = false;
                for p in plan.subjects.iter_mut().filter(|p| p.thing == old.thing) {
                    replace(p, new);
                    found = true;
                }
                if !found {
                    return Err(missing(old.thing.name(), ru));
                }
            }
        }
    }
    Ok(())
}

/// Removes up to `limit` of `thing` (the nearest ones: lowest base line first) and puts what
/// sat on or rode them on the ground where they stood, standing. False when there is none.
fn remove_thing(plan: &mut super::scene::Plan, thing: Thing, limit: usize) -> bool {
    let mut mine: Vec<usize> = (0..plan.subjects.len())
        .filter(|&i| plan.subjects[i].thing == thing && plan.subjects[i].on.is_none())
        .collect();
    if mine.is_empty() {
        // Only riders of this kind (a cat on a sofa): remove those.
        mine = (0..plan.subjects.len())
            .filter(|&i| plan.subjects[i].thing == thing)
            .collect();
    }
    if mine.is_empty() {
        return false;
    }
    mine.sort_by(|&a, &b| plan.subjects[b].y.total_cmp(&plan.subjects[a].y));
    mine.truncate(limit.max(1));
    // Each removed carrier's base line, place and left-right extent, to find its riders.
    let carriers: Vec<(usize, f32, Spot, f32, f32)> = mine
        .iter()
        .map(|&i| {
            let p = &plan.subjects[i];
            let m = objects::build(p.thing, &p.look);
            let half = p.height * m.half_width / m.height.max(1e-3);
            (p.subject, p.y, p.spot, p.x - half, p.x + half)
        })
        .collect();
    let mut dropped = Vec::new();
    let mut kept = Vec::new();
    for (i, mut p) in std::mem::take(&mut plan.subjects).into_iter().enumerate() {
        if mine.contains(&i) {
            continue;
        }
        let carrier = p.on.and_then(|on| {
            carriers
                .iter()
                .find(|(s, _, _, x0, x1)| *s == on && (*x0..=*x1).contains(&p.x))
        });
        let Some(&(_, base, spot, ..)) = carrier else {
            kept.push(p);
            continue;
        };
        let scale = p.height / objects::build(p.thing, &p.look).height.max(1e-3);
        p.look.figure.seated = false;
        if matches!(p.look.figure.pose, Some(Pose::Ride) | Some(Pose::Sit)) {
            p.look.figure.pose = None;
        }
        p.height = scale * objects::build(p.thing, &p.look).height;
        p.y = base;
        p.on = None;
        p.spot = spot;
        dropped.push(p);
    }
    // Back to front: each one now on the ground goes before the first thing standing nearer
    // (with that thing's riders, which follow it).
    for p in dropped {
        let at = kept
            .iter()
            .position(|q| q.spot != Spot::Sky && q.on.is_none() && q.y > p.y)
            .unwrap_or(kept.len());
        kept.insert(at, p);
    }
    plan.subjects = kept;
    true
}

fn replace(p: &mut Placed, new: &Subject) {
    let k = compose::base_size(new.thing, p.spot) / compose::base_size(p.thing, p.spot).max(1e-3);
    p.height *= k.clamp(0.3, 3.0);
    p.thing = new.thing;
    p.look.color = new.color;
    p.look.figure = Figure::from_subject(new, None, false);
    p.look.flying = p.spot == Spot::Sky;
}

fn missing(name: &str, ru: bool) -> String {
    if ru {
        format!(
            "на этой картинке нет «{name}», нарисованного Pictor: убрать или заменить можно только то, что художник Pictor нарисовал сам"
        )
    } else {
        format!(
            "there is no {name} that Pictor placed in this picture: remove and replace work on what the built-in painter drew itself"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Edit = Box<dyn Fn(&mut RgbaImage)>;

    /// Every content edit on pictures of awkward shapes (tiny, a strip, flat colour) keeps the
    /// size and alpha and does not panic.
    #[test]
    fn every_edit_survives_odd_pictures() {
        let shapes = [(1, 1), (15, 40), (16, 16), (17, 300), (300, 17), (64, 48)];
        for (w, h) in shapes {
            for flat in [false, true] {
                let img = RgbaImage::from_fn(w, h, |x, y| {
                    if flat {
                        image::Rgba([90, 140, 220, 200])
                    } else {
                        image::Rgba([(x * 7) as u8, (y * 5) as u8, ((x ^ y) * 3) as u8, 200])
                    }
                });
                let mut edits: Vec<Edit> = vec![
                    Box::new(|i| recolor(i, Region::Sky, [240, 120, 170])),
                    Box::new(|i| recolor(i, Region::Water, [0, 0, 0])),
                    Box::new(|i| recolor(i, Region::Greenery, [255, 255, 255])),
                    Box::new(|i| recolor(i, Region::Grass, [255, 255, 255])),
                    Box::new(|i| recolor(i, Region::Background, [30, 80, 200])),
                    Box::new(|i| time_of_day(i, TimeOfDay::Night, 1)),
                    Box::new(|i| time_of_day(i, TimeOfDay::Sunset, 1)),
                    Box::new(|i| time_of_day(i, TimeOfDay::Dawn, 1)),
                    Box::new(|i| time_of_day(i, TimeOfDay::Day, 1)),
                    Box::new(|i| weather(i, Weather::Rain, 1)),
                    Box::new(|i| weather(i, Weather::Snow, 1)),
                    Box::new(|i| weather(i, Weather::Fog, 1)),
                ];
                for clause in [
                    "moon",
                    "sun",
                    "stars",
                    "rainbow",
                    "clouds",
                    "five birds",
                    "a horse",
                    "two boats",
                    "a girl holding a red balloon",
                ] {
                    edits.push(Box::new(move |i| add(i, clause, 7)));
                }
                for e in &edits {
                    let mut out = img.clone();
                    e(&mut out);
                    assert_eq!(out.dimensions(), (w, h));
                    assert!(out.pixels().all(|p| p[3] == 200), "alpha kept");
                }
            }
        }
    }

    /// A mask made of 16-pixel blocks along a diagonal colour edge comes out of [`refine`]
    /// following the edge itself: far fewer pixels on the wrong side, no staircase.
    #[test]
    fn refine_moves_block_edges_onto_the_colour_edge() {
        let (w, h) = (256u32, 256u32);
        let inside = |x: f32, y: f32| x < y * 0.7 + 40.0;
        let img = RgbaImage::from_fn(w, h, |x, y| {
            if inside(x as f32, y as f32) {
                image::Rgba([70, 120, 210, 255])
            } else {
                image::Rgba([120, 125, 130, 255])
            }
        });
        let coarse: Vec<f32> = (0..w * h)
            .map(|i| {
                let (bx, by) = ((i % w) / 16 * 16 + 8, (i / w) / 16 * 16 + 8);
                if inside(bx as f32, by as f32) {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        let wrong = |m: &[f32]| {
            (0..w * h)
                .filter(|&i| {
                    let truth = inside((i % w) as f32, (i / w) as f32);
                    (m[i as usize] > 0.5) != truth
                })
                .count()
        };
        let fine = refine(&img, &coarse, 24.0);
        let (before, after) = (wrong(&coarse), wrong(&fine));
        assert!(
            before > 1000 && after * 10 < before,
            "wrong pixels {before} → {after}"
        );
        // Flat inside and outside stay as they were.
        assert!(fine[(10 * w + 5) as usize] > 0.98 && fine[(5 * w + 250) as usize] < 0.02);
    }

    #[test]
    fn what_can_be_added_removed_and_replaced() {
        assert!(can_add("moon") && can_add("three cats") && can_add("луну") && can_add("rain"));
        assert!(!can_add("vignette") && !can_add("red border") && !can_add("more contrast"));
        assert!(can_remove("boat") && can_remove("the sun") && !can_remove("contrast"));
        assert!(can_replace("boat with whale") && !can_replace("boat"));
    }
}
