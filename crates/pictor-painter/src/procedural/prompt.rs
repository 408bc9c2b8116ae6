//! Reading the prompt: English and Russian words for times of day, seasons, weather, scene
//! elements, things to draw (with counts: "three cats", "две лодки"), colours (attached to the
//! noun they describe: "a red balloon", "green hills"), mood, composition, style and quoted text,
//! collected into a [`Theme`].
//!
//! Matching is by pattern (exact words, prefixes for Russian endings, English plurals), then, for
//! longer Latin words that match nothing, by edit distance 1 (2 for long words) against the exact
//! vocabulary, which catches common misspellings ("moutain", "ligthouse", "baloon"). Words that
//! still mean nothing count too: they feed [`Theme::flavor`], which nudges shapes and colours, so
//! every prompt gives its own picture and no prompt is an error.

mod lexicon;

use super::canvas::{Rgb, rgb};
use super::noise::fnv1a;
use crate::style::Style;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Time {
    Day,
    /// Sunset, sunrise, dusk: the sun near the horizon.
    Golden,
    Night,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Season {
    Spring,
    Summer,
    Autumn,
    Winter,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mood {
    Calm,
    Dramatic,
    Gloomy,
    Cheerful,
    Magical,
    Romantic,
    Cozy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Left,
    Right,
    Center,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Full,
    Half,
    Crescent,
}

/// How quoted text is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextMode {
    /// A title across the picture (posters, covers, cards).
    Title,
    /// On a signboard standing in the scene.
    Sign,
    /// Glowing neon letters.
    Neon,
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
    River,
    Beach,
    Island,
    Cliff,
    Mountains,
    Hills,
    Forest,
    Flowers,
    City,
    Road,
    Snow,
    Desert,
    Clouds,
    ClearSky,
    Storm,
    Rain,
    Fog,
    Aurora,
    Rainbow,
    Neon,
    Underwater,
    Table,
    Abstract,
    /// Indoors: a room with walls and a floor.
    Room,
    Window,
    Fireplace,
    /// Bookshelves along the wall.
    Library,
    Kitchen,
}

impl Element {
    /// The canonical English name.
    pub fn name(self) -> &'static str {
        match self {
            E::Sun => "sun",
            E::Moon => "moon",
            E::Stars => "stars",
            E::Space => "space",
            E::Planet => "planet",
            E::Sea => "sea",
            E::Lake => "lake",
            E::River => "river",
            E::Beach => "beach",
            E::Island => "island",
            E::Cliff => "cliff",
            E::Mountains => "mountains",
            E::Hills => "hills",
            E::Forest => "forest",
            E::Flowers => "flowers",
            E::City => "city",
            E::Road => "road",
            E::Snow => "snow",
            E::Desert => "desert",
            E::Clouds => "clouds",
            E::ClearSky => "clear sky",
            E::Storm => "storm",
            E::Rain => "rain",
            E::Fog => "fog",
            E::Aurora => "aurora",
            E::Rainbow => "rainbow",
            E::Neon => "neon",
            E::Underwater => "underwater",
            E::Table => "table",
            E::Abstract => "abstract pattern",
            E::Room => "room",
            E::Window => "window",
            E::Fireplace => "fireplace",
            E::Library => "library",
            E::Kitchen => "kitchen",
        }
    }
}

/// Where a thing belongs in a scene.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Habitat {
    Ground,
    Water,
    Sky,
    Table,
    Underwater,
}

/// The things the painter can draw: variant, canonical English name (used in `scene.drawn`),
/// habitat, and how many a bare plural draws ("cats", "птицы").
macro_rules! things {
    ($($variant:ident => ($name:literal, $habitat:ident, $plural:literal)),* $(,)?) => {
        /// Things that are drawn as objects.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Thing {
            $($variant,)*
        }

        impl Thing {
            pub const ALL: &'static [Thing] = &[$(Thing::$variant,)*];

            /// The canonical English name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Thing::$variant => $name,)*
                }
            }

            pub fn habitat(self) -> Habitat {
                match self {
                    $(Thing::$variant => Habitat::$habitat,)*
                }
            }

            /// How many to draw for a bare plural ("cats", "птицы").
            pub fn plural_count(self) -> usize {
                match self {
                    $(Thing::$variant => $plural,)*
                }
            }
        }
    };
}

things! {
    Cat => ("cat", Ground, 3),
    Dog => ("dog", Ground, 3),
    Horse => ("horse", Ground, 3),
    Deer => ("deer", Ground, 3),
    Fox => ("fox", Ground, 3),
    Wolf => ("wolf", Ground, 3),
    Bear => ("bear", Ground, 3),
    Rabbit => ("rabbit", Ground, 3),
    Bird => ("bird", Ground, 5),
    Owl => ("owl", Ground, 3),
    Swan => ("swan", Water, 3),
    Duck => ("duck", Water, 3),
    Fish => ("fish", Underwater, 5),
    Whale => ("whale", Underwater, 3),
    Dolphin => ("dolphin", Underwater, 3),
    Butterfly => ("butterfly", Sky, 5),
    Person => ("person", Ground, 3),
    Tree => ("tree", Ground, 4),
    Pine => ("pine", Ground, 4),
    Palm => ("palm", Ground, 4),
    Birch => ("birch", Ground, 4),
    Sakura => ("sakura", Ground, 3),
    House => ("house", Ground, 3),
    Cabin => ("cabin", Ground, 3),
    Castle => ("castle", Ground, 3),
    Lighthouse => ("lighthouse", Ground, 3),
    Windmill => ("windmill", Ground, 3),
    Pagoda => ("pagoda", Ground, 3),
    Boat => ("boat", Water, 3),
    Ship => ("ship", Water, 3),
    Balloon => ("balloon", Sky, 4),
    Rocket => ("rocket", Sky, 3),
    Snowman => ("snowman", Ground, 3),
    Apple => ("apple", Table, 3),
    Orange => ("orange", Table, 3),
    Pear => ("pear", Table, 3),
    Banana => ("banana", Table, 3),
    Cherry => ("cherry", Table, 2),
    Lemon => ("lemon", Table, 3),
    Cup => ("cup", Table, 3),
    // Farm, wild and small animals, birds, sea life, insects.
    Cow => ("cow", Ground, 3),
    Pig => ("pig", Ground, 3),
    Sheep => ("sheep", Ground, 3),
    Goat => ("goat", Ground, 3),
    Chicken => ("chicken", Ground, 3),
    Elephant => ("elephant", Ground, 3),
    Lion => ("lion", Ground, 3),
    Tiger => ("tiger", Ground, 3),
    Giraffe => ("giraffe", Ground, 3),
    Zebra => ("zebra", Ground, 3),
    Monkey => ("monkey", Ground, 3),
    Penguin => ("penguin", Ground, 3),
    Turtle => ("turtle", Ground, 3),
    Frog => ("frog", Ground, 3),
    Snake => ("snake", Ground, 3),
    Mouse => ("mouse", Ground, 3),
    Squirrel => ("squirrel", Ground, 3),
    Hedgehog => ("hedgehog", Ground, 3),
    Parrot => ("parrot", Ground, 3),
    Eagle => ("eagle", Sky, 3),
    Bee => ("bee", Sky, 5),
    Shark => ("shark", Underwater, 3),
    Octopus => ("octopus", Underwater, 3),
    Crab => ("crab", Ground, 3),
    Jellyfish => ("jellyfish", Underwater, 5),
    // Fantasy and science fiction.
    Dragon => ("dragon", Ground, 3),
    Unicorn => ("unicorn", Ground, 3),
    Dinosaur => ("dinosaur", Ground, 3),
    Robot => ("robot", Ground, 3),
    Alien => ("alien", Ground, 3),
    Ghost => ("ghost", Ground, 3),
    Ufo => ("flying saucer", Sky, 3),
    // People by role (a person with the clothes and things that say so).
    Wizard => ("wizard", Ground, 3),
    Witch => ("witch", Ground, 3),
    Knight => ("knight", Ground, 3),
    Princess => ("princess", Ground, 3),
    Fairy => ("fairy", Ground, 3),
    Angel => ("angel", Ground, 3),
    Astronaut => ("astronaut", Ground, 3),
    Pirate => ("pirate", Ground, 3),
    Mermaid => ("mermaid", Water, 3),
    // Vehicles.
    Car => ("car", Ground, 3),
    Truck => ("truck", Ground, 3),
    Bus => ("bus", Ground, 3),
    Bicycle => ("bicycle", Ground, 3),
    Motorcycle => ("motorcycle", Ground, 3),
    Train => ("train", Ground, 1),
    Tractor => ("tractor", Ground, 3),
    Airplane => ("airplane", Sky, 3),
    Helicopter => ("helicopter", Sky, 3),
    Submarine => ("submarine", Underwater, 3),
    // Buildings.
    Church => ("church", Ground, 3),
    Tower => ("tower", Ground, 3),
    Tent => ("tent", Ground, 3),
    // Food and drink.
    Pizza => ("pizza", Table, 1),
    Burger => ("burger", Table, 3),
    Cake => ("cake", Table, 1),
    Bread => ("bread", Table, 3),
    IceCream => ("ice cream", Table, 3),
    Donut => ("donut", Table, 3),
    Bottle => ("bottle", Table, 3),
    Glass => ("wine glass", Table, 2),
    Bowl => ("bowl", Table, 3),
    Strawberry => ("strawberry", Table, 4),
    Watermelon => ("watermelon", Table, 1),
    Grapes => ("grapes", Table, 1),
    // Household things, furniture and instruments.
    Teapot => ("teapot", Table, 1),
    Candle => ("candle", Table, 3),
    Book => ("book", Table, 3),
    Vase => ("vase", Table, 2),
    Lamp => ("lamp", Table, 2),
    Laptop => ("laptop", Table, 1),
    Phone => ("phone", Table, 2),
    Clock => ("clock", Table, 1),
    Chair => ("chair", Ground, 3),
    Sofa => ("sofa", Ground, 1),
    Bench => ("bench", Ground, 2),
    Piano => ("piano", Ground, 1),
    Guitar => ("guitar", Ground, 3),
    Violin => ("violin", Ground, 3),
    Drum => ("drum", Ground, 3),
    Television => ("television", Ground, 1),
    Umbrella => ("umbrella", Ground, 3),
    Ball => ("ball", Ground, 3),
}

impl Thing {
    /// People drawn as a person in costume.
    pub fn is_person(self) -> bool {
        matches!(
            self,
            Thing::Person
                | Thing::Wizard
                | Thing::Witch
                | Thing::Knight
                | Thing::Princess
                | Thing::Fairy
                | Thing::Angel
                | Thing::Astronaut
                | Thing::Pirate
        )
    }

    /// Small enough to be held in a hand.
    pub fn holdable(self) -> bool {
        matches!(
            self,
            Thing::Umbrella
                | Thing::Balloon
                | Thing::Book
                | Thing::Guitar
                | Thing::Violin
                | Thing::Cup
                | Thing::Ball
                | Thing::Candle
                | Thing::Lamp
                | Thing::Phone
                | Thing::IceCream
                | Thing::Apple
                | Thing::Bottle
                | Thing::Glass
        )
    }

    /// Can be sat on.
    pub fn seat(self) -> bool {
        matches!(self, Thing::Bench | Thing::Chair | Thing::Sofa)
    }

    /// A small animal that sits on a seat when the prompt puts it there ("a cat on a sofa").
    pub fn sits_on_seats(self) -> bool {
        matches!(
            self,
            Thing::Cat
                | Thing::Dog
                | Thing::Rabbit
                | Thing::Fox
                | Thing::Bird
                | Thing::Owl
                | Thing::Parrot
                | Thing::Duck
                | Thing::Chicken
                | Thing::Mouse
                | Thing::Squirrel
                | Thing::Hedgehog
                | Thing::Monkey
                | Thing::Penguin
                | Thing::Frog
        )
    }

    /// Can carry a rider.
    pub fn rideable(self) -> bool {
        matches!(
            self,
            Thing::Horse
                | Thing::Unicorn
                | Thing::Bicycle
                | Thing::Motorcycle
                | Thing::Elephant
                | Thing::Dragon
        )
    }
}

/// Clothes and things worn that the painter draws on a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Garment {
    Dress,
    Coat,
    Hat,
    Scarf,
    Glasses,
    Crown,
    Cape,
}

