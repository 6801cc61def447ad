//! Every request's work is bounded by a limit known before it runs (issue 57): each
//! limit refuses what it should with an error naming its flag, hostile documents that
//! once stopped the gateway are refused at once while it keeps serving, and the
//! defaults admit every operation a committed experiment sends.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use common::Lab;
use gateway::caching::requests::RequestStrategy;
use gateway::documents::{admit, cost, lexical, operation, DocumentLimits};
use serde_json::{json, Value};

const SEED_QUERY: &str =
    "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }";

fn message(v: &Value) -> String {
    v["errors"][0]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {v}"))
        .to_string()
}

/// `levels` nested `topPosts(count: 3) { author { … } }`: 3^levels posts.
fn amplification(levels: usize) -> String {
    let mut q = String::from("{ id }");
    for _ in 0..levels {
        q = format!("{{ topPosts(count: 3) {{ pid author {q} }} }}");
    }
    format!("{{ me {q} }}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_cycle_is_refused_at_once_and_a_hundred_leave_health_answering() {
    let lab = Lab::start().await;
    let body = r#"{"query":"query { ...A } fragment A on Query { ...A ...A }"}"#;
    let (status, text) = lab.post_raw(body).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(
        message(&v).contains("Cannot spread fragment \"A\" within itself"),
        "{text}"
    );
    assert!(v.get("data").is_none(), "{text}");
    // A hundred at once, with /health asked meanwhile and the seed query after.
    let health = format!("http://{}/health", lab.gateway.addr);
    let cycles = (0..100).map(|_| lab.post_raw(body));
    let (answers, healthy) = tokio::join!(
        futures::future::join_all(cycles),
        tokio::time::timeout(Duration::from_secs(5), lab.http.get(&health).send())
    );
    assert!(answers
        .iter()
        .all(|(s, t)| *s == 200 && t.contains("within itself")));
    assert_eq!(healthy.expect("/health answers").unwrap().status(), 200);
    let seed = lab.query(SEED_QUERY).await;
    assert_eq!(seed["data"]["me"]["id"], "u1", "{seed}");
}

#[tokio::test]
async fn each_limit_refuses_with_an_error_naming_its_flag() {
    let lab = Lab::start_with(|c| {
        c.documents.max_aliases = Some(8);
        c.documents.max_subgraph_requests = 4;
    })
    .await;
    // Tokens: counted before parsing, a 400.
    let flood = format!("{{ me {{ {} }} }}", "id ".repeat(20_000));
    let (status, text) = lab.post_raw(json!({ "query": flood }).to_string()).await;
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("more than 15000 tokens (--max-tokens)"),
        "{text}"
    );
    // A chain of 24 fragments, each spreading the next twice: 2^24 fields.
    let mut chain = String::from("{ ...F24 } fragment F0 on Query { me { id } }");
    for i in 1..=24 {
        chain.push_str(&format!(
            " fragment F{i} on Query {{ ...F{p} ...F{p} }}",
            p = i - 1
        ));
    }
    let v = lab.query(&chain).await;
    assert!(message(&v).contains("(--max-fields)"), "{v}");
    // Unknown fragments, even in a fragment no operation uses.
    let v = lab
        .query("{ me { id } } fragment U on Query { ...Nowhere }")
        .await;
    assert_eq!(message(&v), "Unknown fragment \"Nowhere\"");
    // The amplification query: refused before any fetch, with its estimate.
    let before = lab.subgraph_requests().await;
    let v = lab.query(&amplification(12)).await;
    assert!(message(&v).contains("(--max-cost)"), "{v}");
    let ext = &v["errors"][0]["extensions"];
    assert_eq!(ext["code"], "COST_ESTIMATED_TOO_EXPENSIVE", "{v}");
    assert!(ext["estimatedCost"].as_u64().unwrap() > 1_000_000, "{v}");
    assert_eq!(ext["maxCost"], 50_000, "{v}");
    assert_eq!(lab.subgraph_requests().await, before, "nothing was fetched");
    // Aliases, fragments expanded.
    let v = lab
        .query("{ ...M ...M } fragment M on Query { a: me { x: id y: id z: id w: id } }")
        .await;
    assert!(
        message(&v).contains("10 aliases (fragments expanded); the limit is 8 (--max-aliases)"),
        "{v}"
    );
    // Subgraph requests: five aliases of a root field are five fetches.
    let v = lab
        .query("{ a: topPosts(count: 1) { pid } b: topPosts(count: 1) { pid } c: topPosts(count: 1) { pid } d: topPosts(count: 1) { pid } e: topPosts(count: 1) { pid } }")
        .await;
    assert!(
        message(&v).contains("needs 5 subgraph requests; the limit is 4 (--max-subgraph-requests)"),
        "{v}"
    );
    assert_eq!(lab.subgraph_requests().await, before, "nothing was fetched");
    // Every refusal is counted by its limit.
    let metrics = lab.metrics(&lab.gateway).await;
    for (limit, n) in [
        ("text", 1.0),
        ("document", 3.0),
        ("cost", 1.0),
        ("subgraph_requests", 1.0),
    ] {
        let series = format!("gateway_refused_total{{limit=\"{limit}\"}}");
        assert_eq!(common::sample(&metrics, &series), Some(n), "{series}");
    }
    // And the gateway still answers.
    let seed = lab.query(SEED_QUERY).await;
    assert_eq!(seed["data"]["me"]["id"], "u1", "{seed}");
}

