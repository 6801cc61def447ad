//! A property test of admission (issue 57): generated documents whose fragments spread
//! each other in cycles of any length and placement, chains that double at each link,
//! diamonds, spreads under inline fragments and under `@skip`, and spreads of unknown
//! fragments. Each is sent to the real gateway over HTTP; each must be answered, with
//! the error an independent model of its fragment graph predicts, and `/health` must
//! answer after every case.
//!
//! The model ([`Doc::expect`]) expands nothing either: it memoizes each fragment's
//! counts, and it is a second, simpler implementation of what the gateway refuses
//! (a cycle or an unknown fragment; more than `--max-fields` fields or fragment uses
//! once expanded; more than `--max-root-fields` root fields).
//!
//! Bounded: `PROPTEST_CASES` cases (default 160), each one request and one `/health`.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::Lab;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};

/// One selection of a fragment or of the operation.
#[derive(Debug, Clone)]
enum Item {
    /// A root field of the seed graph with its selection.
    Field(&'static str),
    /// `...F{n}` (an index past the last fragment names one that does not exist),
    /// with `@skip(if: true)` when the flag is set.
    Spread(usize, bool),
    /// `... on Query { … }`.
    Inline(Vec<Item>),
}

const FIELDS: [&str; 3] = ["me { id }", "topPosts(count: 1) { pid }", "__typename"];

/// A document: fragments `F0…`, and the operation's selection.
#[derive(Debug, Clone)]
struct Doc {
    fragments: Vec<Vec<Item>>,
    root: Vec<Item>,
}

/// What the gateway must answer.
#[derive(Debug, PartialEq)]
enum Expect {
    /// A cycle or an unknown fragment.
    BadFragments,
    TooManyFields,
    TooManyRoots,
    /// Admitted: anything well formed (validation may still refuse it).
    Admitted,
}

#[derive(Clone, Copy, Default)]
struct Counts {
    fields: u128,
    fragments: u128,
    roots: u128,
}

impl Doc {
    fn render(&self) -> String {
        fn items(out: &mut String, list: &[Item]) {
            for item in list {
                match item {
                    Item::Field(f) => out.push_str(f),
                    Item::Spread(n, skip) => {
                        out.push_str(&format!("...F{n}"));
                        if *skip {
                            out.push_str(" @skip(if: true)");
                        }
                    }
                    Item::Inline(inner) => {
                        out.push_str("... on Query { ");
                        items(out, inner);
                        out.push('}');
                    }
                }
                out.push(' ');
            }
        }
        let mut out = String::from("query { ");
        items(&mut out, &self.root);
        out.push('}');
        for (i, f) in self.fragments.iter().enumerate() {
            out.push_str(&format!(" fragment F{i} on Query {{ "));
            items(&mut out, f);
            out.push('}');
        }
        out
    }

    fn spreads(list: &[Item], out: &mut Vec<usize>) {
        for item in list {
            match item {
                Item::Spread(n, _) => out.push(*n),
                Item::Inline(inner) => Doc::spreads(inner, out),
                Item::Field(_) => {}
            }
        }
    }

    /// The model: a cycle or unknown fragment anywhere; else the expanded counts.
    fn expect(&self) -> Expect {
        let n = self.fragments.len();
        let mut edges = Vec::new();
        for f in &self.fragments {
            let mut out = Vec::new();
            Doc::spreads(f, &mut out);
            edges.push(out);
        }
        let mut root_spreads = Vec::new();
        Doc::spreads(&self.root, &mut root_spreads);
        if edges
            .iter()
            .chain([&root_spreads])
            .flatten()
            .any(|&t| t >= n)
        {
            return Expect::BadFragments;
        }
        // Cycle: repeatedly remove fragments that spread nothing left.
        let mut left: Vec<bool> = vec![true; n];
        loop {
            let leaf = (0..n).find(|&i| left[i] && edges[i].iter().all(|&t| !left[t]));
            match leaf {
                Some(i) => left[i] = false,
                None => break,
            }
        }
        if left.iter().any(|&l| l) {
            return Expect::BadFragments;
        }
        let mut memo: HashMap<usize, Counts> = HashMap::new();
        let c = self.counts(&self.root, &mut memo);
        if c.fields > 2000 || c.fragments > 2000 {
            Expect::TooManyFields
        } else if c.roots > 64 {
            Expect::TooManyRoots
        } else {
            Expect::Admitted
        }
    }

