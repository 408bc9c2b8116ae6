//! Reading the prompt: English and Russian words for times of day, scene elements and colours,
//! collected into a [`Theme`]. Words that mean nothing to us still count: they feed
//! [`Theme::flavor`], which nudges shapes and colours.

use super::canvas::{Rgb, rgb};
use super::noise::fnv1a;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Time {
    Day,
    /// Sunset, sunrise, dusk: the sun near the horizon.
    Golden,
    Night,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    Sun,
    Moon,
    Stars,
    Space,
    Planet,
    Sea,
    Lake,
    Beach,
    Mountains,
    Hills,
    Forest,
    City,
    Snow,
    Desert,
    Clouds,
    ClearSky,
    Storm,
    Fog,
    Abstract,
}

/// What a colour word applies to: the element named right after it ("green hills", "red sky"),
/// or the whole picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Any,
    Sky,
    Land,
    Water,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Word {
    Time(Time),
    Element(Element),
    Color(Rgb),
    /// "sky": only a target for colours.
    Sky,
    /// "landscape": the whole picture (a colour before it applies everywhere).
    Scene,
    Darker,
    Lighter,
    /// A known word that must not be taken for another one ("горизонт" is not "гор").
    Ignore,
}

/// Word patterns: a trailing `*` matches any ending, a trailing `~` a Russian adjective ending
/// ("сер~" is серый, серая, серым… but not сердце). The longest matching pattern wins.
const WORDS: &[(&str, Word)] = &[
    // Time of day.
    ("sunset*", Word::Time(Time::Golden)),
    ("sunrise*", Word::Time(Time::Golden)),
    ("dawn*", Word::Time(Time::Golden)),
    ("dusk*", Word::Time(Time::Golden)),
    ("evening*", Word::Time(Time::Golden)),
    ("twilight*", Word::Time(Time::Golden)),
    ("golden", Word::Time(Time::Golden)),
    ("закат*", Word::Time(Time::Golden)),
    ("рассвет*", Word::Time(Time::Golden)),
    ("восход*", Word::Time(Time::Golden)),
    ("вечер*", Word::Time(Time::Golden)),
    ("сумерк*", Word::Time(Time::Golden)),
    ("заря", Word::Time(Time::Golden)),
    ("зари", Word::Time(Time::Golden)),
    ("зарей", Word::Time(Time::Golden)),
    ("night*", Word::Time(Time::Night)),
    ("midnight", Word::Time(Time::Night)),
    ("nocturn*", Word::Time(Time::Night)),
    ("ночь*", Word::Time(Time::Night)),
    ("ночн*", Word::Time(Time::Night)),
    ("ночью", Word::Time(Time::Night)),
    ("полночь", Word::Time(Time::Night)),
    ("day", Word::Time(Time::Day)),
    ("daytime", Word::Time(Time::Day)),
    ("daylight", Word::Time(Time::Day)),
    ("noon", Word::Time(Time::Day)),
    ("morning", Word::Time(Time::Day)),
    ("sunny", Word::Time(Time::Day)),
    ("summer", Word::Time(Time::Day)),
    ("день", Word::Time(Time::Day)),
    ("днем", Word::Time(Time::Day)),
    ("дневн*", Word::Time(Time::Day)),
    ("полдень", Word::Time(Time::Day)),
    ("утр*", Word::Time(Time::Day)),
    ("солнечн*", Word::Time(Time::Day)),
    ("лето", Word::Time(Time::Day)),
    ("летом", Word::Time(Time::Day)),
    ("летн*", Word::Time(Time::Day)),
    // Sky objects.
    ("sun", Word::Element(Element::Sun)),
    ("suns", Word::Element(Element::Sun)),
    ("sunlight", Word::Element(Element::Sun)),
    ("солнц*", Word::Element(Element::Sun)),
    ("moon*", Word::Element(Element::Moon)),
    ("lunar", Word::Element(Element::Moon)),
    ("луна", Word::Element(Element::Moon)),
    ("луны", Word::Element(Element::Moon)),
    ("луну", Word::Element(Element::Moon)),
    ("луной", Word::Element(Element::Moon)),
    ("лунн*", Word::Element(Element::Moon)),
    ("месяц*", Word::Element(Element::Moon)),
    ("star", Word::Element(Element::Stars)),
    ("stars", Word::Element(Element::Stars)),
    ("starry", Word::Element(Element::Stars)),
    ("starlight", Word::Element(Element::Stars)),
    ("звезд*", Word::Element(Element::Stars)),
    ("звездн*", Word::Element(Element::Stars)),
    ("space", Word::Element(Element::Space)),
    ("outer", Word::Element(Element::Space)),
    ("galax*", Word::Element(Element::Space)),
    ("nebula*", Word::Element(Element::Space)),
    ("cosm*", Word::Element(Element::Space)),
    ("universe", Word::Element(Element::Space)),
    ("astronaut*", Word::Element(Element::Space)),
    ("космос*", Word::Element(Element::Space)),
    ("космич*", Word::Element(Element::Space)),
    ("галакт*", Word::Element(Element::Space)),
    ("туманност*", Word::Element(Element::Space)),
    ("вселенн*", Word::Element(Element::Space)),
    ("planet*", Word::Element(Element::Planet)),
    ("saturn", Word::Element(Element::Planet)),
    ("jupiter", Word::Element(Element::Planet)),
    ("планет*", Word::Element(Element::Planet)),
    ("сатурн*", Word::Element(Element::Planet)),
    // Water.
    ("sea", Word::Element(Element::Sea)),
    ("seas", Word::Element(Element::Sea)),
    ("seascape", Word::Element(Element::Sea)),
    ("ocean*", Word::Element(Element::Sea)),
    ("water*", Word::Element(Element::Sea)),
    ("wave*", Word::Element(Element::Sea)),
    ("bay", Word::Element(Element::Sea)),
    ("море", Word::Element(Element::Sea)),
    ("моря", Word::Element(Element::Sea)),
    ("морем", Word::Element(Element::Sea)),
    ("морю", Word::Element(Element::Sea)),
    ("морск*", Word::Element(Element::Sea)),
    ("океан*", Word::Element(Element::Sea)),
    ("вод*", Word::Element(Element::Sea)),
    ("волн*", Word::Element(Element::Sea)),
    ("lake*", Word::Element(Element::Lake)),
    ("river*", Word::Element(Element::Lake)),
    ("pond", Word::Element(Element::Lake)),
    ("reflection*", Word::Element(Element::Lake)),
    ("озер*", Word::Element(Element::Lake)),
    ("река", Word::Element(Element::Lake)),
    ("реки", Word::Element(Element::Lake)),
    ("реку", Word::Element(Element::Lake)),
    ("рекой", Word::Element(Element::Lake)),
    ("речк*", Word::Element(Element::Lake)),
    ("пруд*", Word::Element(Element::Lake)),
    ("отражен*", Word::Element(Element::Lake)),
    ("beach*", Word::Element(Element::Beach)),
    ("coast*", Word::Element(Element::Beach)),
    ("shore*", Word::Element(Element::Beach)),
    ("tropical", Word::Element(Element::Beach)),
    ("island*", Word::Element(Element::Beach)),
    ("пляж*", Word::Element(Element::Beach)),
    ("берег*", Word::Element(Element::Beach)),
    ("побереж*", Word::Element(Element::Beach)),
    ("остров*", Word::Element(Element::Beach)),
    // Land.
    ("mountain*", Word::Element(Element::Mountains)),
    ("alps", Word::Element(Element::Mountains)),
    ("alpine", Word::Element(Element::Mountains)),
    ("peak*", Word::Element(Element::Mountains)),
    ("volcano*", Word::Element(Element::Mountains)),
    ("cliff*", Word::Element(Element::Mountains)),
    ("canyon*", Word::Element(Element::Mountains)),
    ("гор", Word::Element(Element::Mountains)),
    ("гора", Word::Element(Element::Mountains)),
    ("горы", Word::Element(Element::Mountains)),
    ("горах", Word::Element(Element::Mountains)),
    ("горами", Word::Element(Element::Mountains)),
    ("гору", Word::Element(Element::Mountains)),
    ("горн*", Word::Element(Element::Mountains)),
    ("вершин*", Word::Element(Element::Mountains)),
    ("скал*", Word::Element(Element::Mountains)),
    ("альп*", Word::Element(Element::Mountains)),
    ("вулкан*", Word::Element(Element::Mountains)),
    ("горизонт*", Word::Ignore),
    ("горяч*", Word::Ignore),
    ("hill*", Word::Element(Element::Hills)),
    ("meadow*", Word::Element(Element::Hills)),
    ("field*", Word::Element(Element::Hills)),
    ("valley*", Word::Element(Element::Hills)),
    ("countryside", Word::Element(Element::Hills)),
    ("landscape*", Word::Scene),
    ("scenery", Word::Scene),
    ("холм*", Word::Element(Element::Hills)),
    ("луг*", Word::Element(Element::Hills)),
    ("поле", Word::Element(Element::Hills)),
    ("поля", Word::Element(Element::Hills)),
    ("полем", Word::Element(Element::Hills)),
    ("полях", Word::Element(Element::Hills)),
    ("долин*", Word::Element(Element::Hills)),
    ("пейзаж*", Word::Scene),
    ("sky", Word::Sky),
    ("skies", Word::Sky),
    ("небо", Word::Sky),
    ("неба", Word::Sky),
    ("небом", Word::Sky),
    ("небе", Word::Sky),
    ("небес*", Word::Sky),
    ("forest*", Word::Element(Element::Forest)),
    ("wood", Word::Element(Element::Forest)),
    ("woods", Word::Element(Element::Forest)),
    ("tree*", Word::Element(Element::Forest)),
    ("pine*", Word::Element(Element::Forest)),
    ("jungle*", Word::Element(Element::Forest)),
    ("taiga", Word::Element(Element::Forest)),
    ("лес", Word::Element(Element::Forest)),
    ("леса", Word::Element(Element::Forest)),
    ("лесу", Word::Element(Element::Forest)),
    ("лесом", Word::Element(Element::Forest)),
    ("лесн*", Word::Element(Element::Forest)),
    ("дерев*", Word::Element(Element::Forest)),
    ("ел*", Word::Element(Element::Forest)),
    ("сосн*", Word::Element(Element::Forest)),
    ("тайг*", Word::Element(Element::Forest)),
    ("джунгл*", Word::Element(Element::Forest)),
    ("city", Word::Element(Element::City)),
    ("cities", Word::Element(Element::City)),
    ("cityscape", Word::Element(Element::City)),
    ("town*", Word::Element(Element::City)),
    ("skyline*", Word::Element(Element::City)),
    ("skyscraper*", Word::Element(Element::City)),
    ("building*", Word::Element(Element::City)),
    ("urban", Word::Element(Element::City)),
    ("metropol*", Word::Element(Element::City)),
    ("cyberpunk", Word::Element(Element::City)),
    ("street*", Word::Element(Element::City)),
    ("город*", Word::Element(Element::City)),
    ("мегаполис*", Word::Element(Element::City)),
    ("небоскреб*", Word::Element(Element::City)),
    ("здани*", Word::Element(Element::City)),
    ("улиц*", Word::Element(Element::City)),
    ("snow*", Word::Element(Element::Snow)),
    ("winter*", Word::Element(Element::Snow)),
    ("ice", Word::Element(Element::Snow)),
    ("icy", Word::Element(Element::Snow)),
    ("frozen", Word::Element(Element::Snow)),
    ("arctic", Word::Element(Element::Snow)),
    ("christmas", Word::Element(Element::Snow)),
    ("снег*", Word::Element(Element::Snow)),
    ("снеж*", Word::Element(Element::Snow)),
    ("зим*", Word::Element(Element::Snow)),
    ("лед", Word::Element(Element::Snow)),
    ("ледян*", Word::Element(Element::Snow)),
    ("мороз*", Word::Element(Element::Snow)),
    ("desert*", Word::Element(Element::Desert)),
    ("dune*", Word::Element(Element::Desert)),
    ("sand*", Word::Element(Element::Desert)),
    ("sahara", Word::Element(Element::Desert)),
    ("пустын*", Word::Element(Element::Desert)),
    ("дюн*", Word::Element(Element::Desert)),
    ("песо*", Word::Element(Element::Desert)),
    ("песк*", Word::Element(Element::Desert)),
    ("песчан*", Word::Element(Element::Desert)),
    // Weather.
    ("cloud*", Word::Element(Element::Clouds)),
    ("overcast", Word::Element(Element::Clouds)),
    ("облак*", Word::Element(Element::Clouds)),
    ("облачн*", Word::Element(Element::Clouds)),
    ("туч*", Word::Element(Element::Clouds)),
    ("clear", Word::Element(Element::ClearSky)),
    ("cloudless", Word::Element(Element::ClearSky)),
    ("ясн*", Word::Element(Element::ClearSky)),
    ("безоблачн*", Word::Element(Element::ClearSky)),
    ("storm*", Word::Element(Element::Storm)),
    ("thunder*", Word::Element(Element::Storm)),
    ("rain*", Word::Element(Element::Storm)),
    ("шторм*", Word::Element(Element::Storm)),
    ("гроз*", Word::Element(Element::Storm)),
    ("буря", Word::Element(Element::Storm)),
    ("бури", Word::Element(Element::Storm)),
    ("бурю", Word::Element(Element::Storm)),
    ("дожд*", Word::Element(Element::Storm)),
    ("fog*", Word::Element(Element::Fog)),
    ("mist*", Word::Element(Element::Fog)),
    ("haze", Word::Element(Element::Fog)),
    ("hazy", Word::Element(Element::Fog)),
    ("туман", Word::Element(Element::Fog)),
    ("тумана", Word::Element(Element::Fog)),
    ("туманом", Word::Element(Element::Fog)),
    ("туманн*", Word::Element(Element::Fog)),
    ("дымк*", Word::Element(Element::Fog)),
    ("abstract*", Word::Element(Element::Abstract)),
    ("pattern*", Word::Element(Element::Abstract)),
    ("fractal*", Word::Element(Element::Abstract)),
    ("абстракт*", Word::Element(Element::Abstract)),
    ("узор*", Word::Element(Element::Abstract)),
    // Colours.
    ("red", Word::Color(rgb(214, 38, 38))),
    ("reds", Word::Color(rgb(214, 38, 38))),
    ("reddish", Word::Color(rgb(214, 38, 38))),
    ("crimson", Word::Color(rgb(190, 20, 50))),
    ("scarlet", Word::Color(rgb(235, 40, 30))),
    ("ruby", Word::Color(rgb(200, 20, 60))),
    ("красн*", Word::Color(rgb(214, 38, 38))),
    ("алы*", Word::Color(rgb(235, 40, 30))),
    ("ала*", Word::Color(rgb(235, 40, 30))),
    ("алое", Word::Color(rgb(235, 40, 30))),
    ("бордов*", Word::Color(rgb(128, 20, 40))),
    ("orange*", Word::Color(rgb(245, 130, 30))),
    ("оранжев*", Word::Color(rgb(245, 130, 30))),
    ("рыж*", Word::Color(rgb(230, 110, 30))),
    ("yellow*", Word::Color(rgb(245, 215, 40))),
    ("желт*", Word::Color(rgb(245, 215, 40))),
    ("gold*", Word::Color(rgb(240, 185, 55))),
    ("amber", Word::Color(rgb(245, 165, 30))),
    ("золот*", Word::Color(rgb(240, 185, 55))),
    ("green*", Word::Color(rgb(40, 170, 70))),
    ("emerald", Word::Color(rgb(20, 160, 100))),
    ("lime", Word::Color(rgb(140, 220, 40))),
    ("olive", Word::Color(rgb(120, 130, 40))),
    ("зелен*", Word::Color(rgb(40, 170, 70))),
    ("изумруд*", Word::Color(rgb(20, 160, 100))),
    ("teal", Word::Color(rgb(20, 150, 150))),
    ("turquoise", Word::Color(rgb(40, 200, 190))),
    ("cyan", Word::Color(rgb(40, 210, 230))),
    ("aqua*", Word::Color(rgb(40, 200, 220))),
    ("бирюз*", Word::Color(rgb(40, 200, 190))),
    ("blue*", Word::Color(rgb(30, 90, 220))),
    ("azure", Word::Color(rgb(40, 130, 240))),
    ("navy", Word::Color(rgb(20, 30, 110))),
    ("sapphire", Word::Color(rgb(20, 60, 180))),
    ("син~", Word::Color(rgb(30, 70, 210))),
    ("синев*", Word::Color(rgb(30, 70, 210))),
    ("голуб*", Word::Color(rgb(90, 170, 240))),
    ("purple*", Word::Color(rgb(130, 50, 190))),
    ("violet*", Word::Color(rgb(140, 70, 220))),
    ("lilac", Word::Color(rgb(190, 150, 230))),
    ("lavender", Word::Color(rgb(170, 140, 220))),
    ("magenta", Word::Color(rgb(220, 40, 170))),
    ("фиолет*", Word::Color(rgb(130, 50, 190))),
    ("сиренев*", Word::Color(rgb(190, 150, 230))),
    ("лилов*", Word::Color(rgb(160, 80, 200))),
    ("пурпур*", Word::Color(rgb(150, 30, 140))),
    ("pink*", Word::Color(rgb(240, 110, 170))),
    ("rose", Word::Color(rgb(230, 90, 130))),
    ("розов*", Word::Color(rgb(240, 110, 170))),
    ("brown*", Word::Color(rgb(130, 80, 40))),
    ("коричнев*", Word::Color(rgb(130, 80, 40))),
    ("silver*", Word::Color(rgb(190, 195, 205))),
    ("серебр*", Word::Color(rgb(190, 195, 205))),
    ("gray", Word::Color(rgb(128, 128, 128))),
    ("grey", Word::Color(rgb(128, 128, 128))),
    ("сер~", Word::Color(rgb(128, 128, 128))),
    ("сероват*", Word::Color(rgb(128, 128, 128))),
    ("black", Word::Darker),
    ("dark*", Word::Darker),
    ("gloomy", Word::Darker),
    ("черн*", Word::Darker),
    ("темн*", Word::Darker),
    ("мрачн*", Word::Darker),
    ("white", Word::Lighter),
    ("pale", Word::Lighter),
    ("pastel", Word::Lighter),
    ("bright", Word::Lighter),
    ("бел~", Word::Lighter),
    ("белосне*", Word::Lighter),
    ("светл*", Word::Lighter),
    ("пастел*", Word::Lighter),
    ("бледн*", Word::Lighter),
    // Common words that carry no scene meaning but would otherwise hit a prefix above.
    ("sandwich*", Word::Ignore),
    ("rainbow*", Word::Ignore),
    ("watercolo*", Word::Ignore),
    ("pineapple*", Word::Ignore),
    ("синхрон*", Word::Ignore),
    ("сила", Word::Ignore),
];

