//! Fuzzing the planner: random operations over an audit-style graph, each answered by
//! the real gateway over five federated subgraphs and by a reference executor that
//! resolves the same data without federation; the answers must agree.
//!
//! One description ([`graph`], with the data of [`data`]) makes both sides: the
//! subgraphs ([`subgraphs`]), whose SDL is committed in `planner_fuzz/supergraph/`
//! and composed there by a standard composer into `supergraph.graphql`
//! (scripts/compose-planner-fuzz.sh), and the monolithic reference ([`reference`]).
//! The gateway runs in process over the committed supergraph (`--supergraph`), twice:
//! without a cache, and with the resolver cache on (an entry keyed wrongly shows as a
//! wrong answer).
//!
//! For each operation of the generator ([`operations`]): the reference validates it
//! (an operation it refuses is counted and dropped); then each gateway's answer must be
//! a 200 with `data` and no `errors`, equal to the reference's as JSON, with its keys in
//! the operation's selection order ([`oracle`]). A failure is shrunk ([`shrink`]) and
//! reported with the seed, the case, the operation before and after shrinking, both
//! answers and where they differ; shrunk failures go to `planner_fuzz/regressions.txt`,
//! replayed on every run.
//!
//! Bounded for the test suite: `PLANNER_FUZZ_CASES` operations (default 400) from seed
//! `PLANNER_FUZZ_SEED` (default 1); `PLANNER_FUZZ_SECONDS=N` runs for N seconds from a
//! seed taken from the clock (`scripts/fuzz.sh --planner DURATION`).

mod common;
#[path = "planner_fuzz/data.rs"]
mod data;
#[path = "planner_fuzz/graph.rs"]
mod graph;
#[path = "planner_fuzz/operations.rs"]
mod operations;
#[path = "planner_fuzz/oracle.rs"]
mod oracle;
#[path = "planner_fuzz/reference.rs"]
mod reference;
#[path = "planner_fuzz/schema.rs"]
mod schema;
#[path = "planner_fuzz/shrink.rs"]
mod shrink;
#[path = "planner_fuzz/spec.rs"]
mod spec;
#[path = "planner_fuzz/subgraphs.rs"]
mod subgraphs;

use std::path::PathBuf;
use std::sync::Arc;

use async_graphql::Value;
use common::campaign::Campaign;
use common::Server;
use data::Data;
use gateway::startup::GraphSource;
use operations::Operation;
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use serde_json::json;
use subgraphs::Subgraphs;

/// `gateway/tests/planner_fuzz/`, where the committed SDL, supergraph and regressions are.
fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/planner_fuzz")
}

