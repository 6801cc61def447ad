//! The seeded draws stay put: with a fixed seed, every key distribution a workload
//! can name, the operation mix and the netproxy's jitter give the same values, draw
//! for draw, as the build they were recorded from (rand 0.9, rand_chacha 0.9 and
//! rand_distr 0.5; rand 0.10 with its own ChaCha8 and rand_distr 0.6 give them all
//! unchanged). A dependency upgrade that moves a draw fails here, naming it; a run of
//! the same experiment file then still sends what an older run sent.
//!
//! The values are the draws themselves, not properties of them (the fits of the
//! samplers are the unit tests' in `workload/keys.rs`).

use std::time::{Duration, Instant};

use loadgen::netproxy::delay::{DelayModel, Direction};
use loadgen::workload::keys::{KeyFile, KeySet};
use loadgen::workload::mix::{OperationStream, Role};
use loadgen::workload::Workload;
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;

/// How many values each recorded sequence holds.
const DRAWS: usize = 20;

fn key_file(distribution: &str) -> KeyFile {
    KeyFile {
        distribution: distribution.into(),
        count: Some(1000),
        first: None,
        values: None,
        values_file: None,
        exponent: None,
        hot_fraction: None,
        hot_share: None,
    }
}

/// `DRAWS` keys from `file`, with a generator seeded as the workload seeds its own.
fn keys(file: &KeyFile, seed: u64) -> Vec<u64> {
    let set = KeySet::new("k", file).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..DRAWS).map(|_| set.sample(&mut rng)).collect()
}

#[test]
fn every_key_distribution_draws_the_recorded_keys() {
    let uniform = key_file("uniform");
    let mut small = key_file("uniform");
    small.first = Some(0);
    small.count = Some(3);
    let mut zipf = key_file("zipf");
    zipf.exponent = Some(0.99);
    let mut listed_zipf = key_file("zipf");
    listed_zipf.count = None;
    listed_zipf.exponent = Some(0.99);
    listed_zipf.values = Some(vec!["a".into(), "b".into(), "c".into(), "d".into()]);
    let mut hotspot = key_file("hotspot");
    hotspot.hot_fraction = Some(0.1);
    hotspot.hot_share = Some(0.9);
    let sequence = key_file("sequence");

    let cases: [(&str, &KeyFile, u64, [u64; DRAWS]); 6] = [
        ("uniform over 1..=1000", &uniform, 42, UNIFORM),
        ("uniform over 0..=2", &small, 42, UNIFORM_SMALL),
        ("zipf 0.99 over 1..=1000", &zipf, 42, ZIPF),
        ("zipf 0.99 over a list of 4", &listed_zipf, 42, ZIPF_LISTED),
        ("hotspot 10% / 90% over 1..=1000", &hotspot, 42, HOTSPOT),
        // No draw: a lone sample of a sequence is its first key.
        ("sequence", &sequence, 42, [1; DRAWS]),
    ];
    for (name, file, seed, expected) in cases {
        assert_eq!(keys(file, seed), expected, "{name}, seed {seed}");
    }
    // Another seed, other keys: the recorded values are not a constant.
    assert_ne!(keys(&uniform, 43), UNIFORM);
}

const UNIFORM: [u64; DRAWS] = [
    682, 951, 428, 628, 289, 150, 309, 804, 772, 239, 507, 902, 957, 593, 729, 180, 576, 172, 445,
    77,
];
const UNIFORM_SMALL: [u64; DRAWS] = [2, 2, 1, 1, 0, 0, 0, 2, 2, 0, 1, 2, 2, 1, 2, 0, 1, 0, 1, 0];
const ZIPF: [u64; DRAWS] = [
    87, 12, 4, 5, 173, 22, 721, 125, 38, 14, 2, 100, 1, 294, 80, 82, 2, 166, 12, 405,
];
const ZIPF_LISTED: [u64; DRAWS] = [0, 0, 2, 3, 2, 1, 1, 0, 1, 0, 2, 1, 1, 0, 2, 1, 3, 0, 3, 0];
const HOTSPOT: [u64; DRAWS] = [
    96, 63, 15, 81, 24, 91, 634, 18, 18, 8, 33, 8, 27, 76, 69, 10, 22, 70, 7, 66,
];

/// Three operations over three key sets (uniform, Zipf, hotspot) and a sequence.
const MIX: &str = r#"
[workload]
seed = 11
[workload.keys]
post = { distribution = "uniform", count = 1000 }
user = { distribution = "zipf", count = 500, exponent = 0.99 }
tag = { distribution = "hotspot", count = 200, hot_fraction = 0.2, hot_share = 0.8 }
page = { distribution = "sequence", count = 7 }
[[workload.operation]]
name = "post"
weight = 5
document = "query($p: ID!, $u: ID!) { getPost(pid: $p) { pid } user(id: $u) { id } }"
variables = { p = "p{post}", u = "u{user}" }
[[workload.operation]]
name = "tagged"
weight = 2
document = "query($t: ID!, $n: Int!) { tagged(tag: $t, page: $n) { pid } }"
variables = { t = "t{tag}", n = "{page}" }
[[workload.operation]]
name = "write"
weight = 1
document = "mutation($p: ID!, $t: String!) { updatePostTitle(pid: $p, title: $t) { pid } }"
variables = { p = "p{post}", t = "{version}" }
write = { type = "Post", id = "p{post}" }
"#;