/// What the prompt asks for.
#[derive(Debug, Clone, Default)]
pub struct Theme {
    /// The first time-of-day word, if any.
    pub time: Option<Time>,
    pub elements: Vec<Element>,
    /// Colour words in order of appearance, with what they apply to.
    pub colors: Vec<(Rgb, Target)>,
    /// Net count of darker (black, dark) minus lighter (white, pale) words.
    pub darkness: i32,
    /// Hash of the words we did not recognise (0 when there are none).
    pub flavor: u64,
}

impl Theme {
    pub fn has(&self, e: Element) -> bool {
        self.elements.contains(&e)
    }

    /// The first colour for `target`.
    pub fn color_for(&self, target: Target) -> Option<Rgb> {
        self.colors
            .iter()
            .find(|(_, t)| *t == target)
            .map(|(c, _)| *c)
    }

    /// The `n`-th colour word regardless of target.
    pub fn color(&self, n: usize) -> Option<Rgb> {
        self.colors.get(n).map(|(c, _)| *c)
    }

    pub fn read(prompt: &str) -> Theme {
        let mut theme = Theme::default();
        let text = prompt.to_lowercase().replace('ё', "е");
        // Colours waiting for the noun they describe: (index in `colors`, tokens since).
        let mut pending: Vec<(usize, usize)> = Vec::new();
        for token in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
        {
            let word = lookup(token);
            let target = match word {
                Some(Word::Time(_)) | Some(Word::Sky) => Some(Target::Sky),
                Some(Word::Element(e)) => Some(element_target(e)),
                Some(Word::Scene) => Some(Target::Any),
                _ => None,
            };
            if let Some(target) = target {
                for (i, _) in pending.drain(..) {
                    theme.colors[i].1 = target;
                }
            }
            pending.retain_mut(|(_, age)| {
                *age += 1;
                *age <= 3
            });
            match word {
                Some(Word::Time(t)) => {
                    theme.time.get_or_insert(t);
                }
                Some(Word::Element(e)) => {
                    if !theme.elements.contains(&e) {
                        theme.elements.push(e);
                    }
                }
                Some(Word::Color(c)) => {
                    pending.push((theme.colors.len(), 0));
                    theme.colors.push((c, Target::Any));
                }
                Some(Word::Sky) | Some(Word::Scene) => {}
                Some(Word::Darker) => theme.darkness += 1,
                Some(Word::Lighter) => theme.darkness -= 1,
                Some(Word::Ignore) => {}
                None => {
                    if token.chars().count() >= 3 {
                        theme.flavor = theme.flavor.rotate_left(13) ^ fnv1a(token.as_bytes());
                    }
                }
            }
        }
        theme
    }
}