/// The subgraphs, the gateways over them, and the reference.
struct Rig {
    data: Arc<Data>,
    subgraphs: Subgraphs,
    gateways: Vec<(&'static str, Server)>,
    reference: async_graphql::dynamic::Schema,
    http: reqwest::Client,
}

async fn rig() -> Rig {
    let data = Arc::new(Data::seeded());
    let subgraphs = Subgraphs::start(&data).await;
    let path = dir().join("supergraph/supergraph.graphql");
    let sdl = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut gateways = Vec::new();
    for (label, cache) in [("uncached", None), ("cached", common::cache(600.0))] {
        let mut config = common::config(Vec::new());
        config.graph = GraphSource::Supergraph {
            subgraphs: gateway::supergraph::join::subgraphs_of(&sdl)
                .expect("the supergraph's subgraphs"),
            sdl: sdl.clone(),
            overrides: subgraphs.urls(),
        };
        config.cache = cache;
        let app = gateway::startup::build_app(&config)
            .await
            .expect("the gateway starts over the committed supergraph");
        let router =
            gateway::server::router_with_limits(app, gateway::server::load::LoadLimits::NONE);
        gateways.push((label, Server::start(router).await));
    }
    Rig {
        reference: reference::schema(data.clone()),
        data,
        subgraphs,
        gateways,
        http: reqwest::Client::new(),
    }
}

/// What became of one operation.
enum Verdict {
    /// The reference refused it: not a valid operation.
    Invalid(String),
    Pass,
    Fail(String),
}

/// Run `document` with `variables` on the reference, then on each gateway, and judge.
async fn judge(rig: &Rig, document: &str, variables: &serde_json::Value) -> Verdict {
    let parsed = match async_graphql_parser::parse_query(document) {
        Ok(parsed) => parsed,
        Err(e) => return Verdict::Invalid(e.to_string()),
    };
    let run = match oracle::Run::new(&parsed, variables) {
        Ok(run) => run,
        Err(e) => return Verdict::Invalid(format!("the oracle cannot run it: {e}")),
    };
    let expected = spec::execute(&rig.reference, &parsed, variables, true).await;
    if !expected.errors.is_empty() {
        let messages: Vec<String> = expected.errors.iter().map(|e| e.message.clone()).collect();
        if expected.errors.iter().all(|e| e.path.is_empty()) {
            return Verdict::Invalid(messages.join("; "));
        }
        return Verdict::Fail(format!("the reference itself failed: {messages:?}"));
    }
    let expected = expected.data;
    for (label, gateway) in &rig.gateways {
        let answer = rig
            .http
            .post(gateway.url())
            .json(&json!({ "query": document, "variables": variables }))
            .send()
            .await;
        let (status, text) = match answer {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => return Verdict::Fail(format!("{label} gateway: no answer: {e}")),
        };
        let why = match serde_json::from_str::<Value>(&text) {
            _ if status != 200 => Some(format!("status {status}")),
            Err(e) => Some(format!("the answer is not JSON: {e}")),
            Ok(Value::Object(body)) if body.keys().any(|k| k != "data") => {
                Some("the answer has more than data (errors?)".into())
            }
            Ok(Value::Object(body)) => {
                let got = body.get("data").cloned().unwrap_or(Value::Null);
                match oracle::difference(&got, &expected) {
                    Some(d) => Some(format!("the answers differ at {d}")),
                    None => oracle::in_query_order(&run, &got)
                        .err()
                        .map(|e| format!("not in query order: {e}")),
                }
            }
            Ok(_) => Some("the answer is not a JSON object".into()),
        };
        if let Some(why) = why {
            let reference = serde_json::to_string(&expected.into_json().unwrap_or_default())
                .unwrap_or_default();
            return Verdict::Fail(format!(
                "{label} gateway: {why}\n    reference answer: {reference}\n    gateway answer:   {text}"
            ));
        }
    }
    Verdict::Pass
}

/// How a failing operation is shown: its document and variables.
fn shown(document: &str, variables: &serde_json::Value) -> String {
    format!("    document: {document}\n    variables: {variables}")
}

/// Fetches each subgraph has served so far, as `name N` pairs.
async fn fetches(rig: &Rig) -> String {
    let mut out = Vec::new();
    for (name, server) in &rig.subgraphs.servers {
        let text = common::metrics_of(&rig.http, server.addr).await;
        let n = common::metric(&text, "subgraph_requests_total").unwrap_or(0.0);
        out.push(format!("{name} {n}"));
    }
    out.join(", ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_operations_get_the_reference_answer() {
    let rig = rig().await;
    let known = known_bugs();
    let mut known_hits = vec![0usize; known.len()];
    let campaign = Campaign::from_env("PLANNER_FUZZ", 400);
    let seed = campaign.seed;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut n, mut passed, mut invalid) = (0usize, 0usize, 0usize);
    let mut refusals: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    while campaign.goes_on(n) && failures.len() < 5 {
        let op = operations::generate(&mut rng, &rig.data);
        let (document, variables) = (op.document(), op.variables_json());
        match judge(&rig, &document, &variables).await {
            Verdict::Pass => passed += 1,
            Verdict::Invalid(why) => {
                invalid += 1;
                if refusals.len() < 5 {
                    refusals.push(format!("{why}\n{}", shown(&document, &variables)));
                }
            }
            Verdict::Fail(why) if known.iter().any(|(_, s)| why.contains(s.as_str())) => {
                let k = known
                    .iter()
                    .position(|(_, s)| why.contains(s.as_str()))
                    .unwrap_or(0);
                known_hits[k] += 1;
            }
            Verdict::Fail(why) => {
                let small = shrink::shrink(&op, 600, async |c: &Operation| {
                    let verdict = judge(&rig, &c.document(), &c.variables_json()).await;
                    matches!(verdict, Verdict::Fail(_))
                })
                .await;
                let (d, v) = (small.document(), small.variables_json());
                let small_why = match judge(&rig, &d, &v).await {
                    Verdict::Fail(why) => why,
                    _ => "(passes now)".into(),
                };
                failures.push(format!(
                    "seed {seed}, case {n}: {why}\n{}\n  shrunk: {small_why}\n{}",
                    shown(&document, &variables),
                    shown(&d, &v)
                ));
            }
        }
        n += 1;
    }
    let asked: Vec<&str> = rig.gateways.iter().map(|(label, _)| *label).collect();
    eprintln!(
        "planner fuzz ({} gateway): seed {seed}, {n} operations: {passed} answered as the reference did, \
         {invalid} refused as invalid by the reference and dropped, {} failure(s); \
         subgraph fetches: {}",
        asked.join(" and "),
        failures.len(),
        fetches(&rig).await
    );
    for ((title, signature), hits) in known.iter().zip(&known_hits) {
        if *hits > 0 {
            eprintln!("  KNOWN GATEWAY BUG hit by {hits} operation(s): {title} ({signature:?})");
        }
    }
    for r in &refusals {
        eprintln!("  refused: {r}");
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // A generator that mostly wrote invalid operations would test the validator alone.
    assert!(
        invalid * 10 <= n,
        "{invalid} of {n} generated operations were invalid"
    );
}

/// The known gateway bugs of `regressions.txt`: each one's title, and the part of a
/// failure's message that tells it (`### signature:`). A campaign's failure that shows
/// one is counted under it, loudly, and does not fail the run; any other fails it.
fn known_bugs() -> Vec<(String, String)> {
    regressions()
        .into_iter()
        .filter_map(|c| Some((c.title, c.signature?)))
        .collect()
}

/// A shrunk failing case of `regressions.txt`.
struct Case {
    title: String,
    /// Why it still fails, for a gateway bug not fixed yet.
    known_failing: Option<String>,
    /// What a failure's message says when this bug is its cause.
    signature: Option<String>,
    document: String,
    variables: serde_json::Value,
}

/// The cases of `regressions.txt`: each opens with `### case: TITLE`, may say
/// `### known failing: WHY`, `### signature: TEXT` and `### variables: JSON`, and has
/// its document on the lines that follow; lines starting with `#` alone are comments.
fn regressions() -> Vec<Case> {
    let path = dir().join("regressions.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cases: Vec<Case> = Vec::new();
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("### case: ") {
            cases.push(Case {
                title: title.to_string(),
                known_failing: None,
                signature: None,
                document: String::new(),
                variables: json!({}),
            });
            continue;
        }
        let Some(case) = cases.last_mut() else {
            continue;
        };
        if let Some(why) = line.strip_prefix("### known failing: ") {
            case.known_failing = Some(why.to_string());
        } else if let Some(s) = line.strip_prefix("### signature: ") {
            case.signature = Some(s.to_string());
        } else if let Some(v) = line.strip_prefix("### variables: ") {
            case.variables = serde_json::from_str(v)
                .unwrap_or_else(|e| panic!("regressions.txt, case {}: {e}", case.title));
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            case.document.push_str(line);
            case.document.push('\n');
        }
    }
    cases
}

/// Every fixed regression gets the reference answer; every known gateway bug still
/// fails (one that passes must lose its `known failing` line), and is named loudly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regressions_get_the_reference_answer() {
    let rig = rig().await;
    let cases = regressions();
    assert!(!cases.is_empty(), "regressions.txt has no cases");
    let mut problems = Vec::new();
    for case in &cases {
        if case.document.is_empty() {
            eprintln!(
                "KNOWN GATEWAY BUG, not reproduced alone (no document): {}: {}",
                case.title,
                case.known_failing.as_deref().unwrap_or("")
            );
            continue;
        }
        let verdict = judge(&rig, &case.document, &case.variables).await;
        match (&case.known_failing, verdict) {
            (None, Verdict::Pass) => {}
            (Some(why), Verdict::Fail(_)) => eprintln!(
                "KNOWN GATEWAY BUG, still failing: {}: {why} (run the ignored test \
                 known_gateway_bugs_get_the_reference_answer to see it)",
                case.title
            ),
            (Some(_), Verdict::Pass) => problems.push(format!(
                "{}: passes now; remove its `### known failing` line",
                case.title
            )),
            (_, Verdict::Invalid(why)) => problems.push(format!(
                "{}: no longer a valid operation: {why}",
                case.title
            )),
            (None, Verdict::Fail(why)) => problems.push(format!(
                "{}: {why}\n{}",
                case.title,
                shown(&case.document, &case.variables)
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// The known gateway bugs of `regressions.txt`, each expected to get the reference
/// answer: fails until they are fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "known gateway bugs the planner fuzzer found (regressions.txt, `### known failing`)"]
async fn known_gateway_bugs_get_the_reference_answer() {
    let rig = rig().await;
    let mut failing = Vec::new();
    for case in regressions()
        .iter()
        .filter(|c| c.known_failing.is_some() && !c.document.is_empty())
    {
        if let Verdict::Fail(why) = judge(&rig, &case.document, &case.variables).await {
            failing.push(format!(
                "{}: {why}\n{}",
                case.title,
                shown(&case.document, &case.variables)
            ));
        }
    }
    assert!(failing.is_empty(), "{}", failing.join("\n\n"));
}

/// The committed SDL files are what the subgraphs serve now, so the committed
/// supergraph, composed from them, is the graph the fuzzer runs.
/// `PLANNER_FUZZ_WRITE_SDL=1` rewrites them instead (scripts/compose-planner-fuzz.sh).
#[tokio::test]
async fn the_committed_sdl_is_what_the_subgraphs_serve() {
    let data = Arc::new(Data::seeded());
    let write = std::env::var_os("PLANNER_FUZZ_WRITE_SDL").is_some();
    let mut stale = Vec::new();
    for name in graph::SUBGRAPHS {
        let sdl = subgraphs::sdl(&subgraphs::schema(name, data.clone())).await;
        let path = dir().join(format!("supergraph/{name}.graphql"));
        if write {
            std::fs::write(&path, &sdl).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(sdl.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "not what the subgraphs serve: {stale:?}; run scripts/compose-planner-fuzz.sh and commit what it writes"
    );
}

/// The types of a schema's introspection, sorted, without the introspection types:
/// what the public schema is, whatever order a side lists it in.
fn public_types(introspection: serde_json::Value) -> serde_json::Value {
    fn sorted(v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Array(items) => {
                let mut items: Vec<serde_json::Value> = items.into_iter().map(sorted).collect();
                items.sort_by_key(|i| i.to_string());
                serde_json::Value::Array(items)
            }
            serde_json::Value::Object(map) => {
                serde_json::Value::Object(map.into_iter().map(|(k, v)| (k, sorted(v))).collect())
            }
            other => other,
        }
    }
    let types = introspection["__schema"]["types"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !t["name"].as_str().unwrap_or("__").starts_with("__"))
        .collect();
    sorted(serde_json::Value::Array(types))
}

const INTROSPECTION: &str = "{ __schema { types { kind name \
    fields { name type { ...T } args { name defaultValue type { ...T } } } \
    interfaces { name } possibleTypes { name } enumValues { name } } } } \
    fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }";

/// The reference answers the public schema the gateway serves over the committed
/// supergraph: the same types, fields, arguments, interfaces, members and values.
/// Several gateways are built, since a public schema that depended on the order of a
/// hash map would differ between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_answers_the_gateways_public_schema() {
    let data = Arc::new(Data::seeded());
    let reference = reference::schema(data);
    let expected = reference.execute(INTROSPECTION).await;
    assert!(expected.errors.is_empty(), "{:?}", expected.errors);
    let expected = public_types(expected.data.into_json().unwrap());
    for _ in 0..4 {
        let rig = rig().await;
        for (label, gateway) in &rig.gateways {
            let answer: serde_json::Value = rig
                .http
                .post(gateway.url())
                .json(&json!({ "query": INTROSPECTION }))
                .send()
                .await
                .expect("the gateway answers")
                .json()
                .await
                .expect("JSON");
            let got = public_types(answer["data"].clone());
            if got != expected {
                let (g, e) = (got.as_array().unwrap(), expected.as_array().unwrap());
                let differ: Vec<String> = g
                    .iter()
                    .filter(|t| !e.contains(t))
                    .map(|t| format!("gateway: {t}"))
                    .chain(
                        e.iter()
                            .filter(|t| !g.contains(t))
                            .map(|t| format!("reference: {t}")),
                    )
                    .collect();
                panic!(
                    "the {label} gateway's public schema differs:\n{}",
                    differ.join("\n")
                );
            }
        }
    }
}
