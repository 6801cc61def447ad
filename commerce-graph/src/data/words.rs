//! The words the generated data set is written with: product categories and their
//! nouns, the adjectives and materials of product names, people's names, the parts of
//! usernames, and the sentences reviews are made of.
//!
//! Changing a list changes every data set drawn from it (the draws pick by position),
//! so the lists are part of the data set's definition, like the seed.

/// A product category: the code that opens its SKUs, its label, and what it sells.
#[derive(Debug, PartialEq, Eq)]
pub struct Category {
    pub code: &'static str,
    pub label: &'static str,
    pub nouns: &'static [&'static str],
}

pub const CATEGORIES: [Category; 8] = [
    Category {
        code: "KIT",
        label: "Kitchen",
        nouns: &[
            "Kettle",
            "Skillet",
            "Colander",
            "Teapot",
            "Whisk",
            "Cutting Board",
            "Spice Rack",
            "Dutch Oven",
        ],
    },
    Category {
        code: "GAR",
        label: "Garden",
        nouns: &[
            "Trowel",
            "Planter",
            "Watering Can",
            "Hose Reel",
            "Pruner",
            "Bird Feeder",
            "Seed Tray",
            "Rake",
        ],
    },
    Category {
        code: "OFF",
        label: "Office",
        nouns: &[
            "Desk Lamp",
            "Notebook",
            "Stapler",
            "Monitor Stand",
            "Pen Case",
            "Letter Tray",
            "Desk Mat",
            "Bookend",
        ],
    },
    Category {
        code: "OUT",
        label: "Outdoors",
        nouns: &[
            "Tent",
            "Lantern",
            "Daypack",
            "Camp Stool",
            "Water Bottle",
            "Hammock",
            "Compass",
            "Cooler",
        ],
    },
    Category {
        code: "AUD",
        label: "Audio",
        nouns: &[
            "Speaker",
            "Headphones",
            "Turntable",
            "Radio",
            "Earbuds",
            "Amplifier",
            "Soundbar",
            "Microphone",
        ],
    },
    Category {
        code: "TOY",
        label: "Toys",
        nouns: &[
            "Kite",
            "Puzzle",
            "Yo-Yo",
            "Building Set",
            "Spinning Top",
            "Marble Run",
            "Rocking Horse",
            "Board Game",
        ],
    },
    Category {
        code: "BTH",
        label: "Bath",
        nouns: &[
            "Towel",
            "Soap Dish",
            "Bath Mat",
            "Shower Caddy",
            "Toothbrush Holder",
            "Robe",
            "Mirror",
            "Laundry Basket",
        ],
    },
    Category {
        code: "BIK",
        label: "Cycling",
        nouns: &[
            "Bell",
            "Bike Light",
            "Saddle Bag",
            "Floor Pump",
            "Bottle Cage",
            "Helmet",
            "U-Lock",
            "Pannier",
        ],
    },
];

pub const ADJECTIVES: [&str; 16] = [
    "Compact",
    "Sturdy",
    "Classic",
    "Folding",
    "Heavy-Duty",
    "Minimal",
    "Vintage",
    "Deluxe",
    "Everyday",
    "Portable",
    "Quiet",
    "Rugged",
    "Slim",
    "Modular",
    "Handmade",
    "Weatherproof",
];

pub const MATERIALS: [&str; 12] = [
    "Oak",
    "Walnut",
    "Bamboo",
    "Copper",
    "Steel",
    "Cast Iron",
    "Ceramic",
    "Linen",
    "Canvas",
    "Cork",
    "Glass",
    "Recycled Plastic",
];

/// What a product description says it is good for.
pub const USES: [&str; 10] = [
    "built for daily use",
    "easy to clean and store",
    "a gift that gets used",
    "made to last a decade",
    "light enough to carry anywhere",
    "designed in a small workshop",
    "tested through a long winter",
    "sized for small flats",
    "repairable with common tools",
    "packed without plastic",
];

pub const FIRST_NAMES: [&str; 24] = [
    "Ada", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kemal",
    "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Soren", "Tamsin", "Ugo",
    "Vera", "Wim", "Yara",
];

pub const LAST_NAMES: [&str; 24] = [
    "Almeida",
    "Brandt",
    "Castillo",
    "Dufour",
    "Eriksen",
    "Fontaine",
    "Gallo",
    "Horvath",
    "Ivanova",
    "Janssen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Novak",
    "Okafor",
    "Petrov",
    "Quist",
    "Rossi",
    "Sato",
    "Tanaka",
    "Urban",
    "Varga",
    "Weber",
    "Zielinski",
];

pub const HANDLE_WORDS: [&str; 16] = [
    "amber", "brisk", "calm", "dusty", "early", "fuzzy", "gentle", "hollow", "idle", "jolly",
    "keen", "lucky", "mellow", "nimble", "odd", "plain",
];

pub const HANDLE_ANIMALS: [&str; 16] = [
    "otter", "heron", "badger", "lynx", "marten", "wren", "ibex", "newt", "gecko", "finch",
    "stoat", "yak", "koala", "puffin", "tapir", "vole",
];

/// A review opens with one of these,
pub const OPENINGS: [&str; 10] = [
    "Arrived two days early and well packed.",
    "I bought this to replace one that broke after years.",
    "Ordered it on a friend's advice.",
    "Second one I have bought, the first went to my parents.",
    "Took a while to decide between this and a pricier brand.",
    "Picked this up during a sale.",
    "We have used it every day for a month now.",
    "The photos do not do it justice.",
    "It was a gift and it went down well.",
    "My old one finally gave up, so here we are.",
];

/// goes on with one or two of these,
pub const MIDDLES: [&str; 12] = [
    "The finish is better than expected for the price.",
    "Assembly took ten minutes with the included tool.",
    "It is heavier than it looks, which feels solid.",
    "One corner had a small scratch but nothing serious.",
    "The instructions were short and actually clear.",
    "It does exactly one thing and does it well.",
    "Size is a little smaller than the listing suggests.",
    "Colour matches the pictures closely.",
    "Customer service answered a question within an hour.",
    "It survived a fall from the counter without a mark.",
    "Cleaning it is quick, no hidden corners.",
    "The packaging was mostly cardboard, which I liked.",
];

/// and closes with one of these.
pub const CLOSINGS: [&str; 8] = [
    "Would buy again.",
    "Recommended.",
    "Good value overall.",
    "Not perfect, but I am keeping it.",
    "Five minutes in and I already liked it.",
    "Does the job.",
    "I have told two friends about it.",
    "Time will tell how it holds up.",
];