impl Garment {
    pub fn name(self) -> &'static str {
        match self {
            Garment::Dress => "dress",
            Garment::Coat => "coat",
            Garment::Hat => "hat",
            Garment::Scarf => "scarf",
            Garment::Glasses => "glasses",
            Garment::Crown => "crown",
            Garment::Cape => "cape",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Age {
    Child,
    Adult,
    Old,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pose {
    Stand,
    Sit,
    Walk,
    Run,
    Ride,
    Play,
}

impl Pose {
    pub fn name(self) -> &'static str {
        match self {
            Pose::Stand => "standing",
            Pose::Sit => "sitting",
            Pose::Walk => "walking",
            Pose::Run => "running",
            Pose::Ride => "riding",
            Pose::Play => "playing",
        }
    }
}

/// Something to draw, how many, and in which colour if the prompt says; for people also hair,
/// clothes, age, pose and what they hold or ride.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Subject {
    pub thing: Thing,
    pub count: usize,
    pub color: Option<Rgb>,
    pub hair: Option<Rgb>,
    pub wear: Vec<(Garment, Option<Rgb>)>,
    pub age: Option<Age>,
    pub female: Option<bool>,
    pub pose: Option<Pose>,
    /// The subject (index) this one holds in its hand.
    pub holds: Option<usize>,
    /// The subject (index) this one rides.
    pub rides: Option<usize>,
    /// The subject (index) this one stands beside, in front of or behind.
    pub near: Option<(usize, Relation)>,
}

// The enum comes from `things!`, where a `#[default]` variant cannot be marked.
#[allow(clippy::derivable_impls)]
impl Default for Thing {
    fn default() -> Thing {
        Thing::Person
    }
}

/// A content word of the prompt and what the reader made of it, for `scene {drawn, not_drawn}`.
#[derive(Debug, Clone, PartialEq)]
pub enum Mention {
    Thing(Thing),
    Element(Element),
    Garment(Garment),
    Pose(Pose),
    /// A subject the reader knows by name but the painter has no drawing for (English name).
    Concept(&'static str),
    /// A word the reader does not know, as written.
    Unknown(String),
}

/// What a colour word applies to: the element or thing named right after it ("green hills",
/// "red sky", "a black cat"), or the whole picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Any,
    Sky,
    Land,
    Water,
    /// The subject with this index.
    Subject(usize),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Word {
    Time(Time),
    Element(Element),
    Thing(Thing),
    Color(Rgb),
    /// "sky": only a target for colours.
    Sky,
    /// "landscape": the whole picture (a colour before it applies everywhere).
    Scene,
    /// black/dark: a colour for a thing right after it, otherwise darkens the picture.
    Darker,
    /// white/pale: a colour for a thing right after it, otherwise lightens the picture.
    Lighter,
    Count(u8),
    Season(Season),
    Mood(Mood),
    Style(Style),
    Place(Place),
    Bigger,
    Smaller,
    Phase(Phase),
    Flying,
    /// sign, signboard, billboard: quoted text goes on a sign.
    Sign,
    /// poster, placard: a poster (flat style unless another is named).
    Poster,
    /// A known word that must not be taken for another one ("горизонт" is not "гор").
    Ignore,
    /// A subject the painter has no drawing for, by its English name.
    Concept(&'static str),
    /// Clothes: a colour right before it colours the garment.
    Wear(Garment),
    /// "hair", "haired": a colour right before it colours the hair.
    Hair,
    /// A hair colour word of its own ("blonde", "рыжая").
    HairColor(Rgb),
    Age(Age),
    Pose(Pose),
    /// "with", "holding", "с": the next small thing is in the last person's hand.
    Hold,
    /// "on", "riding", "верхом": the next mount carries the last person.
    Mount,
    /// "next to", "in front of", "behind": where the next thing stands against the last one.
    Near(Relation),
    /// "aerial view", "from below": where the picture is seen from.
    View(View),
}

/// Where one thing stands against another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Beside,
    /// Nearer to the viewer, overlapping the other.
    InFront,
    /// Farther, partly hidden by the other.
    Behind,
}

/// Where the picture is seen from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// From above: a high horizon, the land fills the picture, things smaller.
    Aerial,
    /// From below: a low horizon, a big sky, things larger.
    Low,
}

use Element as E;
use Thing as T;
use Word as W;

/// Word patterns: a trailing `*` matches any ending, a trailing `~` a Russian adjective ending
/// ("сер~" is серый, серая, серым… but not сердце). Exact English thing words also match their
/// plural in -s/-es. The longest matching pattern wins; at equal length an exact word wins.
const WORDS: &[(&str, Word)] = &[
    // Time of day.
    ("sunset*", W::Time(Time::Golden)),
    ("sunrise*", W::Time(Time::Golden)),
    ("dawn*", W::Time(Time::Golden)),
    ("dusk*", W::Time(Time::Golden)),
    ("evening*", W::Time(Time::Golden)),
    ("twilight*", W::Time(Time::Golden)),
    ("golden", W::Time(Time::Golden)),
    ("setting", W::Time(Time::Golden)),
    ("заходящ~", W::Time(Time::Golden)),
    ("восходящ~", W::Time(Time::Golden)),
    ("закат*", W::Time(Time::Golden)),
    ("рассвет*", W::Time(Time::Golden)),
    ("восход*", W::Time(Time::Golden)),
    ("вечер*", W::Time(Time::Golden)),
    ("сумерк*", W::Time(Time::Golden)),
    ("заря", W::Time(Time::Golden)),
    ("зари", W::Time(Time::Golden)),
    ("зарей", W::Time(Time::Golden)),
    ("night*", W::Time(Time::Night)),
    ("midnight", W::Time(Time::Night)),
    ("nocturn*", W::Time(Time::Night)),
    ("moonlit", W::Time(Time::Night)),
    ("ночь*", W::Time(Time::Night)),
    ("ночн*", W::Time(Time::Night)),
    ("ночью", W::Time(Time::Night)),
    ("полночь", W::Time(Time::Night)),
    ("day", W::Time(Time::Day)),
    ("daytime", W::Time(Time::Day)),
    ("daylight", W::Time(Time::Day)),
    ("noon", W::Time(Time::Day)),
    ("midday", W::Time(Time::Day)),
    ("morning", W::Time(Time::Day)),
    ("afternoon", W::Time(Time::Day)),
    ("sunny", W::Time(Time::Day)),
    ("день", W::Time(Time::Day)),
    ("днем", W::Time(Time::Day)),
    ("дневн*", W::Time(Time::Day)),
    ("полдень", W::Time(Time::Day)),
    ("утр*", W::Time(Time::Day)),
    ("солнечн*", W::Time(Time::Day)),
    // Seasons.
    ("spring", W::Season(Season::Spring)),
    ("springtime", W::Season(Season::Spring)),
    ("весн*", W::Season(Season::Spring)),
    ("весенн*", W::Season(Season::Spring)),
    ("summer*", W::Season(Season::Summer)),
    ("лето", W::Season(Season::Summer)),
    ("летом", W::Season(Season::Summer)),
    ("летн*", W::Season(Season::Summer)),
    ("autumn*", W::Season(Season::Autumn)),
    ("fall", W::Season(Season::Autumn)),
    ("осен*", W::Season(Season::Autumn)),
    ("листопад*", W::Season(Season::Autumn)),
    ("winter*", W::Season(Season::Winter)),
    ("зим*", W::Season(Season::Winter)),
    // Sky objects.
    ("sun", W::Element(E::Sun)),
    ("suns", W::Element(E::Sun)),
    ("sunlight", W::Element(E::Sun)),
    ("sunshine", W::Element(E::Sun)),
    ("солнц*", W::Element(E::Sun)),
    ("moon*", W::Element(E::Moon)),
    ("lunar", W::Element(E::Moon)),
    ("луна", W::Element(E::Moon)),
    ("луны", W::Element(E::Moon)),
    ("луну", W::Element(E::Moon)),
    ("луной", W::Element(E::Moon)),
    ("лунн*", W::Element(E::Moon)),
    ("месяц*", W::Element(E::Moon)),
    ("полумесяц*", W::Phase(Phase::Crescent)),
    ("crescent", W::Phase(Phase::Crescent)),
    ("full", W::Phase(Phase::Full)),
    ("полн~", W::Phase(Phase::Full)),
    ("полнолуни*", W::Phase(Phase::Full)),
    ("half", W::Phase(Phase::Half)),
    ("star", W::Element(E::Stars)),
    ("stars", W::Element(E::Stars)),
    ("starry", W::Element(E::Stars)),
    ("starlight", W::Element(E::Stars)),
    ("звезд*", W::Element(E::Stars)),
    ("звездн*", W::Element(E::Stars)),
    ("space", W::Element(E::Space)),
    ("outer", W::Element(E::Space)),
    ("galax*", W::Element(E::Space)),
    ("nebula*", W::Element(E::Space)),
    ("cosm*", W::Element(E::Space)),
    ("universe", W::Element(E::Space)),
    ("astronaut*", W::Element(E::Space)),
    ("космос*", W::Element(E::Space)),
    ("космич*", W::Element(E::Space)),
    ("галакт*", W::Element(E::Space)),
    ("туманност*", W::Element(E::Space)),
    ("вселенн*", W::Element(E::Space)),
    ("planet*", W::Element(E::Planet)),
    ("saturn", W::Element(E::Planet)),
    ("jupiter", W::Element(E::Planet)),
    ("mars", W::Element(E::Planet)),
    ("планет*", W::Element(E::Planet)),
    ("сатурн*", W::Element(E::Planet)),
    ("юпитер*", W::Element(E::Planet)),
    ("aurora*", W::Element(E::Aurora)),
    ("borealis", W::Element(E::Aurora)),
    ("сияни*", W::Element(E::Aurora)),
    ("аврор*", W::Element(E::Aurora)),
    ("rainbow*", W::Element(E::Rainbow)),
    ("радуг*", W::Element(E::Rainbow)),
    // Water.
    ("sea", W::Element(E::Sea)),
    ("seas", W::Element(E::Sea)),
    ("seascape", W::Element(E::Sea)),
    ("seaside", W::Element(E::Sea)),
    ("ocean*", W::Element(E::Sea)),
    ("water*", W::Element(E::Sea)),
    ("wave*", W::Element(E::Sea)),
    ("bay", W::Element(E::Sea)),
    ("harbor*", W::Element(E::Sea)),
    ("harbour*", W::Element(E::Sea)),
    ("море", W::Element(E::Sea)),
    ("моря", W::Element(E::Sea)),
    ("морем", W::Element(E::Sea)),
    ("морю", W::Element(E::Sea)),
    ("морск*", W::Element(E::Sea)),
    ("океан*", W::Element(E::Sea)),
    ("вод*", W::Element(E::Sea)),
    ("волн*", W::Element(E::Sea)),
    ("гаван*", W::Element(E::Sea)),
    ("lake*", W::Element(E::Lake)),
    ("pond*", W::Element(E::Lake)),
    ("reflection*", W::Element(E::Lake)),
    ("озер*", W::Element(E::Lake)),
    ("пруд*", W::Element(E::Lake)),
    ("отражен*", W::Element(E::Lake)),
    ("river*", W::Element(E::River)),
    ("stream", W::Element(E::River)),
    ("creek", W::Element(E::River)),
    ("река", W::Element(E::River)),
    ("реки", W::Element(E::River)),
    ("реку", W::Element(E::River)),
    ("рекой", W::Element(E::River)),
    ("реке", W::Element(E::River)),
    ("речк*", W::Element(E::River)),
    ("ручей", W::Element(E::River)),
    ("ручья", W::Element(E::River)),
    ("beach*", W::Element(E::Beach)),
    ("coast*", W::Element(E::Beach)),
    ("shore*", W::Element(E::Beach)),
    ("tropic*", W::Element(E::Beach)),
    ("пляж*", W::Element(E::Beach)),
    ("берег*", W::Element(E::Beach)),
    ("побереж*", W::Element(E::Beach)),
    ("тропическ*", W::Element(E::Beach)),
    ("island*", W::Element(E::Island)),
    ("isle", W::Element(E::Island)),
    ("остров*", W::Element(E::Island)),
    ("underwater", W::Element(E::Underwater)),
    ("undersea", W::Element(E::Underwater)),
    ("coral*", W::Element(E::Underwater)),
    ("reef*", W::Element(E::Underwater)),
    ("aquarium*", W::Element(E::Underwater)),
    ("подводн*", W::Element(E::Underwater)),
    ("коралл*", W::Element(E::Underwater)),
    ("риф", W::Element(E::Underwater)),
    ("рифы", W::Element(E::Underwater)),
    ("аквариум*", W::Element(E::Underwater)),
    // Land.
    ("mountain*", W::Element(E::Mountains)),
    ("alps", W::Element(E::Mountains)),
    ("alpine", W::Element(E::Mountains)),
    ("peak*", W::Element(E::Mountains)),
    ("volcano*", W::Element(E::Mountains)),
    ("canyon*", W::Element(E::Mountains)),
    ("rock*", W::Element(E::Mountains)),
    ("гор", W::Element(E::Mountains)),
    ("гора", W::Element(E::Mountains)),
    ("горы", W::Element(E::Mountains)),
    ("горах", W::Element(E::Mountains)),
    ("горами", W::Element(E::Mountains)),
    ("гору", W::Element(E::Mountains)),
    ("горн*", W::Element(E::Mountains)),
    ("вершин*", W::Element(E::Mountains)),
    ("скал*", W::Element(E::Mountains)),
    ("альп*", W::Element(E::Mountains)),
    ("вулкан*", W::Element(E::Mountains)),
    ("горизонт*", W::Ignore),
    ("горяч*", W::Ignore),
    ("cliff*", W::Element(E::Cliff)),
    ("headland", W::Element(E::Cliff)),
    ("утес*", W::Element(E::Cliff)),
    ("обрыв*", W::Element(E::Cliff)),
    ("hill*", W::Element(E::Hills)),
    ("meadow*", W::Element(E::Hills)),
    ("field*", W::Element(E::Hills)),
    ("valley*", W::Element(E::Hills)),
    ("grass*", W::Element(E::Hills)),
    ("prairie", W::Element(E::Hills)),
    ("countryside", W::Element(E::Hills)),
    ("farm*", W::Element(E::Hills)),
    ("landscape*", W::Scene),
    ("scenery", W::Scene),
    ("холм*", W::Element(E::Hills)),
    ("луг*", W::Element(E::Hills)),
    ("поле", W::Element(E::Hills)),
    ("поля", W::Element(E::Hills)),
    ("полем", W::Element(E::Hills)),
    ("полях", W::Element(E::Hills)),
    ("долин*", W::Element(E::Hills)),
    ("трав*", W::Element(E::Hills)),
    ("деревн*", W::Element(E::Hills)),
    ("пейзаж*", W::Scene),
    ("sky", W::Sky),
    ("skies", W::Sky),
    ("небо", W::Sky),
    ("неба", W::Sky),
    ("небом", W::Sky),
    ("небе", W::Sky),
    ("небес*", W::Sky),
    ("forest*", W::Element(E::Forest)),
    ("wood", W::Element(E::Forest)),
    ("woods", W::Element(E::Forest)),
    ("woodland*", W::Element(E::Forest)),
    ("jungle*", W::Element(E::Forest)),
    ("taiga", W::Element(E::Forest)),
    ("лес", W::Element(E::Forest)),
    ("леса", W::Element(E::Forest)),
    ("лесу", W::Element(E::Forest)),
    ("лесом", W::Element(E::Forest)),
    ("лесн*", W::Element(E::Forest)),
    ("чащ*", W::Element(E::Forest)),
    ("тайг*", W::Element(E::Forest)),
    ("джунгл*", W::Element(E::Forest)),
    ("flower*", W::Element(E::Flowers)),
    ("blossom*", W::Element(E::Flowers)),
    ("bloom*", W::Element(E::Flowers)),
    ("tulip*", W::Element(E::Flowers)),
    ("popp*", W::Element(E::Flowers)),
    ("sunflower*", W::Element(E::Flowers)),
    ("dais*", W::Element(E::Flowers)),
    ("garden*", W::Element(E::Flowers)),
    ("цветы", W::Element(E::Flowers)),
    ("цветов", W::Element(E::Flowers)),
    ("цветами", W::Element(E::Flowers)),
    ("цветах", W::Element(E::Flowers)),
    ("цветок", W::Element(E::Flowers)),
    ("цветочн*", W::Element(E::Flowers)),
    ("цветущ*", W::Element(E::Flowers)),
    ("тюльпан*", W::Element(E::Flowers)),
    ("маки", W::Element(E::Flowers)),
    ("маков", W::Element(E::Flowers)),
    ("подсолнух*", W::Element(E::Flowers)),
    ("ромашк*", W::Element(E::Flowers)),
    ("сад", W::Element(E::Flowers)),
    ("саду", W::Element(E::Flowers)),
    ("сада", W::Element(E::Flowers)),
    ("city", W::Element(E::City)),
    ("cities", W::Element(E::City)),
    ("cityscape", W::Element(E::City)),
    ("town*", W::Element(E::City)),
    ("skyline*", W::Element(E::City)),
    ("skyscraper*", W::Element(E::City)),
    ("building*", W::Element(E::City)),
    ("urban", W::Element(E::City)),
    ("downtown", W::Element(E::City)),
    ("metropol*", W::Element(E::City)),
    ("город*", W::Element(E::City)),
    ("мегаполис*", W::Element(E::City)),
    ("небоскреб*", W::Element(E::City)),
    ("здани*", W::Element(E::City)),
    ("улиц*", W::Element(E::City)),
    ("street*", W::Element(E::Road)),
    ("road*", W::Element(E::Road)),
    ("highway*", W::Element(E::Road)),
    ("path", W::Element(E::Road)),
    ("pathway", W::Element(E::Road)),
    ("trail*", W::Element(E::Road)),
    ("дорог*", W::Element(E::Road)),
    ("тропинк*", W::Element(E::Road)),
    ("тропа", W::Element(E::Road)),
    ("шоссе", W::Element(E::Road)),
    ("neon*", W::Element(E::Neon)),
    ("cyberpunk", W::Element(E::Neon)),
    ("неон*", W::Element(E::Neon)),
    ("киберпанк*", W::Element(E::Neon)),
    ("snow*", W::Element(E::Snow)),
    ("ice", W::Element(E::Snow)),
    ("icy", W::Element(E::Snow)),
    ("frozen", W::Element(E::Snow)),
    ("frost*", W::Element(E::Snow)),
    ("arctic", W::Element(E::Snow)),
    ("christmas", W::Element(E::Snow)),
    ("снег*", W::Element(E::Snow)),
    ("снеж*", W::Element(E::Snow)),
    ("лед", W::Element(E::Snow)),
    ("ледян*", W::Element(E::Snow)),
    ("мороз*", W::Element(E::Snow)),
    ("desert*", W::Element(E::Desert)),
    ("dune*", W::Element(E::Desert)),
    ("sand*", W::Element(E::Desert)),
    ("sahara", W::Element(E::Desert)),
    ("пустын*", W::Element(E::Desert)),
    ("дюн*", W::Element(E::Desert)),
    ("песо*", W::Element(E::Desert)),
    ("песк*", W::Element(E::Desert)),
    ("песчан*", W::Element(E::Desert)),
    ("table*", W::Element(E::Table)),
    // Rooms.
    ("room", W::Element(E::Room)),
    ("interior", W::Element(E::Room)),
    ("indoors", W::Element(E::Room)),
    ("living room", W::Element(E::Room)),
    ("bedroom", W::Element(E::Room)),
    ("комнат*", W::Element(E::Room)),
    ("интерьер*", W::Element(E::Room)),
    ("гостин*", W::Element(E::Room)),
    ("спальн*", W::Element(E::Room)),
    ("window", W::Element(E::Window)),
    ("окно", W::Element(E::Window)),
    ("окном", W::Element(E::Window)),
    ("окне", W::Element(E::Window)),
    ("fireplace*", W::Element(E::Fireplace)),
    ("hearth", W::Element(E::Fireplace)),
    ("камин*", W::Element(E::Fireplace)),
    ("library", W::Element(E::Library)),
    ("bookshel*", W::Element(E::Library)),
    ("bookcase*", W::Element(E::Library)),
    ("библиотек*", W::Element(E::Library)),
    ("kitchen*", W::Element(E::Kitchen)),
    ("кухн*", W::Element(E::Kitchen)),
    ("desk", W::Element(E::Table)),
    ("still life", W::Element(E::Table)),
    ("still", W::Mood(Mood::Calm)),
    ("стол", W::Element(E::Table)),
    ("стола", W::Element(E::Table)),
    ("столе", W::Element(E::Table)),
    ("столом", W::Element(E::Table)),
    ("столик*", W::Element(E::Table)),
    ("натюрморт*", W::Element(E::Table)),
    // Weather.
    ("cloud*", W::Element(E::Clouds)),
    ("overcast", W::Element(E::Clouds)),
    ("облак*", W::Element(E::Clouds)),
    ("облачн*", W::Element(E::Clouds)),
    ("туч*", W::Element(E::Clouds)),
    ("clear", W::Element(E::ClearSky)),
    ("cloudless", W::Element(E::ClearSky)),
    ("ясн*", W::Element(E::ClearSky)),
    ("безоблачн*", W::Element(E::ClearSky)),
    ("storm*", W::Element(E::Storm)),
    ("thunder*", W::Element(E::Storm)),
    ("lightning*", W::Element(E::Storm)),
    ("шторм*", W::Element(E::Storm)),
    ("гроз*", W::Element(E::Storm)),
    ("молни*", W::Element(E::Storm)),
    ("буря", W::Element(E::Storm)),
    ("бури", W::Element(E::Storm)),
    ("бурю", W::Element(E::Storm)),
    ("rain", W::Element(E::Rain)),
    ("rains", W::Element(E::Rain)),
    ("rainy", W::Element(E::Rain)),
    ("raining", W::Element(E::Rain)),
    ("rainfall", W::Element(E::Rain)),
    ("drizzle", W::Element(E::Rain)),
    ("downpour", W::Element(E::Rain)),
    ("дожд*", W::Element(E::Rain)),
    ("ливен*", W::Element(E::Rain)),
    ("ливн*", W::Element(E::Rain)),
    ("fog*", W::Element(E::Fog)),
    ("mist*", W::Element(E::Fog)),
    ("haze", W::Element(E::Fog)),
    ("hazy", W::Element(E::Fog)),
    ("туман", W::Element(E::Fog)),
    ("тумана", W::Element(E::Fog)),
    ("туманом", W::Element(E::Fog)),
    ("туманн*", W::Element(E::Fog)),
    ("дымк*", W::Element(E::Fog)),
    ("abstract*", W::Element(E::Abstract)),
    ("pattern*", W::Element(E::Abstract)),
    ("fractal*", W::Element(E::Abstract)),
    ("абстракт*", W::Element(E::Abstract)),
    ("узор*", W::Element(E::Abstract)),
    // Animals.
    ("cat", W::Thing(T::Cat)),
    ("kitten", W::Thing(T::Cat)),
    ("kitty", W::Thing(T::Cat)),
    ("kitties", W::Thing(T::Cat)),
    ("кот", W::Thing(T::Cat)),
    ("кота", W::Thing(T::Cat)),
    ("коту", W::Thing(T::Cat)),
    ("котом", W::Thing(T::Cat)),
    ("коты", W::Thing(T::Cat)),
    ("котов", W::Thing(T::Cat)),
    ("котик*", W::Thing(T::Cat)),
    ("котен*", W::Thing(T::Cat)),
    ("котят*", W::Thing(T::Cat)),
    ("кошк*", W::Thing(T::Cat)),
    ("кошек", W::Thing(T::Cat)),
    ("котор*", W::Ignore),
    ("dog", W::Thing(T::Dog)),
    ("puppy", W::Thing(T::Dog)),
    ("puppies", W::Thing(T::Dog)),
    ("doggo", W::Thing(T::Dog)),
    ("hound", W::Thing(T::Dog)),
    ("собак*", W::Thing(T::Dog)),
    ("собач*", W::Thing(T::Dog)),
    ("пес", W::Thing(T::Dog)),
    ("пса", W::Thing(T::Dog)),
    ("псы", W::Thing(T::Dog)),
    ("песик*", W::Thing(T::Dog)),
    ("щен*", W::Thing(T::Dog)),
    ("horse", W::Thing(T::Horse)),
    ("pony", W::Thing(T::Horse)),
    ("ponies", W::Thing(T::Horse)),
    ("stallion", W::Thing(T::Horse)),
    ("mare", W::Thing(T::Horse)),
    ("лошад*", W::Thing(T::Horse)),
    ("лошадк*", W::Thing(T::Horse)),
    ("конь", W::Thing(T::Horse)),
    ("коня", W::Thing(T::Horse)),
    ("кони", W::Thing(T::Horse)),
    ("конем", W::Thing(T::Horse)),
    ("коней", W::Thing(T::Horse)),
    ("пони", W::Thing(T::Horse)),
    ("deer", W::Thing(T::Deer)),
    ("reindeer", W::Thing(T::Deer)),
    ("elk", W::Thing(T::Deer)),
    ("moose", W::Thing(T::Deer)),
    ("stag", W::Thing(T::Deer)),
    ("олен*", W::Thing(T::Deer)),
    ("лось", W::Thing(T::Deer)),
    ("лося", W::Thing(T::Deer)),
    ("fox", W::Thing(T::Fox)),
    ("лиса", W::Thing(T::Fox)),
    ("лисы", W::Thing(T::Fox)),
    ("лису", W::Thing(T::Fox)),
    ("лисой", W::Thing(T::Fox)),
    ("лисиц*", W::Thing(T::Fox)),
    ("лисен*", W::Thing(T::Fox)),
    ("лисич*", W::Thing(T::Fox)),
    ("лист*", W::Ignore),
    ("wolf", W::Thing(T::Wolf)),
    ("wolves", W::Thing(T::Wolf)),
    ("волк*", W::Thing(T::Wolf)),
    ("волч*", W::Thing(T::Wolf)),
    ("bear", W::Thing(T::Bear)),
    ("медвед*", W::Thing(T::Bear)),
    ("мишк*", W::Thing(T::Bear)),
    ("rabbit", W::Thing(T::Rabbit)),
    ("bunny", W::Thing(T::Rabbit)),
    ("bunnies", W::Thing(T::Rabbit)),
    ("hare", W::Thing(T::Rabbit)),
    ("заяц", W::Thing(T::Rabbit)),
    ("зайц*", W::Thing(T::Rabbit)),
    ("зайк*", W::Thing(T::Rabbit)),
    ("зайчик*", W::Thing(T::Rabbit)),
    ("кролик*", W::Thing(T::Rabbit)),
    ("bird", W::Thing(T::Bird)),
    ("birdie", W::Thing(T::Bird)),
    ("seagull", W::Thing(T::Bird)),
    ("gull", W::Thing(T::Bird)),
    ("crow", W::Thing(T::Bird)),
    ("raven", W::Thing(T::Bird)),
    ("sparrow", W::Thing(T::Bird)),
    ("robin", W::Thing(T::Bird)),
    ("flock", W::Thing(T::Bird)),
    ("птиц*", W::Thing(T::Bird)),
    ("птах*", W::Thing(T::Bird)),
    ("птичк*", W::Thing(T::Bird)),
    ("воробь*", W::Thing(T::Bird)),
    ("воробей", W::Thing(T::Bird)),
    ("ворон*", W::Thing(T::Bird)),
    ("чайк*", W::Thing(T::Bird)),
    ("голубь", W::Thing(T::Bird)),
    ("голуби", W::Thing(T::Bird)),
    ("голубей", W::Thing(T::Bird)),
    ("стая", W::Thing(T::Bird)),
    ("стаю", W::Thing(T::Bird)),
    ("owl", W::Thing(T::Owl)),
    ("owlet", W::Thing(T::Owl)),
    ("сова", W::Thing(T::Owl)),
    ("совы", W::Thing(T::Owl)),
    ("сову", W::Thing(T::Owl)),
    ("совой", W::Thing(T::Owl)),
    ("совушк*", W::Thing(T::Owl)),
    ("совен*", W::Thing(T::Owl)),
    ("филин*", W::Thing(T::Owl)),
    ("swan", W::Thing(T::Swan)),
    ("лебед*", W::Thing(T::Swan)),
    ("duck", W::Thing(T::Duck)),
    ("duckling", W::Thing(T::Duck)),
    ("утк*", W::Thing(T::Duck)),
    ("уточк*", W::Thing(T::Duck)),
    ("утят*", W::Thing(T::Duck)),
    ("утен*", W::Thing(T::Duck)),
    ("fish", W::Thing(T::Fish)),
    ("fishes", W::Thing(T::Fish)),
    ("goldfish", W::Thing(T::Fish)),
    ("koi", W::Thing(T::Fish)),
    ("рыб*", W::Thing(T::Fish)),
    ("рыбк*", W::Thing(T::Fish)),
    ("whale", W::Thing(T::Whale)),
    ("orca", W::Thing(T::Whale)),
    ("кит", W::Thing(T::Whale)),
    ("кита", W::Thing(T::Whale)),
    ("киты", W::Thing(T::Whale)),
    ("китов", W::Thing(T::Whale)),
    ("китом", W::Thing(T::Whale)),
    ("касатк*", W::Thing(T::Whale)),
    ("dolphin", W::Thing(T::Dolphin)),
    ("дельфин*", W::Thing(T::Dolphin)),
    ("butterfly", W::Thing(T::Butterfly)),
    ("butterflies", W::Thing(T::Butterfly)),
    ("moth", W::Thing(T::Butterfly)),
    ("бабочк*", W::Thing(T::Butterfly)),
    ("бабочек", W::Thing(T::Butterfly)),
    ("мотыл*", W::Thing(T::Butterfly)),
    ("person", W::Thing(T::Person)),
    ("people", W::Thing(T::Person)),
    ("man", W::Thing(T::Person)),
    ("men", W::Thing(T::Person)),
    ("woman", W::Thing(T::Person)),
    ("women", W::Thing(T::Person)),
    ("girl", W::Thing(T::Person)),
    ("boy", W::Thing(T::Person)),
    ("child", W::Thing(T::Person)),
    ("children", W::Thing(T::Person)),
    ("kid", W::Thing(T::Person)),
    ("traveler", W::Thing(T::Person)),
    ("traveller", W::Thing(T::Person)),
    ("hiker", W::Thing(T::Person)),
    ("wanderer", W::Thing(T::Person)),
    ("человек", W::Thing(T::Person)),
    ("человека", W::Thing(T::Person)),
    ("люди", W::Thing(T::Person)),
    ("людей", W::Thing(T::Person)),
    ("девушк*", W::Thing(T::Person)),
    ("женщин*", W::Thing(T::Person)),
    ("мужчин*", W::Thing(T::Person)),
    ("парень", W::Thing(T::Person)),
    ("мальчик*", W::Thing(T::Person)),
    ("девочк*", W::Thing(T::Person)),
    ("ребен*", W::Thing(T::Person)),
    ("дети", W::Thing(T::Person)),
    ("путник*", W::Thing(T::Person)),
    ("путешественник*", W::Thing(T::Person)),
    // Trees.
    ("tree", W::Thing(T::Tree)),
    ("oak", W::Thing(T::Tree)),
    ("maple", W::Thing(T::Tree)),
    ("willow", W::Thing(T::Tree)),
    ("apple tree", W::Thing(T::Tree)),
    ("дерев*", W::Thing(T::Tree)),
    ("дуб", W::Thing(T::Tree)),
    ("дуба", W::Thing(T::Tree)),
    ("дубы", W::Thing(T::Tree)),
    ("клен*", W::Thing(T::Tree)),
    ("pine", W::Thing(T::Pine)),
    ("fir", W::Thing(T::Pine)),
    ("spruce", W::Thing(T::Pine)),
    ("conifer*", W::Thing(T::Pine)),
    ("christmas tree", W::Thing(T::Pine)),
    ("ель", W::Thing(T::Pine)),
    ("ели", W::Thing(T::Pine)),
    ("елей", W::Thing(T::Pine)),
    ("елк*", W::Thing(T::Pine)),
    ("елочк*", W::Thing(T::Pine)),
    ("сосн*", W::Thing(T::Pine)),
    ("palm", W::Thing(T::Palm)),
    ("palm tree", W::Thing(T::Palm)),
    ("palm trees", W::Thing(T::Palm)),
    ("pine tree", W::Thing(T::Pine)),
    ("pine trees", W::Thing(T::Pine)),
    ("fir tree", W::Thing(T::Pine)),
    ("fir trees", W::Thing(T::Pine)),
    ("christmas trees", W::Thing(T::Pine)),
    ("birch tree", W::Thing(T::Birch)),
    ("birch trees", W::Thing(T::Birch)),
    ("oak tree", W::Thing(T::Tree)),
    ("oak trees", W::Thing(T::Tree)),
    ("cherry tree", W::Thing(T::Sakura)),
    ("cherry trees", W::Thing(T::Sakura)),
    ("apple trees", W::Thing(T::Tree)),
    ("palms", W::Thing(T::Palm)),
    ("пальм*", W::Thing(T::Palm)),
    ("birch", W::Thing(T::Birch)),
    ("birches", W::Thing(T::Birch)),
    ("берез*", W::Thing(T::Birch)),
    ("sakura", W::Thing(T::Sakura)),
    ("cherry blossom", W::Thing(T::Sakura)),
    ("сакур*", W::Thing(T::Sakura)),
    // Buildings.
    ("house", W::Thing(T::House)),
    ("home", W::Thing(T::House)),
    ("cottage", W::Thing(T::House)),
    ("village", W::Thing(T::House)),
    ("villa", W::Thing(T::House)),
    ("дом", W::Thing(T::House)),
    ("дома", W::Thing(T::House)),
    ("доме", W::Thing(T::House)),
    ("домом", W::Thing(T::House)),
    ("домов", W::Thing(T::House)),
    ("домик*", W::Thing(T::House)),
    ("коттедж*", W::Thing(T::House)),
    ("cabin", W::Thing(T::Cabin)),
    ("hut", W::Thing(T::Cabin)),
    ("lodge", W::Thing(T::Cabin)),
    ("chalet", W::Thing(T::Cabin)),
    ("хижин*", W::Thing(T::Cabin)),
    ("избушк*", W::Thing(T::Cabin)),
    ("изба", W::Thing(T::Cabin)),
    ("избу", W::Thing(T::Cabin)),
    ("сруб*", W::Thing(T::Cabin)),
    ("castle", W::Thing(T::Castle)),
    ("fortress", W::Thing(T::Castle)),
    ("palace", W::Thing(T::Castle)),
    ("kingdom", W::Thing(T::Castle)),
    ("замок", W::Thing(T::Castle)),
    ("замка", W::Thing(T::Castle)),
    ("замки", W::Thing(T::Castle)),
    ("замком", W::Thing(T::Castle)),
    ("крепост*", W::Thing(T::Castle)),
    ("дворец", W::Thing(T::Castle)),
    ("дворца", W::Thing(T::Castle)),
    ("lighthouse", W::Thing(T::Lighthouse)),
    ("beacon", W::Thing(T::Lighthouse)),
    ("маяк*", W::Thing(T::Lighthouse)),
    ("windmill", W::Thing(T::Windmill)),
    ("mill", W::Thing(T::Windmill)),
    ("мельниц*", W::Thing(T::Windmill)),
    ("pagoda", W::Thing(T::Pagoda)),
    ("temple", W::Thing(T::Pagoda)),
    ("shrine", W::Thing(T::Pagoda)),
    ("пагод*", W::Thing(T::Pagoda)),
    ("храм*", W::Thing(T::Pagoda)),
    // Vehicles.
    ("boat", W::Thing(T::Boat)),
    ("sailboat", W::Thing(T::Boat)),
    ("yacht", W::Thing(T::Boat)),
    ("canoe", W::Thing(T::Boat)),
    ("sail", W::Thing(T::Boat)),
    ("лодк*", W::Thing(T::Boat)),
    ("лодок", W::Thing(T::Boat)),
    ("лодочк*", W::Thing(T::Boat)),
    ("яхт*", W::Thing(T::Boat)),
    ("парус*", W::Thing(T::Boat)),
    ("ship", W::Thing(T::Ship)),
    ("galleon", W::Thing(T::Ship)),
    ("корабл*", W::Thing(T::Ship)),
    ("судно", W::Thing(T::Ship)),
    ("фрегат*", W::Thing(T::Ship)),
    ("balloon", W::Thing(T::Balloon)),
    ("air balloon", W::Thing(T::Balloon)),
    ("шар", W::Thing(T::Balloon)),
    ("шары", W::Thing(T::Balloon)),
    ("шаров", W::Thing(T::Balloon)),
    ("шарик*", W::Thing(T::Balloon)),
    ("аэростат*", W::Thing(T::Balloon)),
    ("rocket", W::Thing(T::Rocket)),
    ("spaceship", W::Thing(T::Rocket)),
    ("spacecraft", W::Thing(T::Rocket)),
    ("ракет*", W::Thing(T::Rocket)),
    ("звездолет*", W::Thing(T::Rocket)),
    ("snowman", W::Thing(T::Snowman)),
    ("snowmen", W::Thing(T::Snowman)),
    ("снеговик*", W::Thing(T::Snowman)),
    // Still life.
    ("apple", W::Thing(T::Apple)),
    ("яблок*", W::Thing(T::Apple)),
    ("яблоч*", W::Thing(T::Apple)),
    ("orange", W::Thing(T::Orange)),
    ("tangerine", W::Thing(T::Orange)),
    ("апельсин*", W::Thing(T::Orange)),
    ("мандарин*", W::Thing(T::Orange)),
    ("pear", W::Thing(T::Pear)),
    ("груш*", W::Thing(T::Pear)),
    ("banana", W::Thing(T::Banana)),
    ("банан*", W::Thing(T::Banana)),
    ("cherry", W::Thing(T::Cherry)),
    ("cherries", W::Thing(T::Cherry)),
    ("вишн*", W::Thing(T::Cherry)),
    ("вишен", W::Thing(T::Cherry)),
    ("черешн*", W::Thing(T::Cherry)),
    ("lemon", W::Thing(T::Lemon)),
    ("lime", W::Thing(T::Lemon)),
    ("лимон*", W::Thing(T::Lemon)),
    ("cup", W::Thing(T::Cup)),
    ("mug", W::Thing(T::Cup)),
    ("coffee", W::Thing(T::Cup)),
    ("tea", W::Thing(T::Cup)),
    ("latte", W::Thing(T::Cup)),
    ("cappuccino", W::Thing(T::Cup)),
    ("espresso", W::Thing(T::Cup)),
    ("чашк*", W::Thing(T::Cup)),
    ("чашечк*", W::Thing(T::Cup)),
    ("кружк*", W::Thing(T::Cup)),
    ("кофе", W::Thing(T::Cup)),
    ("чай", W::Thing(T::Cup)),
    ("чая", W::Thing(T::Cup)),
    ("чаем", W::Thing(T::Cup)),
    // Counts.
    ("one", W::Count(1)),
    ("single", W::Count(1)),
    ("lone", W::Count(1)),
    ("lonely", W::Count(1)),
    ("two", W::Count(2)),
    ("pair", W::Count(2)),
    ("couple", W::Count(2)),
    ("both", W::Count(2)),
    ("three", W::Count(3)),
    ("few", W::Count(3)),
    ("four", W::Count(4)),
    ("several", W::Count(4)),
    ("five", W::Count(5)),
    ("six", W::Count(6)),
    ("seven", W::Count(7)),
    ("many", W::Count(7)),
    ("eight", W::Count(8)),
    ("nine", W::Count(9)),
    ("ten", W::Count(10)),
    ("dozen", W::Count(12)),
    ("один", W::Count(1)),
    ("одна", W::Count(1)),
    ("одно", W::Count(1)),
    ("одну", W::Count(1)),
    ("одного", W::Count(1)),
    ("одинок*", W::Count(1)),
    ("два", W::Count(2)),
    ("две", W::Count(2)),
    ("двое", W::Count(2)),
    ("пара", W::Count(2)),
    ("пару", W::Count(2)),
    ("три", W::Count(3)),
    ("трое", W::Count(3)),
    ("четыре", W::Count(4)),
    ("четверо", W::Count(4)),
    ("несколько", W::Count(4)),
    ("пять", W::Count(5)),
    ("шесть", W::Count(6)),
    ("семь", W::Count(7)),
    ("много", W::Count(7)),
    ("множество", W::Count(8)),
    ("восемь", W::Count(8)),
    ("девять", W::Count(9)),
    ("десять", W::Count(10)),
    // Moods.
    ("calm", W::Mood(Mood::Calm)),
    ("peaceful", W::Mood(Mood::Calm)),
    ("serene", W::Mood(Mood::Calm)),
    ("tranquil", W::Mood(Mood::Calm)),
    ("quiet", W::Mood(Mood::Calm)),
    ("спокойн*", W::Mood(Mood::Calm)),
    ("тих~", W::Mood(Mood::Calm)),
    ("безмятежн*", W::Mood(Mood::Calm)),
    ("умиротвор*", W::Mood(Mood::Calm)),
    ("dramatic", W::Mood(Mood::Dramatic)),
    ("epic", W::Mood(Mood::Dramatic)),
    ("majestic", W::Mood(Mood::Dramatic)),
    ("драматич*", W::Mood(Mood::Dramatic)),
    ("эпич*", W::Mood(Mood::Dramatic)),
    ("величеств*", W::Mood(Mood::Dramatic)),
    ("gloomy", W::Mood(Mood::Gloomy)),
    ("sad", W::Mood(Mood::Gloomy)),
    ("melanchol*", W::Mood(Mood::Gloomy)),
    ("мрачн*", W::Mood(Mood::Gloomy)),
    ("грустн*", W::Mood(Mood::Gloomy)),
    ("печальн*", W::Mood(Mood::Gloomy)),
    ("happy", W::Mood(Mood::Cheerful)),
    ("cheerful", W::Mood(Mood::Cheerful)),
    ("joyful", W::Mood(Mood::Cheerful)),
    ("cute", W::Mood(Mood::Cheerful)),
    ("весел*", W::Mood(Mood::Cheerful)),
    ("радостн*", W::Mood(Mood::Cheerful)),
    ("мил~", W::Mood(Mood::Cheerful)),
    ("magic*", W::Mood(Mood::Magical)),
    ("fairy*", W::Mood(Mood::Magical)),
    ("fantasy", W::Mood(Mood::Magical)),
    ("dreamy", W::Mood(Mood::Magical)),
    ("mystic*", W::Mood(Mood::Magical)),
    ("mysterious", W::Mood(Mood::Magical)),
    ("enchanted", W::Mood(Mood::Magical)),
    ("волшебн*", W::Mood(Mood::Magical)),
    ("сказочн*", W::Mood(Mood::Magical)),
    ("магич*", W::Mood(Mood::Magical)),
    ("мистич*", W::Mood(Mood::Magical)),
    ("таинствен*", W::Mood(Mood::Magical)),
    ("romantic*", W::Mood(Mood::Romantic)),
    ("романтич*", W::Mood(Mood::Romantic)),
    ("cozy", W::Mood(Mood::Cozy)),
    ("cosy", W::Mood(Mood::Cozy)),
    ("warm", W::Mood(Mood::Cozy)),
    ("уютн*", W::Mood(Mood::Cozy)),
    // Styles.
    ("watercolor*", W::Style(Style::Watercolor)),
    ("watercolour*", W::Style(Style::Watercolor)),
    ("aquarelle", W::Style(Style::Watercolor)),
    ("акварел*", W::Style(Style::Watercolor)),
    ("oil", W::Style(Style::Oil)),
    ("oils", W::Style(Style::Oil)),
    ("painting", W::Style(Style::Oil)),
    ("impasto", W::Style(Style::Oil)),
    ("масл*", W::Style(Style::Oil)),
    ("живопис*", W::Style(Style::Oil)),
    ("pencil", W::Style(Style::Sketch)),
    ("sketch*", W::Style(Style::Sketch)),
    ("drawing", W::Style(Style::Sketch)),
    ("graphite", W::Style(Style::Sketch)),
    ("charcoal", W::Style(Style::Sketch)),
    ("карандаш*", W::Style(Style::Sketch)),
    ("эскиз*", W::Style(Style::Sketch)),
    ("набросок", W::Style(Style::Sketch)),
    ("рисун*", W::Style(Style::Sketch)),
    ("pixel*", W::Style(Style::PixelArt)),
    ("8bit", W::Style(Style::PixelArt)),
    ("16bit", W::Style(Style::PixelArt)),
    ("retro game", W::Style(Style::PixelArt)),
    ("пиксел*", W::Style(Style::PixelArt)),
    ("пиксель*", W::Style(Style::PixelArt)),
    ("lowpoly", W::Style(Style::LowPoly)),
    ("low poly", W::Style(Style::LowPoly)),
    ("polygonal", W::Style(Style::LowPoly)),
    ("низкополиг*", W::Style(Style::LowPoly)),
    ("полигон*", W::Style(Style::LowPoly)),
    ("synthwave", W::Style(Style::Neon)),
    ("retrowave", W::Style(Style::Neon)),
    ("vaporwave", W::Style(Style::Neon)),
    ("outrun", W::Style(Style::Neon)),
    ("синтвейв*", W::Style(Style::Neon)),
    ("ретровейв*", W::Style(Style::Neon)),
    ("minimal*", W::Style(Style::Poster)),
    ("flat", W::Style(Style::Poster)),
    ("vector", W::Style(Style::Poster)),
    ("минимал*", W::Style(Style::Poster)),
    ("плоск*", W::Style(Style::Poster)),
    ("векторн*", W::Style(Style::Poster)),
    ("ukiyo*", W::Style(Style::Japanese)),
    ("woodblock", W::Style(Style::Japanese)),
    ("hokusai", W::Style(Style::Japanese)),
    ("japanese", W::Style(Style::Japanese)),
    ("japan", W::Style(Style::Japanese)),
    ("японск*", W::Style(Style::Japanese)),
    ("япони*", W::Style(Style::Japanese)),
    ("укиё*", W::Style(Style::Japanese)),
    ("укие*", W::Style(Style::Japanese)),
    ("гравюр*", W::Style(Style::Japanese)),
    ("photo*", W::Style(Style::Photo)),
    ("realistic", W::Style(Style::Photo)),
    ("photoreal*", W::Style(Style::Photo)),
    ("фото*", W::Style(Style::Photo)),
    ("реалистич*", W::Style(Style::Photo)),
    ("poster", W::Poster),
    ("placard", W::Poster),
    ("cover", W::Poster),
    ("postcard", W::Poster),
    ("постер*", W::Poster),
    ("плакат*", W::Poster),
    ("обложк*", W::Poster),
    ("открытк*", W::Poster),
    ("sign", W::Sign),
    ("signboard", W::Sign),
    ("billboard", W::Sign),
    ("board", W::Sign),
    ("вывеск*", W::Sign),
    ("табличк*", W::Sign),
    ("щит", W::Sign),
    // Composition.
    // Relations between things and the viewpoint.
    ("next to", W::Near(Relation::Beside)),
    ("beside", W::Near(Relation::Beside)),
    ("alongside", W::Near(Relation::Beside)),
    ("front", W::Near(Relation::InFront)),
    ("behind", W::Near(Relation::Behind)),
    ("рядом", W::Near(Relation::Beside)),
    ("возле", W::Near(Relation::Beside)),
    ("около", W::Near(Relation::Beside)),
    ("перед", W::Near(Relation::InFront)),
    ("позади", W::Near(Relation::Behind)),
    ("aerial", W::View(View::Aerial)),
    ("from above", W::View(View::Aerial)),
    ("top down", W::View(View::Aerial)),
    ("overhead", W::View(View::Aerial)),
    ("drone", W::View(View::Aerial)),
    ("low angle", W::View(View::Low)),
    ("from below", W::View(View::Low)),
    ("вид сверху", W::View(View::Aerial)),
    ("с высоты", W::View(View::Aerial)),
    ("птичьего", W::View(View::Aerial)),
    ("снизу", W::View(View::Low)),
    ("left", W::Place(Place::Left)),
    ("слева", W::Place(Place::Left)),
    ("левой", W::Place(Place::Left)),
    ("левом", W::Place(Place::Left)),
    ("right", W::Place(Place::Right)),
    ("справа", W::Place(Place::Right)),
    ("правой", W::Place(Place::Right)),
    ("правом", W::Place(Place::Right)),
    ("center", W::Place(Place::Center)),
    ("centre", W::Place(Place::Center)),
    ("centered", W::Place(Place::Center)),
    ("middle", W::Place(Place::Center)),
    ("symmetric*", W::Place(Place::Center)),
    ("центр*", W::Place(Place::Center)),
    ("посередин*", W::Place(Place::Center)),
    ("big", W::Bigger),
    ("large", W::Bigger),
    ("huge", W::Bigger),
    ("giant", W::Bigger),
    ("enormous", W::Bigger),
    ("closeup", W::Bigger),
    ("close", W::Bigger),
    ("portrait", W::Bigger),
    ("больш~", W::Bigger),
    ("огромн*", W::Bigger),
    ("гигант*", W::Bigger),
    ("крупн*", W::Bigger),
    ("портрет*", W::Bigger),
    ("small", W::Smaller),
    ("tiny", W::Smaller),
    ("little", W::Smaller),
    ("distant", W::Smaller),
    ("far", W::Smaller),
    ("faraway", W::Smaller),
    ("маленьк*", W::Smaller),
    ("крошечн*", W::Smaller),
    ("небольш*", W::Smaller),
    ("далек*", W::Smaller),
    ("вдали", W::Smaller),
    ("вдалеке", W::Smaller),
    ("flying", W::Flying),
    ("flies", W::Flying),
    ("fly", W::Flying),
    ("soaring", W::Flying),
    ("летящ*", W::Flying),
    ("летают", W::Flying),
    ("летит", W::Flying),
    ("летающ*", W::Flying),
    ("парящ*", W::Flying),
    // Colours.
    ("red", W::Color(rgb(214, 38, 38))),
    ("reds", W::Color(rgb(214, 38, 38))),
    ("reddish", W::Color(rgb(214, 38, 38))),
    ("crimson", W::Color(rgb(190, 20, 50))),
    ("scarlet", W::Color(rgb(235, 40, 30))),
    ("ruby", W::Color(rgb(200, 20, 60))),
    ("красн*", W::Color(rgb(214, 38, 38))),
    ("алы*", W::Color(rgb(235, 40, 30))),
    ("ала*", W::Color(rgb(235, 40, 30))),
    ("алое", W::Color(rgb(235, 40, 30))),
    ("бордов*", W::Color(rgb(128, 20, 40))),
    ("orange*", W::Color(rgb(245, 130, 30))),
    ("оранжев*", W::Color(rgb(245, 130, 30))),
    ("рыж*", W::Color(rgb(230, 110, 30))),
    ("ginger", W::Color(rgb(230, 110, 30))),
    ("yellow*", W::Color(rgb(245, 215, 40))),
    ("желт*", W::Color(rgb(245, 215, 40))),
    ("gold*", W::Color(rgb(240, 185, 55))),
    ("amber", W::Color(rgb(245, 165, 30))),
    ("золот*", W::Color(rgb(240, 185, 55))),
    ("green*", W::Color(rgb(40, 170, 70))),
    ("emerald", W::Color(rgb(20, 160, 100))),
    ("olive", W::Color(rgb(120, 130, 40))),
    ("зелен*", W::Color(rgb(40, 170, 70))),
    ("изумруд*", W::Color(rgb(20, 160, 100))),
    ("teal", W::Color(rgb(20, 150, 150))),
    ("turquoise", W::Color(rgb(40, 200, 190))),
    ("cyan", W::Color(rgb(40, 210, 230))),
    ("aqua*", W::Color(rgb(40, 200, 220))),
    ("бирюз*", W::Color(rgb(40, 200, 190))),
    ("blue*", W::Color(rgb(30, 90, 220))),
    ("azure", W::Color(rgb(40, 130, 240))),
    ("navy", W::Color(rgb(20, 30, 110))),
    ("sapphire", W::Color(rgb(20, 60, 180))),
    ("син~", W::Color(rgb(30, 70, 210))),
    ("синев*", W::Color(rgb(30, 70, 210))),
    ("голуб*", W::Color(rgb(90, 170, 240))),
    ("purple*", W::Color(rgb(130, 50, 190))),
    ("violet*", W::Color(rgb(140, 70, 220))),
    ("lilac", W::Color(rgb(190, 150, 230))),
    ("lavender", W::Color(rgb(170, 140, 220))),
    ("magenta", W::Color(rgb(220, 40, 170))),
    ("фиолет*", W::Color(rgb(130, 50, 190))),
    ("сиренев*", W::Color(rgb(190, 150, 230))),
    ("лилов*", W::Color(rgb(160, 80, 200))),
    ("пурпур*", W::Color(rgb(150, 30, 140))),
    ("pink*", W::Color(rgb(240, 110, 170))),
    ("rose", W::Color(rgb(230, 90, 130))),
    ("розов*", W::Color(rgb(240, 110, 170))),
    ("brown*", W::Color(rgb(130, 80, 40))),
    ("коричнев*", W::Color(rgb(130, 80, 40))),
    ("silver*", W::Color(rgb(190, 195, 205))),
    ("серебр*", W::Color(rgb(190, 195, 205))),
    ("gray", W::Color(rgb(128, 128, 128))),
    ("grey", W::Color(rgb(128, 128, 128))),
    ("сер~", W::Color(rgb(128, 128, 128))),
    ("сероват*", W::Color(rgb(128, 128, 128))),
    ("black", W::Darker),
    ("dark*", W::Darker),
    ("черн*", W::Darker),
    ("темн*", W::Darker),
    ("white", W::Lighter),
    ("pale", W::Lighter),
    ("pastel", W::Lighter),
    ("bright", W::Lighter),
    ("snowwhite", W::Lighter),
    ("бел~", W::Lighter),
    ("белосне*", W::Lighter),
    ("светл*", W::Lighter),
    ("пастел*", W::Lighter),
    ("бледн*", W::Lighter),
    // Common words that carry no scene meaning but would otherwise hit a prefix above or be
    // "corrected" into a vocabulary word.
    ("синхрон*", W::Ignore),
    ("сила", W::Ignore),
    ("совсем", W::Ignore),
    ("совет*", W::Ignore),
    ("водител*", W::Ignore),
    ("горжусь", W::Ignore),
    ("начинает", W::Ignore),
    ("pocket*", W::Ignore),
    ("letter*", W::Ignore),
    ("better", W::Ignore),
    ("detailed", W::Ignore),
    ("beautiful", W::Ignore),
    ("stairs", W::Ignore),
    ("horses", W::Thing(T::Horse)),
    ("houses", W::Thing(T::House)),
    ("winner*", W::Ignore),
    ("looking", W::Ignore),
    ("высок*", W::Ignore),
    ("ivy", W::Ignore),
    ("ива", W::Thing(T::Tree)),
    ("ивы", W::Thing(T::Tree)),
    ("ивой", W::Thing(T::Tree)),
    ("иван*", W::Ignore),
    ("ивент*", W::Ignore),
    ("солнечные", W::Time(Time::Day)),
];

/// Common misspellings that edit distance alone would not catch (or would catch wrongly).
const MISSPELLINGS: &[(&str, &str)] = &[
    ("whail", "whale"),
    ("wale", "whale"),
    ("dolfin", "dolphin"),
    ("butterfy", "butterfly"),
    ("buterfly", "butterfly"),
    ("horce", "horse"),
    ("moutains", "mountain"),
    ("mountians", "mountain"),
    ("ocen", "ocean"),
    ("oshen", "ocean"),
    ("sunet", "sunset"),
    ("sunsett", "sunset"),
    ("nite", "night"),
    ("baloon", "balloon"),
    ("ballon", "balloon"),
    ("rocet", "rocket"),
    ("castel", "castle"),
    ("casle", "castle"),
    ("foreset", "forest"),
    ("forrest", "forest"),
    ("dessert", "desert"),
    ("iland", "island"),
    ("aurorra", "aurora"),
    ("rainbo", "rainbow"),
    ("skyscrapper", "skyscraper"),
    ("lightouse", "lighthouse"),
    ("kat", "cat"),
    ("doggy", "dog"),
    ("wolfs", "wolf"),
    ("fishs", "fish"),
    ("snowy", "snow"),
    ("watercolur", "watercolor"),
];

/// What the prompt asks for.
#[derive(Debug, Clone, Default)]
pub struct Theme {
    /// The first time-of-day word, if any.
    pub time: Option<Time>,
    pub season: Option<Season>,
    pub mood: Option<Mood>,
    pub elements: Vec<Element>,
    /// Things to draw, in order of appearance (the first is the main subject).
    pub subjects: Vec<Subject>,
    /// Colour words in order of appearance, with what they apply to.
    pub colors: Vec<(Rgb, Target)>,
    /// Net count of darker (black, dark) minus lighter (white, pale) words that did not
    /// describe a thing.
    pub darkness: i32,
    /// The style named in the prompt, if any.
    pub style: Option<Style>,
    /// Quoted text to show, and how.
    pub text: Option<String>,
    pub text_mode: Option<TextMode>,
    /// The prompt talks about a poster.
    pub poster: bool,
    pub place: Option<Place>,
    /// The viewpoint, if the prompt names one.
    pub view: Option<View>,
    /// Net bigger (big, close-up) minus smaller (small, distant) words.
    pub size: i32,
    pub phase: Option<Phase>,
    pub flying: bool,
    /// Hash of the words we did not recognise (0 when there are none).
    pub flavor: u64,
    /// The content words, in order, each once.
    pub mentions: Vec<Mention>,
}

impl Theme {
    pub fn has(&self, e: Element) -> bool {
        self.elements.contains(&e)
    }

