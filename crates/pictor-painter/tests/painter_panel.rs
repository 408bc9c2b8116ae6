//! The built-in painter on a panel of everyday prompts, English and Russian, from the categories
//! people ask for most: what share of the content words they name it draws, and that it never
//! drops one silently (every content word is either drawn or reported as not drawn).
//!
//! `PICTOR_WRITE_GALLERY=1 cargo test --release --test painter_panel -- --ignored gallery_sheet`
//! renders 40 of them into `assets/gallery/panel-sheet.png` (the gallery sheet in docs/painter.md).

/// The painter and the shared types under one name, as the server shows them (`pictor::render`).
mod render {
    pub use pictor_core::*;
    pub use pictor_painter::*;
}

use render::procedural::describe;

#[path = "common/sheet.rs"]
mod sheet;

/// (category, prompt). Built from what people commonly ask an image generator for.
const PANEL: &[(&str, &str)] = &[
    // People with attributes and actions.
    ("people", "a woman in a red dress walking in the park"),
    ("people", "an old man with a white beard sitting on a bench"),
    ("people", "a little girl holding a red balloon"),
    ("people", "a boy playing with a ball on the grass"),
    (
        "people",
        "a man in a black coat with an umbrella in the rain",
    ),
    ("people", "a blonde woman with a book"),
    ("people", "a red-haired girl in a green dress"),
    ("people", "a knight riding a horse"),
    ("people", "a girl riding a bicycle on a road"),
    ("people", "a man playing guitar"),
    ("people", "a woman in a yellow raincoat walking a dog"),
    ("people", "a child with a cat"),
    ("people", "an old woman in a blue scarf"),
    ("people", "a young man in glasses reading a book"),
    ("people", "a family on the beach at sunset"),
    ("people", "a runner on a mountain road"),
    ("people", "a woman with an ice cream"),
    ("people", "a man in a hat standing by the lake"),
    ("people", "a chef with a cake"),
    ("people", "a girl with a violin"),
    ("people", "девушка в красном платье с зонтом"),
    ("people", "старик сидит на скамейке в парке"),
    ("people", "мальчик с мячом"),
    ("people", "девочка с воздушным шариком"),
    ("people", "мужчина в шляпе идет по дороге"),
    ("people", "рыжая девушка с книгой"),
    ("people", "бабушка с чашкой чая"),
    ("people", "парень играет на гитаре"),
    ("people", "женщина в синем пальто"),
    ("people", "ребенок с собакой на траве"),
    // Animals: pets, farm, wild, birds, sea life, insects.
    ("animals", "a cat sleeping on a sofa"),
    ("animals", "a golden retriever puppy in the grass"),
    ("animals", "a black cat on a chair"),
    ("animals", "a cow in a green meadow"),
    ("animals", "pigs on a farm"),
    ("animals", "a white sheep on a hill"),
    ("animals", "a goat in the mountains"),
    ("animals", "a rooster at sunrise"),
    ("animals", "an elephant in the savanna"),
    ("animals", "a lion in the desert at sunset"),
    ("animals", "a tiger in the jungle"),
    ("animals", "a giraffe eating from a tree"),
    ("animals", "a zebra and a giraffe"),
    ("animals", "a monkey in a palm tree"),
    ("animals", "penguins on the ice"),
    ("animals", "a turtle on the beach"),
    ("animals", "a frog on a lily pad in a pond"),
    ("animals", "a snake in the grass"),
    ("animals", "a mouse with cheese"),
    ("animals", "a squirrel in an autumn forest"),
    ("animals", "a hedgehog in the forest"),
    ("animals", "a parrot on a branch"),
    ("animals", "an eagle flying over the mountains"),
    ("animals", "a bee on a flower"),
    ("animals", "a butterfly in a field of flowers"),
    ("animals", "a shark underwater"),
    ("animals", "an octopus underwater"),
    ("animals", "a crab on the sand"),
    ("animals", "jellyfish in the deep sea"),
    ("animals", "a fox in the snow"),
    ("animals", "a wolf howling at the moon"),
    ("animals", "a bear in the forest"),
    ("animals", "a rabbit in a meadow"),
    ("animals", "an owl at night"),
    ("animals", "swans on a lake"),
    ("animals", "кот на подоконнике"),
    ("animals", "корова на лугу"),
    ("animals", "слон в саванне"),
    ("animals", "тигр в джунглях"),
    ("animals", "пингвины на льдине"),
    ("animals", "белка в осеннем лесу"),
    ("animals", "ёжик в тумане"),
    ("animals", "лошадь в поле"),
    ("animals", "черепаха на пляже"),
    ("animals", "акула под водой"),
    // Vehicles of land, water, air and space.
    ("vehicles", "a red car on a mountain road"),
    ("vehicles", "a yellow school bus in the city"),
    ("vehicles", "a truck on the highway"),
    ("vehicles", "a bicycle by the river"),
    ("vehicles", "a motorcycle at night in the city"),
    ("vehicles", "a steam train in the mountains"),
    ("vehicles", "a tractor in a field"),
    ("vehicles", "an airplane in the blue sky"),
    ("vehicles", "a helicopter over the sea"),
    ("vehicles", "a sailboat on the lake"),
    ("vehicles", "a pirate ship in a storm"),
    ("vehicles", "a submarine underwater"),
    ("vehicles", "a rocket launching into space"),
    ("vehicles", "a flying saucer over a field at night"),
    ("vehicles", "a hot air balloon over the mountains"),
    ("vehicles", "красная машина на дороге"),
    ("vehicles", "поезд едет через лес"),
    ("vehicles", "самолет над облаками"),
    ("vehicles", "корабль в море на закате"),
    ("vehicles", "велосипед у дома"),
    // Food and drink.
    ("food", "a pizza on a wooden table"),
    ("food", "a cheeseburger"),
    ("food", "a birthday cake with candles"),
    ("food", "a loaf of bread"),
    ("food", "an ice cream cone"),
    ("food", "donuts with sprinkles"),
    ("food", "a glass of red wine"),
    ("food", "a bowl of ramen"),
    ("food", "strawberries"),
    ("food", "a slice of watermelon"),
    ("food", "a bunch of grapes"),
    ("food", "a cup of coffee"),
    ("food", "a bottle of wine and grapes on a table"),
    ("food", "apples and pears in a bowl"),
    ("food", "a bowl of soup"),
    ("food", "пицца на столе"),
    ("food", "торт со свечами"),
    ("food", "чашка кофе и круассан"),
    ("food", "арбуз и клубника"),
    ("food", "тарелка борща"),
    // Household objects, instruments and furniture.
    ("things", "a vase with flowers"),
    ("things", "a teapot and cups"),
    ("things", "a candle in the dark"),
    ("things", "a stack of books"),
    ("things", "a table lamp"),
    ("things", "a laptop on a desk"),
    ("things", "a smartphone"),
    ("things", "an alarm clock"),
    ("things", "a wooden chair"),
    ("things", "a red sofa"),
    ("things", "a bench in the park"),
    ("things", "a grand piano"),
    ("things", "an acoustic guitar"),
    ("things", "a violin"),
    ("things", "a drum"),
    ("things", "an old television"),
    ("things", "an umbrella in the rain"),
    ("things", "a soccer ball"),
    ("things", "ваза с цветами"),
    ("things", "гитара"),
    ("things", "свеча на столе"),
    ("things", "часы"),
    // Interiors.
    ("interiors", "a cozy room with a sofa and a lamp"),
    ("interiors", "a piano by the window"),
    ("interiors", "a cat on a chair by the fireplace"),
    ("interiors", "a kitchen with a teapot"),
    ("interiors", "a library with books and a candle"),
    ("interiors", "уютная комната с диваном"),
    // Buildings and cities.
    ("buildings", "a church in a village"),
    ("buildings", "an old stone tower on a hill"),
    ("buildings", "a tent in the mountains at night"),
    ("buildings", "a castle on a hill"),
    ("buildings", "a lighthouse on a cliff"),
    ("buildings", "a small house in the forest"),
    ("buildings", "a windmill in a field of tulips"),
    ("buildings", "a japanese pagoda with cherry blossoms"),
    ("buildings", "a city skyline at night"),
    ("buildings", "a street in the city with cars"),
    ("buildings", "церковь в деревне"),
    ("buildings", "палатка у озера"),
    ("buildings", "старая башня"),
    ("buildings", "замок на горе"),
    // Fantasy and science fiction.
    ("fantasy", "a dragon flying over a castle"),
    ("fantasy", "a unicorn in an enchanted forest"),
    ("fantasy", "a wizard with a staff"),
    ("fantasy", "a witch on a broom at night"),
    ("fantasy", "a princess in a pink dress"),
    ("fantasy", "a fairy in the forest"),
    ("fantasy", "an angel with wings"),
    ("fantasy", "an astronaut on the moon"),
    ("fantasy", "a robot in a futuristic city"),
    ("fantasy", "an alien on a strange planet"),
    ("fantasy", "a ghost in a haunted house"),
    ("fantasy", "a dinosaur in the jungle"),
    ("fantasy", "a mermaid in the sea"),
    ("fantasy", "a pirate on a ship"),
    ("fantasy", "a knight fighting a dragon"),
    ("fantasy", "дракон над замком"),
    ("fantasy", "единорог на лугу"),
    ("fantasy", "волшебник в лесу"),
    ("fantasy", "космонавт в космосе"),
    ("fantasy", "робот в городе"),
    ("fantasy", "принцесса в замке"),
    ("fantasy", "русалка в море"),
    ("fantasy", "привидение в старом доме"),
    // Sports.
    ("sports", "a football player with a ball"),
    ("sports", "a basketball"),
    ("sports", "a cyclist on a mountain road"),
    ("sports", "a boy playing soccer on a field"),
    ("sports", "a tennis ball"),
    ("sports", "футболист с мячом"),
    ("sports", "велосипедист на дороге"),
    // Text and logo posters.
    ("posters", "a poster with the text \"SALE\""),
    ("posters", "a poster of a red rose with \"Love\""),
    (
        "posters",
        "a birthday card \"Happy Birthday\" with balloons",
    ),
    ("posters", "a coffee shop sign \"Open\""),
    ("posters", "logo of a fox \"Pictor\""),
    ("posters", "постер \"Лето\" с пальмами"),
    ("posters", "вывеска \"Кафе\" с чашкой кофе"),
    // Landscapes with secondary objects, weather, mood and viewpoint.
    ("landscapes", "a lighthouse in a storm with lightning"),
    ("landscapes", "mountains at sunrise with fog"),
    ("landscapes", "a snowy village at night with a full moon"),
    ("landscapes", "a rainbow over a waterfall"),
    ("landscapes", "a desert with a camel at sunset"),
    ("landscapes", "a calm lake with a boat at dawn"),
    ("landscapes", "autumn forest with a river"),
    ("landscapes", "a tropical island with palm trees"),
    ("landscapes", "northern lights over a frozen lake"),
    ("landscapes", "a field of sunflowers under a blue sky"),
    ("landscapes", "горы и озеро на закате"),
    ("landscapes", "зимний лес со снегом"),
    ("landscapes", "гроза над морем"),
];