#[tokio::test]
async fn introspection_off_refuses_schema_queries_and_suggests_no_names() {
    let typo = "{ topPost(count: 1) { pid } }";
    let open = Lab::start().await;
    let v = open.query(typo).await;
    assert!(message(&v).contains("Did you mean"), "{v}");
    let v = open.query("{ __schema { queryType { name } } }").await;
    assert_eq!(v["data"]["__schema"]["queryType"]["name"], "Query", "{v}");

    let closed = Lab::start_with(|c| c.documents.introspection = false).await;
    let v = closed.query(typo).await;
    assert!(message(&v).contains("Unknown field"), "{v}");
    assert!(!message(&v).contains("Did you mean"), "{v}");
    for q in [
        "{ __schema { queryType { name } } }",
        "{ __type(name: \"User\") { name } }",
    ] {
        let v = closed.query(q).await;
        assert_eq!(
            message(&v),
            "introspection is disabled (--introspection off)",
            "{v}"
        );
    }
    let v = closed.query("{ __typename me { id } }").await;
    assert_eq!(v["data"]["__typename"], "Query", "{v}");
}

#[tokio::test]
async fn an_answer_past_max_answer_bytes_is_an_error_at_its_path() {
    // The writer's bound: each subgraph answer fits, the response does not (two root
    // fetches, each about half of it).
    let query = "{ a: topPosts(count: 3) { pid title content } b: topPosts(count: 3) { pid title content } }";
    let full = Lab::start().await;
    let whole = serde_json::to_vec(&full.query(query).await).unwrap().len();
    let lab = Lab::start_with(|c| c.documents.max_answer_bytes = whole - 20).await;
    let v = lab.query(query).await;
    assert_eq!(v["data"], Value::Null, "{v}");
    let error = &v["errors"][0];
    assert_eq!(error["extensions"]["code"], "ANSWER_TOO_LARGE", "{v}");
    assert!(
        message(&v).contains(&format!("grew past {} bytes", whole - 20)),
        "{v}"
    );
    assert_eq!(error["path"][0], "b", "{v}");
    // The bound on what is read from a subgraph: an answer larger than it is an error
    // at the field it was for.
    let lab = Lab::start_with(|c| c.documents.max_answer_bytes = 40).await;
    let v = lab.query(query).await;
    assert_eq!(v["data"]["a"], Value::Null, "{v}");
    assert!(message(&v).contains("answered more than 40 bytes"), "{v}");
}