    /// The prompt is set in a room (a window alone is not: houses have windows too). Furniture
    /// named with nothing of the outdoors ("a red sofa") is in a room too.
    pub fn indoors(&self) -> bool {
        let furniture = |t: Thing| matches!(t, T::Sofa | T::Chair | T::Piano | T::Television);
        let at_home = |t: Thing| {
            furniture(t)
                || t.habitat() == Habitat::Table
                || matches!(t, T::Cat | T::Dog)
                || t.is_person()
        };
        [
            Element::Room,
            Element::Fireplace,
            Element::Library,
            Element::Kitchen,
        ]
        .iter()
        .any(|e| self.has(*e))
            || (self.elements.is_empty()
                && self.time.is_none()
                && self.subjects.iter().any(|s| furniture(s.thing))
                && self.subjects.iter().all(|s| at_home(s.thing)))
            || (self.has(Element::Window)
                && self.subjects.iter().all(|s| at_home(s.thing))
                && !self.elements.iter().any(|e| {
                    !matches!(
                        e,
                        Element::Window
                            | Element::Table
                            | Element::Sun
                            | Element::Moon
                            | Element::Rain
                            | Element::Snow
                    )
                }))
    }

    #[cfg(test)]
    pub fn has_thing(&self, t: Thing) -> bool {
        self.subjects.iter().any(|s| s.thing == t)
    }