#[test]
fn the_panel_is_broad() {
    assert!(PANEL.len() >= 200, "{} prompts", PANEL.len());
    let russian = PANEL
        .iter()
        .filter(|(_, p)| p.chars().any(|c| ('а'..='я').contains(&c)))
        .count();
    assert!(russian >= 40, "{russian} Russian prompts");
    for category in [
        "people",
        "animals",
        "vehicles",
        "food",
        "things",
        "interiors",
        "buildings",
        "fantasy",
        "sports",
        "posters",
    ] {
        let n = PANEL.iter().filter(|(c, _)| *c == category).count();
        assert!(n >= 5, "{category}: {n}");
    }
}

#[test]
fn every_content_word_is_accounted_for_and_most_are_drawn() {
    let (mut drawn, mut total) = (0usize, 0usize);
    let mut misses: Vec<String> = Vec::new();
    let mut per_category: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for (category, prompt) in PANEL {
        let scene = describe(prompt);
        // Every prompt on the panel names something, and nothing named is both drawn and not.
        assert!(
            !scene.drawn.is_empty() || !scene.not_drawn.is_empty(),
            "nothing read from {prompt:?}"
        );
        for word in &scene.drawn {
            assert!(!scene.not_drawn.contains(word), "{prompt:?}: {word}");
        }
        drawn += scene.drawn.len();
        total += scene.drawn.len() + scene.not_drawn.len();
        let entry = per_category.entry(category).or_default();
        entry.0 += scene.drawn.len();
        entry.1 += scene.drawn.len() + scene.not_drawn.len();
        if !scene.not_drawn.is_empty() {
            misses.push(format!("{prompt:?}: {}", scene.not_drawn.join(", ")));
        }
    }
    let rate = drawn as f64 / total as f64;
    println!(
        "drawn {drawn} of {total} named content words: {:.1}%",
        rate * 100.0
    );
    for (category, (d, t)) in &per_category {
        println!("  {category}: {d}/{t}");
    }
    println!("not drawn:\n  {}", misses.join("\n  "));
    assert!(rate >= 0.90, "drawn rate {:.1}% is below 90%", rate * 100.0);
}