#[tokio::test]
async fn the_estimate_and_the_answer_size_come_in_extensions_when_asked() {
    for strategy in [None, Some("coalesce"), Some("response:ttl=10")] {
        let lab = Lab::start_with(|c| {
            c.request_strategy = strategy.map(|s| RequestStrategy::parse(s).unwrap())
        })
        .await;
        let plain = lab.post_json(&json!({ "query": SEED_QUERY })).await;
        assert!(plain.get("extensions").is_none(), "{plain}");
        let plain_bytes = serde_json::to_vec(&plain).unwrap().len();
        for _ in 0..2 {
            let v = lab
                .post_json(&json!({ "query": SEED_QUERY, "extensions": { "cost": true } }))
                .await;
            // me 1 + topPosts(count: 2) × (post 1 + author 1); topPosts(count: 2) × 1.
            let cost = &v["extensions"]["cost"];
            assert_eq!(cost["estimated"], 7, "{strategy:?}: {v}");
            assert_eq!(cost["max"], 50_000, "{v}");
            assert_eq!(cost["answerBytes"], plain_bytes, "{v}");
            assert_eq!(v["data"], plain["data"]);
        }
        let (status, text) = lab
            .post_raw(json!({ "query": SEED_QUERY, "extensions": { "cost": "yes" } }).to_string())
            .await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("must be a boolean"), "{text}");
        let metrics = lab.metrics(&lab.gateway).await;
        assert_eq!(
            common::sample(&metrics, "gateway_operations_total"),
            Some(3.0)
        );
        assert_eq!(
            common::sample(&metrics, "gateway_operation_cost_sum"),
            Some(21.0)
        );
    }
}

/// The committed experiments' files, and every operation document they send.
fn committed_documents() -> Vec<Committed> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    for file in files {
        let value: toml::Value = toml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let commerce = value.get("graph").is_some();
        // The file's own [services] gateway flags hold for every configuration.
        let raised = value
            .get("services")
            .and_then(|s| s.as_table())
            .and_then(max_fields_of);
        collect(&file, &value, commerce, raised, &mut out);
    }
    out
}

/// A `--max-fields N` among a table's `gateway` arguments.
fn max_fields_of(table: &toml::map::Map<String, toml::Value>) -> Option<usize> {
    let args: Vec<&str> = table
        .get("gateway")?
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let at = args.iter().position(|a| *a == "--max-fields")?;
    args.get(at + 1)?.parse().ok()
}

/// A committed document: its file, whether it runs on the commerce graph, its text,
/// its operation, and the `--max-fields` its configuration raises the limit to.
type Committed = (PathBuf, bool, String, Option<String>, Option<usize>);

/// Every `document`, `document_file` and `operations` file below `value`, with the
/// `--max-fields` of the nearest table that sets one (`raised`, from above).
fn collect(
    file: &Path,
    value: &toml::Value,
    commerce: bool,
    raised: Option<usize>,
    out: &mut Vec<Committed>,
) {
    let base = file.parent().unwrap();
    match value {
        toml::Value::Table(table) => {
            let raised = max_fields_of(table).or(raised);
            let name = table
                .get("operation_name")
                .and_then(|v| v.as_str())
                .map(String::from);
            if let Some(text) = table.get("document").and_then(|v| v.as_str()) {
                out.push((
                    file.to_path_buf(),
                    commerce,
                    text.to_string(),
                    name.clone(),
                    raised,
                ));
            }
            if let Some(path) = table.get("document_file").and_then(|v| v.as_str()) {
                let text = std::fs::read_to_string(base.join(path)).unwrap();
                out.push((file.to_path_buf(), commerce, text, name, raised));
            }
            if let Some(path) = table.get("operations").and_then(|v| v.as_str()) {
                let path = base.join(path);
                let inner: toml::Value =
                    toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                collect(&path, &inner, commerce, raised, out);
            }
            for v in table.values() {
                collect(file, v, commerce, raised, out);
            }
        }
        toml::Value::Array(items) => {
            for v in items {
                collect(file, v, commerce, raised, out);
            }
        }
        _ => {}
    }
}

/// The document limits of a gateway started with `--max-fields n` (the defaults
/// otherwise).
fn limits_with(max_fields: Option<usize>) -> DocumentLimits {
    let Some(n) = max_fields else {
        return DocumentLimits::default();
    };
    let n = n.to_string();
    gateway::cli::Cli::try_parse_from([
        "gateway",
        "--subgraph",
        "u=http://127.0.0.1:1/graphql",
        "--max-fields",
        &n,
    ])
    .unwrap()
    .limits
    .limits()
}