    /// The first colour for `target`.
    pub fn color_for(&self, target: Target) -> Option<Rgb> {
        self.colors
            .iter()
            .find(|(_, t)| *t == target)
            .map(|(c, _)| *c)
    }

    /// The `n`-th colour word that is not a thing's colour.
    pub fn color(&self, n: usize) -> Option<Rgb> {
        self.colors
            .iter()
            .filter(|(_, t)| !matches!(t, Target::Subject(_)))
            .nth(n)
            .map(|(c, _)| *c)
    }

    /// The style to render in: the one named, a poster for "poster", else photo-like.
    pub fn style(&self) -> Style {
        self.style.unwrap_or(if self.poster {
            Style::Poster
        } else {
            Style::Photo
        })
    }

    /// How many of something a phrase asks for when it says so ("one of the cats", "a cat",
    /// "two boats", "одну из кошек"); `None` for "the cats", "cats".
    pub fn explicit_count(phrase: &str) -> Option<usize> {
        let text = phrase.to_lowercase().replace('ё', "е");
        let mut tokens = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty());
        let first = tokens.next()?;
        if matches!(first, "a" | "an") {
            return Some(1);
        }
        std::iter::once(first)
            .chain(tokens)
            .find_map(|t| match lookup(t).0 {
                Some(W::Count(n)) => Some(usize::from(n)),
                _ => None,
            })
    }

