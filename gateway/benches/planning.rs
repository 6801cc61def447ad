//! Plan time: what the gateway pays once per supergraph and once per new document to
//! plan with Hive's query planner (issue 20, point 2), through the public API.
//!
//! - `planning_build/*`: the [`Planner`] from a supergraph, as the gateway builds it at
//!   start-up:
//!   - `seed_compose`: the lab's two subgraphs' SDL composed as `--subgraph` does
//!     ([`Planner::compose`]), composition included;
//!   - `seed_supergraph`: the same graph from its composed supergraph SDL
//!     ([`Planner::from_sdl`]);
//!   - `commerce_supergraph`: `commerce-graph/supergraph/supergraph.graphql`, four
//!     subgraphs (products, inventory, reviews, accounts), from its SDL.
//! - `planning_compile/*`: one plan, as the gateway compiles it for a document it has
//!   not seen ([`Planner::compile_text`]): the text parsed, normalized and planned by
//!   Hive's planner, and turned into the gateway's own plan. Validation (async-graphql's,
//!   a separate step of the request path) is not included. Each query is planned twice:
//!   without a cache (`…`), and with one (`…+references`: every entity also asked for its
//!   key fields, as `--ttl` makes the gateway do). The queries:
//!   - `seed`: the seed query over the lab's own graph;
//!   - `commerce_<Name>`: each operation of `commerce-graph/queries/deep.graphql`, by
//!     name ([`Planner::compile_text_operation`]), over the commerce supergraph. The
//!     document is the whole file, as the lab's commerce runs send it (`operationName`
//!     picks one of its three operations), so each figure includes parsing all three.
//! - `planning_parse/*`: the parses a compile includes, of the same texts: async-graphql's
//!   (`seed`, `commerce_deep_graphql`) and the planner's own, graphql-parser's
//!   (`…_planner_parser`). A compile parses its text once with each.
//!
//! Run: `cargo bench -p gateway --bench planning -- --warm-up-time 1 --measurement-time 3`
//! (`scripts/planning-bench.sh` records a run, with each benchmark's median, in results/).

use std::hint::black_box;

use async_graphql_parser::types::DocumentOperations;
use criterion::{criterion_group, criterion_main, Criterion};
use gateway::plan::Planner;
use gateway::supergraph::Subgraph;

const SEED_QUERY: &str = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";
const COMMERCE_SUPERGRAPH: &str =
    include_str!("../../commerce-graph/supergraph/supergraph.graphql");
const COMMERCE_DEEP: &str = include_str!("../../commerce-graph/queries/deep.graphql");

/// The lab's two subgraphs and their federation SDL, as the gateway reads them.
fn seed_subgraphs() -> (Vec<Subgraph>, Vec<String>) {
    let options = async_graphql::SDLExportOptions::new().federation();
    let sdls = vec![
        user_service::schema().sdl_with_options(options),
        post_service::schema().sdl_with_options(options),
    ];
    let subgraphs = ["user", "post"]
        .map(|name| Subgraph {
            name: name.into(),
            url: format!("http://127.0.0.1/{name}/graphql"),
        })
        .to_vec();
    (subgraphs, sdls)
}

/// The names of the operations of `deep.graphql`, in file order.
fn operation_names(text: &str) -> Vec<String> {
    let doc = async_graphql_parser::parse_query(text).expect("deep.graphql parses");
    let DocumentOperations::Multiple(ops) = &doc.operations else {
        panic!("deep.graphql holds named operations");
    };
    let mut named: Vec<(usize, String)> = ops
        .iter()
        .map(|(name, op)| (op.pos.line, name.to_string()))
        .collect();
    named.sort();
    named.into_iter().map(|(_, name)| name).collect()
}

fn bench(c: &mut Criterion) {
    let (subgraphs, sdls) = seed_subgraphs();
    let seed_sdl = gateway::supergraph::compose::compose(&subgraphs, &sdls)
        .expect("the seed subgraphs compose");
    let deep = operation_names(COMMERCE_DEEP);
    assert!(!deep.is_empty(), "deep.graphql has no operation");

    let mut build = c.benchmark_group("planning_build");
    build.bench_function("seed_compose", |b| {
        b.iter(|| Planner::compose(black_box(&subgraphs), black_box(&sdls), false).unwrap())
    });
    build.bench_function("seed_supergraph", |b| {
        b.iter(|| Planner::from_sdl(black_box(&seed_sdl), false).unwrap())
    });
    build.bench_function("commerce_supergraph", |b| {
        b.iter(|| Planner::from_sdl(black_box(COMMERCE_SUPERGRAPH), false).unwrap())
    });
    build.finish();

    let mut compile = c.benchmark_group("planning_compile");
    for references in [false, true] {
        let suffix = if references { "+references" } else { "" };
        let seed = Planner::from_sdl(&seed_sdl, references).expect("the seed planner");
        let commerce =
            Planner::from_sdl(COMMERCE_SUPERGRAPH, references).expect("the commerce planner");
        let variables = Default::default();
        compile.bench_function(format!("seed{suffix}"), |b| {
            b.iter(|| {
                seed.compile_text(black_box(SEED_QUERY), &variables)
                    .unwrap()
            })
        });
        for name in &deep {
            // Plan once outside the loop, so that a query the planner refuses fails
            // with its message rather than inside the measurement.
            commerce
                .compile_text_operation(COMMERCE_DEEP, Some(name), &variables)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            compile.bench_function(format!("commerce_{name}{suffix}"), |b| {
                b.iter(|| {
                    commerce
                        .compile_text_operation(black_box(COMMERCE_DEEP), Some(name), &variables)
                        .unwrap()
                })
            });
        }
    }
    compile.finish();

    let mut parse = c.benchmark_group("planning_parse");
    for (name, text) in [
        ("seed", SEED_QUERY),
        ("commerce_deep_graphql", COMMERCE_DEEP),
    ] {
        parse.bench_function(name, |b| {
            b.iter(|| async_graphql_parser::parse_query(black_box(text)).unwrap())
        });
        parse.bench_function(format!("{name}_planner_parser"), |b| {
            b.iter(|| {
                graphql_tools::parser::parse_query::<String>(black_box(text))
                    .unwrap()
                    .into_static()
            })
        });
    }
    parse.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
