//! Rule-based prompt enhancement (`enhance: true`): adds subject, lighting and composition details
//! consistent with the prompt. Returns `None` when it has nothing to add.
//!
//! The rules read the prompt with the renderer's own reader, so they know what it already says,
//! and only add what it does not: a light that matches its time of day (never "sunny" at night,
//! never "moonlit" at noon), a detail for its main subject, a composition, a quality phrase.
//! Additions are in the prompt's language (Russian for Cyrillic prompts) and chosen by the seed,
//! so the same prompt and seed always give the same enhanced prompt.

use super::procedural::noise::Rng;
use super::procedural::theme_summary;

/// The prompt to render instead of `prompt`, or `None` to render it as sent.
pub fn enhance(prompt: &str, seed: u64) -> Option<String> {
    let trimmed = prompt.trim();
    if trimmed.is_empty() {
        return None;
    }
    let t = theme_summary(trimmed);
    let russian = trimmed
        .chars()
        .any(|c| ('а'..='я').contains(&c.to_lowercase().next().unwrap_or(c)));
    let mut rng = Rng::new(seed ^ 0xE_4A4CE);
    let mut add: Vec<&'static str> = Vec::new();
    let pick = |rng: &mut Rng, options: &[&'static str]| options[rng.below(options.len())];

    // Subject detail.
    if let Some(subject) = t.main_subject {
        let options: &[&str] = match (subject, russian) {
            ("cat", false) => &["fluffy fur", "curious eyes"],
            ("cat", true) => &["пушистая шерсть", "любопытный взгляд"],
            ("dog", false) => &["glossy coat", "friendly pose"],
            ("dog", true) => &["блестящая шерсть", "дружелюбная поза"],
            ("horse", false) | ("deer", false) => &["graceful silhouette", "flowing mane"],
            ("horse", true) | ("deer", true) => &["грациозный силуэт", "развевающаяся грива"],
            ("lighthouse", false) => &["striped tower", "sturdy stone tower"],
            ("lighthouse", true) => &["полосатая башня", "крепкая башня"],
            ("castle", false) => &["towers with pointed roofs", "banners on the towers"],
            ("castle", true) => &["башни с острыми крышами", "флаги на башнях"],
            ("boat", false) | ("ship", false) => &["billowing canvas", "gentle ripples"],
            ("boat", true) | ("ship", true) => &["надутый ветром", "лёгкая рябь"],
            ("balloon", false) => &["striped envelope", "drifting gently"],
            ("balloon", true) => &["полосатый купол", "плавный полёт"],
            ("rocket", false) => &["billowing exhaust", "bright engine flame"],
            ("rocket", true) => &["клубы дыма", "яркое пламя двигателя"],
            ("cup", false) => &["rising steam", "ceramic mug"],
            ("cup", true) => &["поднимающийся пар", "керамическая кружка"],
            (_, false) => &["detailed", "clear silhouette"],
            (_, true) => &["детально", "чёткий силуэт"],
        };
        add.push(pick(&mut rng, options));
    } else if !t.landscape {
        add.push(if russian {
            pick(&mut rng, &["холмы на горизонте", "горы вдали"])
        } else {
            pick(
                &mut rng,
                &["rolling hills on the horizon", "distant mountains"],
            )
        });
    }

    // Lighting that agrees with the time of day (or picks one when none is given).
    let light: &[&str] = match (t.time, russian, t.indoor) {
        (_, false, true) => &["soft window light", "warm side light"],
        (_, true, true) => &["мягкий свет из окна", "тёплый боковой свет"],
        (Some("night"), false, _) => &["moonlit", "soft moonlight", "starry sky"],
        (Some("night"), true, _) => &["лунный свет", "звёздное небо"],
        (Some("golden"), false, _) => &["warm golden light", "glowing sky"],
        (Some("golden"), true, _) => &["тёплый золотой свет", "сияющее небо"],
        (Some(_), false, _) => &["bright daylight", "soft sunlight"],
        (Some(_), true, _) => &["яркий дневной свет", "мягкий солнечный свет"],
        (None, false, _) => &["golden hour", "soft morning light"],
        (None, true, _) => &["золотой час", "мягкий утренний свет"],
    };
    if !(t.underwater) {
        add.push(pick(&mut rng, light));
    }

    // Composition, unless the prompt already places things.
    if !t.placed {
        add.push(if russian {
            pick(
                &mut rng,
                &[
                    "композиция по правилу третей",
                    "широкий план",
                    "центральная композиция",
                ],
            )
        } else {
            pick(
                &mut rng,
                &[
                    "rule of thirds composition",
                    "wide shot",
                    "centered composition",
                ],
            )
        });
    }
    add.push(if russian {
        pick(&mut rng, &["высокая детализация", "атмосферно"])
    } else {
        pick(&mut rng, &["highly detailed", "atmospheric"])
    });

    let mut out = trimmed.trim_end_matches(['.', ',', ' ']).to_owned();
    for a in add {
        if !out.to_lowercase().contains(a) {
            out.push_str(", ");
            out.push_str(a);
        }
    }
    (out != trimmed).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_details_and_is_deterministic() {
        let a = enhance("a cat on a hill", 7).unwrap();
        assert!(a.starts_with("a cat on a hill, "));
        assert_eq!(Some(a.clone()), enhance("a cat on a hill", 7));
        assert_eq!(enhance("", 1), None);
        assert_eq!(enhance("   ", 1), None);
    }

    #[test]
    fn never_contradicts_the_time_of_day() {
        for seed in 0..40 {
            let night = enhance("a castle at night", seed).unwrap().to_lowercase();
            for word in ["sunny", "daylight", "golden", "sunlight", "morning"] {
                assert!(!night.contains(word), "{night}");
            }
            let day = enhance("a lighthouse at noon", seed)
                .unwrap()
                .to_lowercase();
            for word in ["moon", "night", "star", "golden"] {
                assert!(!day.contains(word), "{day}");
            }
            let ru = enhance("ночной город", seed).unwrap();
            assert!(!ru.contains("солнеч") && !ru.contains("дневн"), "{ru}");
        }
    }

    #[test]
    fn russian_prompts_get_russian_additions() {
        let e = enhance("кот на крыше", 3).unwrap();
        let added = &e["кот на крыше".len()..];
        assert!(added.chars().any(|c| ('а'..='я').contains(&c)), "{e}");
        assert!(!added.chars().any(|c| c.is_ascii_alphabetic()), "{e}");
    }

    #[test]
    fn the_enhanced_prompt_still_renders_its_subject() {
        let e = enhance("a red balloon", 1).unwrap();
        assert_eq!(theme_summary(&e).main_subject, Some("balloon"));
    }
}