#[test]
fn subjects_the_painter_cannot_draw_are_reported_not_replaced() {
    let scene = describe("a unicorn and a spaceship");
    assert!(scene.drawn.contains(&"unicorn".to_string()), "{scene:?}");
    let scene = describe("a kangaroo next to a skyscraper");
    assert_eq!(scene.drawn, Vec::<String>::new(), "{scene:?}");
    assert!(
        scene.not_drawn.contains(&"kangaroo".to_string()),
        "{scene:?}"
    );
    assert!(
        scene.not_drawn.contains(&"skyscraper".to_string()),
        "{scene:?}"
    );
    // Russian words come out under their English names; unknown words as written.
    let scene = describe("кенгуру и дракон");
    assert!(
        scene.not_drawn.contains(&"kangaroo".to_string()),
        "{scene:?}"
    );
    assert!(scene.drawn.contains(&"dragon".to_string()), "{scene:?}");
    let scene = describe("a quokka on a rock");
    assert!(scene.not_drawn.contains(&"quokka".to_string()), "{scene:?}");
    // What people do beyond standing, sitting, walking, running, riding and playing is not
    // drawn, and a Russian verb says so as its English counterpart does (the reader takes other
    // Russian verb forms for grammar).
    for prompt in [
        "рыцарь сражается с драконом",
        "a knight fighting a dragon",
        "рыцарь бьётся с драконом",
    ] {
        let scene = describe(prompt);
        for word in ["knight", "dragon"] {
            assert!(
                scene.drawn.contains(&word.to_string()),
                "{prompt}: {scene:?}"
            );
        }
        assert_eq!(
            scene.not_drawn,
            vec!["fighting".to_string()],
            "{prompt}: {scene:?}"
        );
    }
    for (prompt, action) in [
        ("девочка танцует под дождём", "dancing"),
        ("a girl reading a book", "reading"),
        ("кот спит на диване", "sleeping"),
        ("мальчик читает книгу", "reading"),
    ] {
        let scene = describe(prompt);
        assert!(
            scene.not_drawn.contains(&action.to_string()),
            "{prompt}: {scene:?}"
        );
    }
    // Boilerplate is not a subject.
    let scene = describe("a cat, highly detailed, 4k, masterpiece, trending on artstation");
    assert_eq!(scene.drawn, vec!["cat".to_string()], "{scene:?}");
    assert_eq!(scene.not_drawn, Vec::<String>::new(), "{scene:?}");
}