    pub fn read(prompt: &str) -> Theme {
        let mut theme = Theme::default();
        let (rest, quoted) = extract_quoted(prompt);
        theme.text = quoted;
        let text = rest.to_lowercase().replace('ё', "е");
        let tokens: Vec<String> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        // Pending modifiers waiting for the noun they describe: (kind, tokens since).
        let mut pending_colors: Vec<(usize, usize)> = Vec::new();
        let mut pending_shade: Option<(Rgb, i32, usize)> = None;
        let mut pending_count: Option<(usize, usize)> = None;
        let mut sign_word = false;
        // Person attributes named before the person ("an old man", "a red-haired girl").
        let mut pending_person = Subject::default();
        // A person waiting for the thing it holds or rides: (person, tokens since).
        let mut pending_hold: Option<(usize, usize)> = None;
        let mut pending_mount: Option<(usize, usize)> = None;
        let mut pending_near: Option<(usize, Relation, usize)> = None;
        let mut i = 0;
        while i < tokens.len() {
            // Two-word phrases first ("christmas tree", "low poly", "cherry blossom").
            let next_is_noun = tokens.get(i + 1).is_some_and(|t| {
                matches!(
                    lookup(t).0,
                    Some(W::Element(_)) | Some(W::Thing(_)) | Some(W::Sky) | Some(W::Scene)
                )
            });
            let (word, used, plural) = if i + 1 < tokens.len()
                && let Some(w) = lookup_exact(&format!("{} {}", tokens[i], tokens[i + 1]))
            {
                (Some(w), 2, tokens[i + 1].ends_with('s'))
            } else if tokens[i] == "orange" && next_is_noun {
                // "an orange cat": the colour, not the fruit.
                (Some(W::Color(rgb(245, 130, 30))), 1, false)
            } else {
                let (w, p) = lookup(&tokens[i]);
                (w, 1, p)
            };
            let token = tokens[i].as_str();
            i += used;
            let target = match word {
                Some(W::Time(_)) | Some(W::Sky) => Some(Target::Sky),
                Some(W::Element(e)) => Some(element_target(e)),
                Some(W::Scene) => Some(Target::Any),
                Some(W::Thing(_)) => Some(Target::Subject(theme.subjects.len())),
                _ => None,
            };
            if let Some(target) = target {
                for (c, _) in pending_colors.drain(..) {
                    theme.colors[c].1 = target;
                }
            }
            let is_thing = matches!(word, Some(W::Thing(_)));
            if !is_thing
                && word.is_some()
                && !matches!(
                    word,
                    Some(W::Color(_))
                        | Some(W::Count(_))
                        | Some(W::Bigger)
                        | Some(W::Smaller)
                        | Some(W::Darker)
                        | Some(W::Lighter)
                        | Some(W::Mood(_))
                        | Some(W::Flying)
                        | Some(W::Wear(_))
                        | Some(W::Hair)
                        | Some(W::HairColor(_))
                        | Some(W::Age(_))
                        | Some(W::Pose(_))
                        | Some(W::Hold)
                        | Some(W::Mount)
                        | Some(W::Near(_))
                        | Some(W::View(_))
                )
            {
                // A noun other than a thing ends a pending black/white: it was a darkness word.
                if let Some((_, d, _)) = pending_shade.take() {
                    theme.darkness += d;
                }
            }
            for (_, age) in pending_colors.iter_mut() {
                *age += 1;
            }
            pending_colors.retain(|(_, age)| *age <= 3);
            if let Some((_, d, age)) = pending_shade.as_mut() {
                *age += 1;
                if *age > 3 {
                    theme.darkness += *d;
                    pending_shade = None;
                }
            }
            if let Some((_, age)) = pending_count.as_mut() {
                *age += 1;
                if *age > 4 {
                    pending_count = None;
                }
            }
            if let Some((_, _, age)) = pending_near.as_mut() {
                *age += 1;
                if *age > 4 {
                    pending_near = None;
                }
            }
            for pending in [&mut pending_hold, &mut pending_mount] {
                if let Some((_, age)) = pending.as_mut() {
                    *age += 1;
                    if *age > 4 {
                        *pending = None;
                    }
                }
            }
            match word {
                Some(W::Time(t)) => {
                    theme.time.get_or_insert(t);
                }
                Some(W::Element(e)) => {
                    theme.mention(Mention::Element(e));
                    theme.add_element(e);
                }
                Some(W::Thing(thing)) => {
                    let count = match pending_count.take() {
                        Some((n, _)) => n,
                        None if plural => thing.plural_count(),
                        None => 1,
                    };
                    let color = pending_shade.take().map(|(c, _, _)| c).or_else(|| {
                        theme
                            .colors
                            .iter()
                            .rev()
                            .find(|(_, t)| *t == Target::Subject(theme.subjects.len()))
                            .map(|(c, _)| *c)
                    });
                    theme.mention(Mention::Thing(thing));
                    let index =
                        if let Some(k) = theme.subjects.iter().position(|s| s.thing == thing) {
                            let s = &mut theme.subjects[k];
                            s.count = s.count.max(count);
                            if s.color.is_none() {
                                s.color = color;
                            }
                            Some(k)
                        } else if theme.subjects.len() < 6 {
                            theme.subjects.push(Subject {
                                thing,
                                count,
                                color,
                                ..Subject::default()
                            });
                            Some(theme.subjects.len() - 1)
                        } else {
                            None
                        };
                    if !thing.is_person() {
                        // An age word before a thing that is not a person is not a person's.
                        pending_person.age = None;
                    }
                    if let Some(k) = index
                        && let Some((first, rel, _)) = pending_near
                        && first != k
                    {
                        theme.subjects[first].near = Some((k, rel));
                        pending_near = None;
                        pending_hold = None;
                    }
                    if let Some(k) = index {
                        if thing.is_person() {
                            let (age, female) = person_traits(token);
                            let p = std::mem::take(&mut pending_person);
                            let s = &mut theme.subjects[k];
                            s.age = s.age.or(p.age).or(age);
                            s.female = s.female.or(female);
                            s.hair = s.hair.or(p.hair);
                            s.pose = s.pose.or(p.pose);
                            for w in p.wear {
                                if !s.wear.iter().any(|(g, _)| *g == w.0) {
                                    s.wear.push(w);
                                }
                            }
                        } else if let Some((rider, _)) = pending_mount
                            && (thing.seat()
                                || (thing.rideable() && theme.subjects[rider].thing.is_person()))
                            && rider != k
                        {
                            theme.subjects[rider].rides = Some(k);
                            if theme.subjects[rider].thing.is_person() {
                                theme.subjects[rider].pose =
                                    Some(if thing.seat() { Pose::Sit } else { Pose::Ride });
                            }
                            pending_mount = None;
                            pending_hold = None;
                        } else if let Some((person, _)) = pending_hold
                            && thing.holdable()
                            && person != k
                            && theme.subjects[person].holds.is_none()
                        {
                            theme.subjects[person].holds = Some(k);
                            pending_hold = None;
                        }
                    }
                    // Things imply their setting.
                    match thing {
                        T::Snowman => theme.add_element(E::Snow),
                        T::Palm => theme.add_element(E::Beach),
                        _ => {}
                    }
                }
                Some(W::Color(c)) => {
                    pending_colors.push((theme.colors.len(), 0));
                    theme.colors.push((c, Target::Any));
                }
                Some(W::Darker) => {
                    if let Some((_, d, _)) = pending_shade.take() {
                        theme.darkness += d;
                    }
                    pending_shade = Some((rgb(28, 26, 30), 1, 0));
                }
                Some(W::Lighter) => {
                    if let Some((_, d, _)) = pending_shade.take() {
                        theme.darkness += d;
                    }
                    pending_shade = Some((rgb(240, 238, 232), -1, 0));
                }
                Some(W::Count(n)) => pending_count = Some((usize::from(n), 0)),
                Some(W::Season(s)) => {
                    theme.season.get_or_insert(s);
                    if s == Season::Winter {
                        theme.add_element(E::Snow);
                    }
                }
                Some(W::Mood(m)) => {
                    theme.mood.get_or_insert(m);
                }
                Some(W::Style(s)) => {
                    // "oil painting" after "watercolor" keeps the first named style.
                    theme.style.get_or_insert(s);
                }
                Some(W::Place(p)) => {
                    theme.place.get_or_insert(p);
                }
                Some(W::Bigger) => theme.size += 1,
                Some(W::Smaller) => theme.size -= 1,
                Some(W::Phase(p)) => {
                    theme.phase.get_or_insert(p);
                }
                Some(W::Flying) => theme.flying = true,
                Some(W::Sign) => sign_word = true,
                Some(W::Poster) => theme.poster = true,
                Some(W::Sky) | Some(W::Scene) | Some(W::Ignore) => {}
                Some(W::Concept(name)) => theme.mention(Mention::Concept(name)),
                Some(W::Wear(g)) => {
                    theme.mention(Mention::Garment(g));
                    let color = take_pending_color(&mut theme, &mut pending_colors)
                        .or_else(|| pending_shade.take().map(|(c, _, _)| c));
                    let wear = match theme.last_person() {
                        Some(k) => &mut theme.subjects[k].wear,
                        None => &mut pending_person.wear,
                    };
                    match wear.iter_mut().find(|(w, _)| *w == g) {
                        Some(w) => w.1 = w.1.or(color),
                        None => wear.push((g, color)),
                    }
                }
                Some(W::Hair) | Some(W::HairColor(_)) => {
                    let color = match word {
                        Some(W::HairColor(c)) => Some(c),
                        _ => take_pending_color(&mut theme, &mut pending_colors)
                            .or_else(|| pending_shade.take().map(|(c, _, _)| c)),
                    };
                    if let Some(c) = color {
                        match theme.last_person() {
                            Some(k) => theme.subjects[k].hair = Some(c),
                            None => pending_person.hair = Some(c),
                        }
                    }
                }
                Some(W::Age(a)) => pending_person.age = Some(a),
                Some(W::Pose(p)) => {
                    theme.mention(Mention::Pose(p));
                    match theme.last_person() {
                        Some(k) => {
                            let s = &mut theme.subjects[k];
                            if s.pose.is_none_or(|q| q == Pose::Stand) {
                                s.pose = Some(p);
                            }
                            if p == Pose::Ride {
                                pending_mount = Some((k, 0));
                            }
                            if p == Pose::Play {
                                pending_hold = Some((k, 0));
                            }
                        }
                        None => pending_person.pose = Some(p),
                    }
                }
                Some(W::Hold) => {
                    if let Some(k) = theme.last_person() {
                        pending_hold = Some((k, 0));
                    }
                }
                Some(W::Mount) => {
                    if let Some(k) = theme.last_person() {
                        pending_mount = Some((k, 0));
                        pending_hold = Some((k, 0));
                    } else if let Some(k) = theme.subjects.len().checked_sub(1)
                        && theme.subjects[k].thing.sits_on_seats()
                    {
                        // "a cat on a sofa": only a seat takes it.
                        pending_mount = Some((k, 0));
                    }
                }
                Some(W::Near(rel)) => {
                    if let Some(k) = theme.subjects.len().checked_sub(1) {
                        pending_near = Some((k, rel, 0));
                        // "рядом с собакой": the "с" is not a hand holding it.
                        pending_hold = None;
                    }
                }
                Some(W::View(v)) => theme.view = Some(v),
                None => {
                    if let Ok(n) = token.parse::<usize>()
                        && (1..=20).contains(&n)
                    {
                        pending_count = Some((n, 0));
                    } else if token.chars().count() >= 3 {
                        theme.flavor = theme.flavor.rotate_left(13) ^ fnv1a(token.as_bytes());
                        if !quiet(token) {
                            theme.mention(Mention::Unknown(token.to_owned()));
                        }
                    }
                }
            }
        }
        if let Some((_, d, _)) = pending_shade {
            theme.darkness += d;
        }
        // Attributes named after everything else ("a knight, old, in a red cape").
        if let Some(k) = theme.last_person() {
            let p = pending_person;
            let s = &mut theme.subjects[k];
            s.age = s.age.or(p.age);
            s.hair = s.hair.or(p.hair);
            s.pose = s.pose.or(p.pose);
            for w in p.wear {
                if !s.wear.iter().any(|(g, _)| *g == w.0) {
                    s.wear.push(w);
                }
            }
        }
        if theme.has(E::Neon) && theme.style.is_none() && !theme.has(E::City) {
            // "neon" alone is a look rather than a place.
            theme.style = Some(Style::Neon);
        }
        if theme.text.is_some() {
            theme.text_mode = Some(if theme.has(E::Neon) {
                TextMode::Neon
            } else if sign_word && !theme.poster {
                TextMode::Sign
            } else {
                TextMode::Title
            });
        }
        theme
    }