const ADJECTIVE_ENDINGS: &[&str] = &[
    "ый", "ий", "ой", "ая", "яя", "ое", "ее", "ые", "ие", "ым", "им", "ого", "его", "ому", "ему",
    "ую", "юю", "ых", "их", "ыми", "ими", "ей",
];

fn element_target(e: Element) -> Target {
    match e {
        Element::Sea | Element::Lake | Element::Beach => Target::Water,
        Element::Mountains
        | Element::Hills
        | Element::Forest
        | Element::City
        | Element::Snow
        | Element::Desert => Target::Land,
        _ => Target::Sky,
    }
}

fn lookup(token: &str) -> Option<Word> {
    let mut best: Option<(usize, bool, Word)> = None;
    for &(pattern, word) in WORDS {
        let (stem, prefix, hit) = if let Some(stem) = pattern.strip_suffix('*') {
            (stem, true, token.starts_with(stem))
        } else if let Some(stem) = pattern.strip_suffix('~') {
            let hit = token
                .strip_prefix(stem)
                .is_some_and(|rest| ADJECTIVE_ENDINGS.contains(&rest));
            (stem, true, hit)
        } else {
            (pattern, false, token == pattern)
        };
        if !hit {
            continue;
        }
        // Longer stems win; at equal length an exact word beats a prefix.
        let better = match best {
            None => true,
            Some((len, was_prefix, _)) => {
                stem.len() > len || (stem.len() == len && was_prefix && !prefix)
            }
        };
        if better {
            best = Some((stem.len(), prefix, word));
        }
    }
    best.map(|(_, _, w)| w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_and_russian_words_are_read() {
        let t = Theme::read("A red sunset over the sea and mountains");
        assert_eq!(t.time, Some(Time::Golden));
        assert!(t.has(Element::Sea) && t.has(Element::Mountains));
        assert_eq!(t.colors.len(), 1);

        let t = Theme::read("Ночной город у моря, синие огни");
        assert_eq!(t.time, Some(Time::Night));
        assert!(t.has(Element::City) && t.has(Element::Sea));
        assert!(!t.has(Element::Mountains));
        assert_eq!(t.colors.len(), 1);

        let t = Theme::read("зелёный лес в горах, горизонт");
        assert!(t.has(Element::Forest) && t.has(Element::Mountains));
        assert_eq!(t.colors.len(), 1);

        let t = Theme::read("серое небо, сердце, синий синтезатор");
        assert_eq!(t.colors.len(), 2);
        assert_eq!(t.colors[0].1, Target::Sky);
        assert_eq!(t.colors[1].1, Target::Any);
    }

    #[test]
    fn colours_attach_to_the_following_noun() {
        let t = Theme::read("green hills under a purple sky by the blue sea");
        assert_eq!(t.colors[0].1, Target::Land);
        assert_eq!(t.colors[1].1, Target::Sky);
        assert_eq!(t.colors[2].1, Target::Water);
        let t = Theme::read("a red landscape");
        assert_eq!(t.colors[0].1, Target::Any);
    }

    #[test]
    fn unknown_words_set_the_flavor() {
        assert_eq!(Theme::read("sea").flavor, 0);
        let a = Theme::read("a cat").flavor;
        let b = Theme::read("a dog").flavor;
        assert_ne!(a, 0);
        assert_ne!(a, b);
    }
}