#[test]
fn clothes_poses_and_what_people_hold_are_drawn() {
    let scene = describe("a woman in a red dress holding an umbrella");
    for word in ["person", "dress", "umbrella"] {
        assert!(scene.drawn.contains(&word.to_string()), "{word}: {scene:?}");
    }
    let scene = describe("a knight riding a horse");
    for word in ["knight", "riding", "horse"] {
        assert!(scene.drawn.contains(&word.to_string()), "{word}: {scene:?}");
    }
    let scene = describe("старик сидит на скамейке");
    for word in ["person", "sitting", "bench"] {
        assert!(scene.drawn.contains(&word.to_string()), "{word}: {scene:?}");
    }
}

/// The gallery sheet: 40 panel prompts at `fast`, 8 × 5, each captioned.
#[test]
#[ignore]
fn gallery_sheet() {
    use render::{Model, Ratio, procedural::render};
    const PICKS: [usize; 40] = [
        0, 1, 2, 4, 7, 9, 20, 24, 33, 38, 39, 42, 44, 52, 55, 57, 66, 75, 76, 79, 82, 84, 87, 95,
        96, 98, 101, 104, 116, 117, 122, 124, 132, 133, 141, 153, 161, 163, 168, 174,
    ];
    let cells: Vec<_> = PICKS
        .iter()
        .map(|&k| {
            let prompt = PANEL[k].1;
            (
                prompt.to_string(),
                render(prompt, Model::Fast, Ratio::Square, 7),
            )
        })
        .collect();
    sheet::write("panel-sheet.png", 8, (192, 192, 30), &cells);
}