    fn mention(&mut self, m: Mention) {
        if !self.mentions.contains(&m) {
            self.mentions.push(m);
        }
    }

    /// The last person named so far.
    fn last_person(&self) -> Option<usize> {
        self.subjects.iter().rposition(|s| s.thing.is_person())
    }

    fn add_element(&mut self, e: Element) {
        if !self.elements.contains(&e) {
            self.elements.push(e);
        }
    }
}

/// Splits quoted text out of the prompt: "…", “…”, «…», „…“, and '…' when it is not an
/// apostrophe. Returns the prompt without the quotes and the first quoted text.
pub fn extract_quoted(prompt: &str) -> (String, Option<String>) {
    let pairs = [
        ('"', '"'),
        ('“', '”'),
        ('«', '»'),
        ('„', '“'),
        ('”', '”'),
        ('\'', '\''),
    ];
    let chars: Vec<char> = prompt.chars().collect();
    for (open, close) in pairs {
        let Some(start) = chars.iter().enumerate().position(|(i, &c)| {
            c == open && (open != '\'' || i == 0 || !chars[i - 1].is_alphanumeric())
        }) else {
            continue;
        };
        let Some(len) = chars[start + 1..].iter().enumerate().position(|(j, &c)| {
            let k = start + 1 + j;
            c == close && (close != '\'' || k + 1 >= chars.len() || !chars[k + 1].is_alphanumeric())
        }) else {
            continue;
        };
        let inner: String = chars[start + 1..start + 1 + len].iter().collect();
        let inner = inner.trim().to_owned();
        if inner.is_empty() {
            continue;
        }
        let mut rest: String = chars[..start].iter().collect();
        rest.push(' ');
        rest.extend(chars[start + 2 + len..].iter());
        let inner: String = inner.chars().take(80).collect();
        return (rest, Some(inner));
    }
    (prompt.to_owned(), None)
}