/// `DRAWS` operations of one connection: each operation's name and the keys it drew,
/// by key set name (the sets it does not use are left out).
fn operations(workload: &Workload, role: Role, index: u64) -> Vec<String> {
    let mut stream = OperationStream::new(workload, role, index);
    (0..DRAWS)
        .map(|_| {
            let op = stream.next(workload);
            let operation = &workload.operations[op];
            let keys: Vec<String> = operation
                .draws
                .iter()
                .map(|&k| format!("{}={}", workload.keys[k].name, stream.keys[k]))
                .collect();
            format!("{} {}", operation.name, keys.join(" "))
        })
        .collect()
}

#[test]
fn the_mix_draws_the_recorded_operations_and_keys() {
    let workload = Workload::from_toml(MIX).unwrap().unwrap();
    let cases: [(Role, u64, [&str; DRAWS]); 4] = [
        (Role::All, 0, MIX_ALL_0),
        (Role::All, 3, MIX_ALL_3),
        (Role::Reads, 1, MIX_READS_1),
        (Role::Writes, 0, MIX_WRITES_0),
    ];
    for (role, index, expected) in cases {
        assert_eq!(
            operations(&workload, role, index),
            expected,
            "{role:?} connection {index}"
        );
    }
}

const MIX_ALL_0: [&str; DRAWS] = [
    "post post=91 user=7",
    "post post=869 user=2",
    "write post=126",
    "post post=988 user=7",
    "write post=118",
    "post post=1 user=6",
    "post post=393 user=384",
    "post post=427 user=2",
    "tagged page=1 tag=6",
    "tagged page=2 tag=20",
    "post post=378 user=14",
    "post post=480 user=1",
    "tagged page=3 tag=16",
    "post post=81 user=2",
    "post post=817 user=2",
    "tagged page=4 tag=17",
    "write post=732",
    "write post=154",
    "post post=431 user=3",
    "post post=93 user=41",
];
const MIX_ALL_3: [&str; DRAWS] = [
    "post post=281 user=21",
    "tagged page=4 tag=40",
    "post post=531 user=13",
    "post post=311 user=3",
    "tagged page=5 tag=174",
    "post post=419 user=62",
    "post post=794 user=36",
    "post post=886 user=4",
    "post post=940 user=33",
    "tagged page=6 tag=11",
    "post post=323 user=23",
    "tagged page=7 tag=18",
    "tagged page=1 tag=68",
    "tagged page=2 tag=7",
    "tagged page=3 tag=19",
    "post post=113 user=16",
    "post post=532 user=329",
    "post post=72 user=318",
    "post post=228 user=17",
    "post post=458 user=10",
];
const MIX_READS_1: [&str; DRAWS] = [
    "post post=967 user=12",
    "post post=470 user=14",
    "post post=828 user=2",
    "tagged page=7 tag=27",
    "post post=539 user=14",
    "post post=419 user=98",
    "tagged page=1 tag=31",
    "post post=872 user=19",
    "tagged page=2 tag=21",
    "post post=25 user=477",
    "post post=27 user=84",
    "post post=476 user=152",
    "tagged page=3 tag=200",
    "post post=66 user=2",
    "tagged page=4 tag=40",
    "post post=602 user=2",
    "tagged page=5 tag=34",
    "tagged page=6 tag=33",
    "post post=628 user=169",
    "post post=394 user=1",
];
const MIX_WRITES_0: [&str; DRAWS] = [
    "write post=678",
    "write post=462",
    "write post=8",
    "write post=342",
    "write post=478",
    "write post=262",
    "write post=738",
    "write post=64",
    "write post=723",
    "write post=649",
    "write post=472",
    "write post=602",
    "write post=49",
    "write post=388",
    "write post=413",
    "write post=90",
    "write post=723",
    "write post=408",
    "write post=920",
    "write post=211",
];

/// The delays of `DRAWS` chunks a second apart (so the order rule never holds one
/// back), in nanoseconds.
fn delays(model: &DelayModel, connection: u64, direction: Direction) -> Vec<u64> {
    let mut line = model.line(connection, direction);
    let t0 = Instant::now();
    (0..DRAWS as u64)
        .map(|i| {
            let arrived = t0 + Duration::from_secs(i);
            (line.release(arrived) - arrived).as_nanos() as u64
        })
        .collect()
}

#[test]
fn the_netproxy_jitter_draws_the_recorded_delays() {
    let model = DelayModel::from_rtt(Duration::from_millis(4), Duration::from_micros(500), 7);
    assert_eq!(
        delays(&model, 0, Direction::Upstream),
        JITTER_0_UP,
        "connection 0 upstream"
    );
    assert_eq!(
        delays(&model, 5, Direction::Downstream),
        JITTER_5_DOWN,
        "connection 5 downstream"
    );
}

const JITTER_0_UP: [u64; DRAWS] = [
    1612314, 1308289, 2444857, 2179890, 2150005, 1675007, 1435360, 2541024, 1865121, 2782424,
    1489611, 1872293, 2053370, 1829954, 1932592, 2057499, 1604521, 1428334, 1773303, 1605882,
];
const JITTER_5_DOWN: [u64; DRAWS] = [
    2017205, 1660121, 2039861, 1588601, 1472462, 1107526, 2098050, 1499147, 2019771, 1445335,
    1899208, 1621989, 2194473, 1843862, 1074944, 1504395, 1751301, 1616881, 1735192, 2357349,
];