    fn counts(&self, list: &[Item], memo: &mut HashMap<usize, Counts>) -> Counts {
        let mut c = Counts::default();
        for item in list {
            let add = match item {
                Item::Field(f) => {
                    let fields = if f.contains('{') { 2 } else { 1 };
                    Counts {
                        fields,
                        fragments: 0,
                        roots: 1,
                    }
                }
                Item::Spread(n, _) => {
                    let inner = match memo.get(n) {
                        Some(c) => *c,
                        None => {
                            let c = self.counts(&self.fragments[*n], memo);
                            memo.insert(*n, c);
                            c
                        }
                    };
                    Counts {
                        fragments: inner.fragments + 1,
                        ..inner
                    }
                }
                Item::Inline(inner) => {
                    let inner = self.counts(inner, memo);
                    Counts {
                        fragments: inner.fragments + 1,
                        ..inner
                    }
                }
            };
            c.fields = c.fields.saturating_add(add.fields);
            c.fragments = c.fragments.saturating_add(add.fragments);
            c.roots = c.roots.saturating_add(add.roots);
        }
        c
    }
}

fn field() -> impl Strategy<Value = Item> {
    prop::sample::select(FIELDS.to_vec()).prop_map(Item::Field)
}

/// Any fragment graph: each fragment's items spread any fragment (or one past the
/// last), so cycles, shared fragments and unknown names all arise.
fn any_graph() -> impl Strategy<Value = Doc> {
    (1usize..10).prop_flat_map(|n| {
        let item = prop_oneof![
            3 => field(),
            4 => (0..=n, any::<bool>()).prop_map(|(t, s)| Item::Spread(t, s)),
            1 => (0..=n).prop_map(|t| Item::Inline(vec![Item::Spread(t, false)])),
        ];
        let list = prop::collection::vec(item, 1..5);
        (prop::collection::vec(list.clone(), n), list)
            .prop_map(|(fragments, root)| Doc { fragments, root })
    })
}

/// A ring of `len` fragments entered from a chain of `lead` fragments; every link
/// spreads the next `width` times, the ring's last spreads the ring's first.
fn cycle() -> impl Strategy<Value = Doc> {
    (0usize..6, 1usize..9, 1usize..3, any::<bool>()).prop_map(|(lead, len, width, inline)| {
        let n = lead + len;
        let link = |to: usize| {
            let spread = Item::Spread(to, false);
            let one = if inline {
                Item::Inline(vec![spread])
            } else {
                spread
            };
            vec![one; width]
        };
        let mut fragments = Vec::new();
        for i in 0..n {
            let next = if i + 1 == n { lead } else { i + 1 };
            let mut items = link(next);
            items.push(Item::Field(FIELDS[i % 3]));
            fragments.push(items);
        }
        Doc {
            fragments,
            root: vec![Item::Spread(0, false)],
        }
    })
}

/// A chain of `len` fragments each spreading the next `width` times (under `@skip`
/// or not), ending in a field: `width^len` expansions.
fn chain() -> impl Strategy<Value = Doc> {
    (1usize..40, 2usize..4, any::<bool>()).prop_map(|(len, width, skip)| {
        let mut fragments: Vec<Vec<Item>> = (0..len)
            .map(|i| vec![Item::Spread(i + 1, skip); width])
            .collect();
        fragments.push(vec![Item::Field(FIELDS[0])]);
        Doc {
            fragments,
            root: vec![Item::Spread(0, false)],
        }
    })
}

/// Diamonds stacked `depth` high: each level's `width` fragments all spread every
/// fragment of the level below.
fn diamonds() -> impl Strategy<Value = Doc> {
    (1usize..8, 1usize..5).prop_map(|(depth, width)| {
        let mut fragments = Vec::new();
        for level in 0..depth {
            for _ in 0..width {
                let below = (level + 1) * width;
                let items = if level + 1 == depth {
                    vec![Item::Field(FIELDS[1]), Item::Field(FIELDS[2])]
                } else {
                    (below..below + width)
                        .map(|t| Item::Spread(t, false))
                        .collect()
                };
                fragments.push(items);
            }
        }
        // The top: the operation spreads the first level.
        let root = (0..width).map(|t| Item::Spread(t, false)).collect();
        Doc { fragments, root }
    })
}

fn documents() -> impl Strategy<Value = Doc> {
    prop_oneof![any_graph(), cycle(), chain(), diamonds()]
}

#[test]
fn hostile_fragment_graphs_are_answered_as_the_model_predicts_and_health_holds() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let lab = rt.block_on(Lab::start());
    let health = format!("http://{}/health", lab.gateway.addr);
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(160);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let seen: std::sync::Mutex<HashMap<String, usize>> = Default::default();
    runner
        .run(&documents(), |doc| {
            let text = doc.render();
            let expect = doc.expect();
            *seen
                .lock()
                .unwrap()
                .entry(format!("{expect:?}"))
                .or_default() += 1;
            rt.block_on(async {
                let send = lab
                    .http
                    .post(lab.gateway.url())
                    .json(&json!({ "query": text }));
                let answer = tokio::time::timeout(Duration::from_secs(10), send.send())
                    .await
                    .map_err(|_| TestCaseError::fail(format!("no answer to {text}")))?
                    .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
                prop_assert_eq!(answer.status().as_u16(), 200, "{}", text);
                let v: Value = answer
                    .json()
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let message = v["errors"][0]["message"].as_str().unwrap_or("").to_string();
                match expect {
                    Expect::BadFragments => prop_assert!(
                        message.contains("within itself") || message.contains("Unknown fragment"),
                        "{} → {}",
                        text,
                        v
                    ),
                    Expect::TooManyFields => {
                        prop_assert!(message.contains("(--max-fields)"), "{} → {}", text, v)
                    }
                    Expect::TooManyRoots => {
                        prop_assert!(message.contains("(--max-root-fields)"), "{} → {}", text, v)
                    }
                    Expect::Admitted => prop_assert!(
                        v.get("data").is_some() || !message.is_empty(),
                        "{} → {}",
                        text,
                        v
                    ),
                }
                let healthy =
                    tokio::time::timeout(Duration::from_secs(5), lab.http.get(&health).send())
                        .await
                        .map_err(|_| {
                            TestCaseError::fail(format!("/health did not answer after {text}"))
                        })?
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(healthy.status().as_u16(), 200);
                Ok(())
            })
        })
        .unwrap();
    // Every kind of outcome was met, so the test cannot pass by generating one kind.
    let seen = seen.into_inner().unwrap();
    for kind in ["BadFragments", "TooManyFields", "Admitted"] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) > 0,
            "{kind} never generated: {seen:?}"
        );
    }
    let seed = rt.block_on(lab.query("{ me { id } }"));
    assert_eq!(seed["data"]["me"]["id"], "u1");
}