const ADJECTIVE_ENDINGS: &[&str] = &[
    "ый", "ий", "ой", "ая", "яя", "ое", "ее", "ые", "ие", "ым", "им", "ого", "его", "ому", "ему",
    "ую", "юю", "ых", "их", "ыми", "ими", "ей", "ом", "ем",
];

fn element_target(e: Element) -> Target {
    match e {
        E::Sea | E::Lake | E::River | E::Beach | E::Underwater => Target::Water,
        E::Mountains
        | E::Hills
        | E::Forest
        | E::City
        | E::Snow
        | E::Desert
        | E::Island
        | E::Cliff
        | E::Flowers
        | E::Road
        | E::Table
        | E::Room
        | E::Fireplace
        | E::Library
        | E::Kitchen => Target::Land,
        _ => Target::Sky,
    }
}

/// The newest colour words still waiting for their noun, taken out of the picture's colours
/// (they colour a garment or hair instead): the last of them.
fn take_pending_color(theme: &mut Theme, pending: &mut Vec<(usize, usize)>) -> Option<Rgb> {
    let mut indices: Vec<usize> = pending.drain(..).map(|(c, _)| c).collect();
    indices.sort_unstable();
    let last = indices.last().map(|&c| theme.colors[c].0);
    for c in indices.into_iter().rev() {
        theme.colors.remove(c);
    }
    last
}

/// Age and sex that a word for a person says ("girl": a child, female).
fn person_traits(token: &str) -> (Option<Age>, Option<bool>) {
    const FEMALE: &[&str] = &[
        "woman",
        "women",
        "girl",
        "lady",
        "ladies",
        "mother",
        "mom",
        "grandma",
        "grandmother",
        "bride",
        "queen",
        "princess",
        "witch",
        "fairy",
        "mermaid",
        "ballerina",
        "actress",
        "женщин",
        "девушк",
        "девочк",
        "дам",
        "мам",
        "бабушк",
        "старушк",
        "невест",
        "королев",
        "принцесс",
        "ведьм",
        "фе",
        "русалк",
        "балерин",
    ];
    const MALE: &[&str] = &[
        "man",
        "men",
        "boy",
        "guy",
        "gentleman",
        "father",
        "dad",
        "grandpa",
        "grandfather",
        "king",
        "prince",
        "groom",
        "мужчин",
        "парен",
        "парн",
        "мальчик",
        "пап",
        "отец",
        "дед",
        "дедушк",
        "старик",
        "корол",
        "принц",
        "жених",
    ];
    const CHILD: &[&str] = &[
        "girl",
        "boy",
        "child",
        "children",
        "kid",
        "baby",
        "toddler",
        "девочк",
        "мальчик",
        "ребен",
        "дети",
        "детей",
        "малыш",
    ];
    const OLD: &[&str] = &[
        "grandma",
        "grandmother",
        "grandpa",
        "grandfather",
        "бабушк",
        "старушк",
        "дед",
        "дедушк",
        "старик",
    ];
    let hit = |list: &[&str]| {
        list.iter().any(|w| {
            if w.is_ascii() {
                token == *w
                    || token.strip_suffix('s') == Some(w)
                    || token.strip_suffix("es") == Some(w)
            } else {
                token.starts_with(w)
            }
        })
    };
    let age = if hit(OLD) {
        Some(Age::Old)
    } else if hit(CHILD) {
        Some(Age::Child)
    } else {
        None
    };
    let female = if hit(FEMALE) && !token.starts_with("фен") {
        Some(true)
    } else if hit(MALE) {
        Some(false)
    } else {
        None
    };
    (age, female)
}

/// Words that are not things to draw: grammar, prompt boilerplate ("highly detailed, 4k"),
/// and qualities the painter shows through style rather than an object.
fn quiet(token: &str) -> bool {
    if token.chars().any(|c| c.is_ascii_digit()) {
        return true;
    }
    if QUIET.contains(&token) {
        return true;
    }
    // English -ly adverbs and the usual adjective endings carry no object.
    if token.is_ascii()
        && [
            "ly", "ful", "ous", "ive", "ish", "less", "able", "ible", "est", "ic", "al",
        ]
        .iter()
        .any(|e| token.len() > e.len() + 3 && token.ends_with(e))
    {
        return true;
    }
    // Russian adjectives, adverbs and verb forms (nouns rarely end so).
    !token.is_ascii()
        && [
            "ый", "ий", "ой", "ая", "яя", "ое", "ее", "ые", "ие", "ых", "их", "ую", "юю", "ого",
            "его", "ому", "ему", "ыми", "ими", "ет", "ит", "ют", "ят", "ать", "ять", "ить", "еть",
            "ся", "сь", "но", "ки",
        ]
        .iter()
        .any(|e| token.chars().count() > e.chars().count() + 2 && token.ends_with(e))
}