#[tokio::test]
async fn every_committed_experiment_fits_the_default_limits() {
    let seed = Lab::start().await;
    let seed_app = gateway::startup::build_app(&common::config_over(&seed.user, &seed.post))
        .await
        .unwrap();
    let mut config = common::config(Vec::new());
    let sdl = common::commerce::supergraph();
    let subgraphs = gateway::supergraph::join::subgraphs_of(&sdl).unwrap();
    config.graph = gateway::startup::GraphSource::Supergraph {
        sdl,
        subgraphs,
        overrides: Vec::new(),
    };
    let commerce_app = gateway::startup::build_app(&config).await.unwrap();
    let documents = committed_documents();
    assert!(documents.len() >= 30, "{} documents", documents.len());
    for (file, commerce, text, name, raised) in documents {
        let limits = limits_with(raised);
        let app = if commerce { &commerce_app } else { &seed_app };
        let at = format!("{} ({name:?}): {text}", file.display());
        let shape = lexical::shape(&text, limits.max_tokens);
        assert!(shape.tokens <= limits.max_tokens, "{at}");
        assert!(shape.nesting <= limits.max_nesting(), "{at}");
        let doc = async_graphql_parser::parse_query(&text).unwrap();
        admit(&doc, &limits).unwrap_or_else(|e| panic!("{at}: {}", e.0));
        let op = operation(&doc, name.as_deref()).unwrap();
        let vars = async_graphql::Variables::default();
        let estimate = cost::estimate(&doc, op, &vars, &app.supergraph, limits.list_size);
        assert!(
            estimate.cost <= limits.max_cost.unwrap(),
            "{at}: cost {}",
            estimate.cost
        );
        let plan = app
            .planner
            .compile(&text, &doc, op, name.as_deref(), &vars)
            .unwrap_or_else(|e| panic!("{at}: {e}"));
        assert!(plan.fetches.len() <= limits.max_subgraph_requests, "{at}");
        println!(
            "{:>6} cost, {:>2} fetches, {:>5} tokens: {} {}",
            estimate.cost,
            plan.fetches.len(),
            shape.tokens,
            file.file_name().unwrap().to_string_lossy(),
            name.unwrap_or_default()
        );
    }
    // The seed PR's 5000-field document runs with a raised --max-fields alone.
    let big = format!(
        "query {{ topPosts(count: 1) {{ {} }} }}",
        (0..5000)
            .map(|i| format!("f{i}: pid"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let raised = limits_with(Some(6000));
    assert!(lexical::shape(&big, raised.max_tokens).tokens <= raised.max_tokens);
    let doc = async_graphql_parser::parse_query(&big).unwrap();
    admit(&doc, &raised).unwrap();
}

#[tokio::test]
async fn list_size_in_a_supergraph_file_sizes_the_estimate() {
    // The committed supergraph, with Product.reviews sized as IBM's cost specification
    // writes it: by its `first` when given, else 2.
    let sdl = common::commerce::supergraph();
    let marked = "  reviews(first: Int): [Review!]! @join__field(graph: REVIEWS)\n";
    assert!(sdl.contains(marked));
    let sdl = sdl.replacen(
        marked,
        "  reviews(first: Int): [Review!]! @join__field(graph: REVIEWS) @listSize(assumedSize: 2, slicingArguments: [\"first\"])\n",
        1,
    ) + "\ndirective @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION\n";
    let subgraphs = gateway::supergraph::join::subgraphs_of(&sdl).unwrap();
    let gateway = common::gateway_over_supergraph(sdl, subgraphs, |_| {}).await;
    let http = reqwest::Client::new();
    let validate = format!("http://{}/validate", gateway.addr);
    let cost = |query: &'static str| {
        let (http, validate) = (http.clone(), validate.clone());
        async move {
            let v: Value = http
                .post(validate)
                .json(&json!({ "query": query }))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            v["estimatedCost"].as_u64().unwrap_or_else(|| panic!("{v}"))
        }
    };
    // topProducts(first: 3) × (1 + reviews × (1 + author 1)).
    assert_eq!(
        cost("{ topProducts(first: 3) { reviews { author { name } } } }").await,
        3 * (1 + 2 * 2)
    );
    assert_eq!(
        cost("{ topProducts(first: 3) { reviews(first: 5) { author { name } } } }").await,
        3 * (1 + 5 * 2)
    );
    // User.reviews has no @listSize: --list-size (10).
    assert_eq!(
        cost("{ users(first: 1) { reviews { body } } }").await,
        1 + 10
    );
}