const QUIET: &[&str] = &[
    // English grammar.
    "the",
    "and",
    "with",
    "for",
    "from",
    "into",
    "onto",
    "over",
    "under",
    "near",
    "next",
    "between",
    "above",
    "below",
    "inside",
    "outside",
    "through",
    "across",
    "around",
    "its",
    "his",
    "her",
    "their",
    "our",
    "your",
    "this",
    "that",
    "these",
    "those",
    "who",
    "which",
    "what",
    "where",
    "while",
    "very",
    "too",
    "some",
    "many",
    "much",
    "few",
    "all",
    "each",
    "other",
    "another",
    "same",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "are",
    "was",
    "were",
    "has",
    "have",
    "had",
    "being",
    "been",
    "does",
    "can",
    "will",
    "just",
    "also",
    "not",
    "but",
    "then",
    "than",
    "there",
    "here",
    "out",
    "off",
    "like",
    "make",
    "made",
    "show",
    "showing",
    "shows",
    "draw",
    "drawn",
    "create",
    "generate",
    "please",
    "want",
    "need",
    "give",
    "me",
    "holding",
    "holds",
    "hold",
    "carrying",
    "carries",
    "wearing",
    "wears",
    "dressed",
    "looking",
    "looks",
    "view",
    "scene",
    "background",
    "foreground",
    "side",
    "top",
    "bottom",
    "middle",
    "corner",
    "left",
    "right",
    "center",
    "centre",
    "full",
    "body",
    "portrait",
    "shot",
    "close",
    "closeup",
    "wide",
    "angle",
    "aerial",
    "perspective",
    "distance",
    "far",
    "far away",
    // Prompt boilerplate and qualities.
    "image",
    "picture",
    "photo",
    "photograph",
    "art",
    "artwork",
    "illustration",
    "render",
    "rendering",
    "style",
    "styled",
    "quality",
    "masterpiece",
    "best",
    "high",
    "highly",
    "ultra",
    "hyper",
    "detailed",
    "detail",
    "details",
    "intricate",
    "sharp",
    "focus",
    "hdr",
    "uhd",
    "resolution",
    "trending",
    "artstation",
    "unreal",
    "engine",
    "octane",
    "cinematic",
    "lighting",
    "light",
    "lights",
    "soft",
    "hard",
    "beautiful",
    "pretty",
    "cute",
    "lovely",
    "nice",
    "cool",
    "amazing",
    "awesome",
    "stunning",
    "epic",
    "gorgeous",
    "adorable",
    "little",
    "tiny",
    "small",
    "big",
    "large",
    "huge",
    "giant",
    "tall",
    "short",
    "long",
    "old",
    "new",
    "young",
    "happy",
    "sad",
    "angry",
    "funny",
    "smiling",
    "fluffy",
    "furry",
    "fat",
    "thin",
    "wild",
    "brave",
    "wise",
    "friendly",
    "modern",
    "vintage",
    "retro",
    "classic",
    "ancient",
    "futuristic",
    "fantasy",
    "sci",
    "scifi",
    "cartoon",
    "anime",
    "comic",
    "kawaii",
    "chibi",
    "3d",
    "concept",
    "digital",
    "colorful",
    "colourful",
    "bright",
    "vivid",
    "dark",
    "warm",
    "cold",
    "wet",
    "dry",
    "fresh",
    "hot",
    "delicious",
    "tasty",
    "shiny",
    "glowing",
    "wooden",
    "golden",
    "silver",
    "metal",
    "glass",
    "stone",
    "kind",
    "type",
    "sort",
    "lot",
    "lots",
    "bunch",
    "pair",
    "group",
    "couple",
    "together",
    "alone",
    "simple",
    "clean",
    "minimal",
    "professional",
    "studio",
    "macro",
    "lens",
    "bokeh",
    "depth",
    "field",
    "film",
    "grain",
    "sketchy",
    "look",
    "mood",
    "vibe",
    "vibes",
    "aesthetic",
    "theme",
    "themed",
    "version",
    "poster",
    "wallpaper",
    "icon",
    "logo",
    "text",
    "title",
    "word",
    "words",
    "says",
    "saying",
    "reads",
    "written",
    "sign",
    "card",
    "cover",
    "design",
    "pattern",
    "frame",
    "scenery",
    "day",
    "time",
    "way",
    "world",
    "place",
    "life",
    "land",
    "sitting",
    "standing",
    "walking",
    "running",
    "steam",
    "school",
    "grand",
    "deep",
    "strange",
    "haunted",
    "enchanted",
    "magic",
    "magical",
    "birthday",
    "slice",
    "stack",
    "sprinkles",
    "piece",
    "loaf",
    "frozen",
    "icy",
    "misty",
    "foggy",
    "rainy",
    "snowy",
    "sunny",
    "cloudy",
    "stormy",
    "quiet",
    "calm",
    "acoustic",
    "electric",
    "plastic",
    "toy",
    "real",
    "shop",
    // What the prompt enhancer adds.
    "hour",
    "rule",
    "thirds",
    "composition",
    "atmospheric",
    "banners",
    "billowing",
    "canvas",
    "centered",
    "ceramic",
    "curious",
    "drifting",
    "envelope",
    "exhaust",
    "eyes",
    "flame",
    "flowing",
    "fur",
    "gentle",
    "gently",
    "glossy",
    "graceful",
    "horizon",
    "mane",
    "moonlight",
    "pointed",
    "pose",
    "ripples",
    "rising",
    "roofs",
    "silhouette",
    "starry",
    "striped",
    "sturdy",
    "sunlight",
    "атмосферно",
    "вдали",
    "ветром",
    "взгляд",
    "горизонте",
    "грива",
    "двигателя",
    "детализация",
    "детально",
    "дыма",
    "клубы",
    "композиция",
    "крышами",
    "крыше",
    "купол",
    "окна",
    "пар",
    "пламя",
    "план",
    "поза",
    "полет",
    "правилу",
    "рябь",
    "свет",
    "силуэт",
    "третей",
    "флаги",
    "час",
    "шерсть",
    // Russian grammar and boilerplate.
    "и",
    "в",
    "во",
    "на",
    "с",
    "со",
    "под",
    "над",
    "за",
    "у",
    "к",
    "от",
    "до",
    "из",
    "по",
    "о",
    "об",
    "для",
    "при",
    "про",
    "без",
    "или",
    "но",
    "а",
    "как",
    "что",
    "это",
    "этот",
    "эта",
    "его",
    "ее",
    "их",
    "мой",
    "моя",
    "очень",
    "много",
    "между",
    "среди",
    "внутри",
    "снаружи",
    "фоне",
    "фон",
    "стиле",
    "стиль",
    "картинка",
    "картинку",
    "изображение",
    "рисунок",
    "нарисуй",
    "нарисуйте",
    "сделай",
    "покажи",
    "фото",
    "фотография",
    "арт",
    "качество",
    "детали",
    "деталей",
    "вид",
    "сцена",
    "сцене",
    "тот",
    "та",
    "те",
    "один",
    "одна",
    "одно",
    "два",
    "две",
    "три",
    "лет",
    "год",
    "время",
    "мир",
    "место",
    "жизнь",
];

/// Is a Russian noun form plural? (-ы, -и, -ов, -ев, -ата/-ята; a heuristic good enough for
/// "коты", "птицы", "лодки", "котят".)
fn russian_plural(token: &str) -> bool {
    ["ы", "и", "ов", "ев", "ата", "ята", "ами", "ями"]
        .iter()
        .any(|e| token.ends_with(e))
}

/// Every word pattern: the scene vocabulary and the lexicon of subjects, clothes and poses.
fn all_words() -> impl Iterator<Item = &'static (&'static str, Word)> {
    WORDS.iter().chain(lexicon::WORDS)
}

fn lookup_exact(token: &str) -> Option<Word> {
    all_words().find(|(p, _)| *p == token).map(|(_, w)| *w)
}

/// The word for a token, and whether it is a plural form of a thing.
fn lookup(token: &str) -> (Option<Word>, bool) {
    if let Some(hit) = lookup_pattern(token) {
        return hit;
    }
    if let Some((_, fixed)) = MISSPELLINGS.iter().find(|(m, _)| *m == token) {
        return lookup_pattern(fixed).unwrap_or((None, false));
    }
    // Misspellings of longer Latin words: the nearest exact vocabulary word.
    let n = token.chars().count();
    if n >= 6 && token.is_ascii() {
        let max = if n >= 9 { 2 } else { 1 };
        let mut best: Option<(usize, &str)> = None;
        for (pattern, _) in all_words() {
            let p = pattern.trim_end_matches(['*', '~']);
            if !p.is_ascii() || p.len() < 5 || p.contains(' ') {
                continue;
            }
            let d = damerau(token, p);
            let plural = damerau(token, &format!("{p}s"));
            let d = d.min(plural);
            if d <= max && best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, p));
            }
        }
        if let Some((_, p)) = best {
            return lookup_pattern(p).unwrap_or((None, false));
        }
    }
    (None, false)
}

fn lookup_pattern(token: &str) -> Option<(Option<Word>, bool)> {
    let mut best: Option<(usize, bool, Word, bool)> = None;
    for &(pattern, word) in all_words() {
        let (stem, prefix, hit, plural) = if let Some(stem) = pattern.strip_suffix('*') {
            let hit = token.starts_with(stem);
            let plural = hit
                && if token.is_ascii() {
                    token.len() > stem.len() && token.ends_with('s') && !token.ends_with("ss")
                } else {
                    russian_plural(token)
                };
            (stem, true, hit, plural)
        } else if let Some(stem) = pattern.strip_suffix('~') {
            let hit = token
                .strip_prefix(stem)
                .is_some_and(|rest| ADJECTIVE_ENDINGS.contains(&rest));
            (stem, true, hit, false)
        } else if token == pattern {
            let plural = !pattern.is_ascii() && russian_plural(token);
            (pattern, false, true, plural)
        } else if matches!(word, W::Thing(_))
            && pattern.is_ascii()
            && (token.strip_suffix('s') == Some(pattern)
                || token.strip_suffix("es") == Some(pattern))
        {
            (pattern, false, true, true)
        } else {
            (pattern, false, false, false)
        };
        if !hit {
            continue;
        }
        let better = match best {
            None => true,
            Some((len, was_prefix, _, _)) => {
                stem.len() > len || (stem.len() == len && was_prefix && !prefix)
            }
        };
        if better {
            best = Some((stem.len(), prefix, word, plural));
        }
    }
    // Irregular English plurals listed as words of their own.
    best.map(|(_, _, w, plural)| {
        let irregular = matches!(
            token,
            "people"
                | "men"
                | "women"
                | "children"
                | "wolves"
                | "puppies"
                | "ponies"
                | "kitties"
                | "bunnies"
                | "butterflies"
                | "cherries"
                | "fishes"
                | "snowmen"
                | "palms"
                | "birches"
                | "horses"
                | "houses"
        );
        (Some(w), plural || irregular)
    })
}

/// Optimal string alignment distance (edits and adjacent swaps), on bytes of ASCII words.
fn damerau(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len().abs_diff(b.len()) > 2 {
        return 3;
    }
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, v) in d[0].iter_mut().enumerate() {
        *v = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[n][m]
}

/// How many distinct words and word patterns the reader knows (for the README and a test).
pub fn vocabulary_size() -> usize {
    WORDS.len() + lexicon::WORDS.len() + MISSPELLINGS.len()
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
        let t = Theme::read("a red balloon over a black cat");
        assert_eq!(t.subjects[0].thing, Thing::Balloon);
        assert_eq!(t.subjects[0].color, Some(rgb(214, 38, 38)));
        assert_eq!(t.subjects[1].thing, Thing::Cat);
        assert!(t.subjects[1].color.is_some_and(|c| c[0] < 0.2));
        assert_eq!(t.darkness, 0);
        let t = Theme::read("dark forest");
        assert_eq!(t.darkness, 1);
    }

    #[test]
    fn things_and_counts() {
        let t = Theme::read("three cats and a dog by a lighthouse");
        let got: Vec<(Thing, usize)> = t.subjects.iter().map(|s| (s.thing, s.count)).collect();
        assert_eq!(
            got,
            [(Thing::Cat, 3), (Thing::Dog, 1), (Thing::Lighthouse, 1)]
        );
        let t = Theme::read("три кота и две лодки");
        let got: Vec<(Thing, usize)> = t.subjects.iter().map(|s| (s.thing, s.count)).collect();
        assert_eq!(got, [(Thing::Cat, 3), (Thing::Boat, 2)]);
        let t = Theme::read("birds over the sea");
        assert_eq!(t.subjects[0].count, Thing::Bird.plural_count());
        let t = Theme::read("5 balloons");
        assert_eq!(t.subjects[0].count, 5);
        let t = Theme::read("птицы над морем");
        assert!(t.subjects[0].count > 1);
        let t = Theme::read("wolves howling");
        assert_eq!(
            (t.subjects[0].thing, t.subjects[0].count > 1),
            (Thing::Wolf, true)
        );
        // Not things: "catalog" is not a cat, "который" is not a cat.
        assert!(Theme::read("a catalog").subjects.is_empty());
        assert!(Theme::read("который час").subjects.is_empty());
    }

    #[test]
    fn misspellings_are_understood() {
        assert!(Theme::read("moutains").has(Element::Mountains));
        assert!(Theme::read("mountians at sunset").has(Element::Mountains));
        assert!(Theme::read("a ligthouse").has_thing(Thing::Lighthouse));
        assert!(Theme::read("red baloon").has_thing(Thing::Balloon));
        assert!(Theme::read("forrest").has(Element::Forest));
        assert!(Theme::read("whail").has_thing(Thing::Whale));
        assert!(Theme::read("a castel").has_thing(Thing::Castle));
    }

    #[test]
    fn style_season_mood_composition_and_text() {
        let t = Theme::read("a watercolor of a fox in autumn, calm, on the left");
        assert_eq!(t.style(), Style::Watercolor);
        assert_eq!(t.season, Some(Season::Autumn));
        assert_eq!(t.mood, Some(Mood::Calm));
        assert_eq!(t.place, Some(Place::Left));
        let t = Theme::read("poster saying \"HELLO\" with a rocket");
        assert_eq!(t.text.as_deref(), Some("HELLO"));
        assert_eq!(t.text_mode, Some(TextMode::Title));
        assert_eq!(t.style(), Style::Poster);
        assert!(t.has_thing(Thing::Rocket));
        let t = Theme::read("плакат «Привет, мир» в стиле японской гравюры");
        assert_eq!(t.text.as_deref(), Some("Привет, мир"));
        assert_eq!(t.style(), Style::Japanese);
        let t = Theme::read("a wooden sign saying 'Welcome' in the forest");
        assert_eq!(t.text_mode, Some(TextMode::Sign));
        let t = Theme::read("the cat's hat");
        assert_eq!(t.text, None);
        let t = Theme::read("pixel art castle, зимой");
        assert_eq!(t.style(), Style::PixelArt);
        assert!(t.has(Element::Snow));
        assert_eq!(Theme::read("a summer night").time, Some(Time::Night));
    }

    #[test]
    fn unknown_words_set_the_flavor() {
        assert_eq!(Theme::read("sea").flavor, 0);
        let a = Theme::read("a zorblax").flavor;
        let b = Theme::read("a quxbirt").flavor;
        assert_ne!(a, 0);
        assert_ne!(a, b);
    }

    #[test]
    fn vocabulary_is_large() {
        assert!(vocabulary_size() >= 600, "{}", vocabulary_size());
        let english = WORDS.iter().filter(|(p, _)| p.is_ascii()).count();
        let russian = WORDS.len() - english;
        assert!(english >= 200 && russian >= 200, "{english} / {russian}");
    }
}
