//! The experiment file's rules, defaults and errors, and every experiment file of the
//! repository loaded.

use std::path::Path;

use super::*;

const MINIMAL: &str = r#"
[query]
document = "{ me { id } }"
expected = '{"data":{"me":{"id":"u1"}}}'

[[config]]
name = "plain"
"#;

fn parse(text: &str) -> Result<Experiment, ExperimentError> {
    Experiment::parse(text, Path::new("exp.toml"))
}

fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn minimal_file_gets_defaults() {
    let e = parse(MINIMAL).unwrap();
    assert_eq!(e.name, "exp");
    assert_eq!(e.baseline, "plain");
    assert_eq!(e.configs[0].query.as_ref().unwrap().path, "/graphql");
    assert_eq!(e.query.as_ref(), e.configs[0].query.as_ref());
    assert!(!e.configs[0].own_query && !e.configs[0].redis);
    assert_eq!(e.configs[0].gateways, 1);
    assert_eq!(
        e.configs[0].query.as_ref().unwrap().expected,
        serde_json::json!({"data": {"me": {"id": "u1"}}})
    );
    assert_eq!(e.configs.len(), 1);
    let load = &e.configs[0].load;
    assert_eq!((load.connections, load.threads, load.rate), (100, 1, None));
    assert_eq!(load.timeout, Duration::from_secs(10));
    assert_eq!(
        e.profile,
        ProfileSpec {
            enabled: true,
            hz: 99,
            tool: ProfileTool::Auto,
        }
    );
    assert_eq!(e.run, RunSpec::default());
}

#[test]
fn configs_override_the_load_table_and_keep_their_arguments() {
    let e = parse(
        r#"
name = "ttl"
baseline = "b"
[query]
document = "query($n: Int) { topPosts(count: $n) { pid } }"
variables = { n = 2 }
expected = '{"data":{"topPosts":[]}}'
headers = ["authorization: Bearer u1"]
[load]
connections = 50
timeout = "2s"
[run]
rounds = 5
duration = "3s"
warmup = "0s"
[profile]
hz = 49
[[config]]
name = "a"
gateway = ["--ttl", "1"]
[[config]]
name = "b"
post_service = ["--delay-ms", "5"]
load = { rate = 500.0, threads = 2 }
"#,
    )
    .unwrap();
    assert_eq!(e.name, "ttl");
    assert_eq!(e.baseline, "b");
    let query = e.query.as_ref().unwrap();
    assert_eq!(query.variables, Some(serde_json::json!({"n": 2})));
    assert_eq!(
        query.body(),
        r#"{"query":"query($n: Int) { topPosts(count: $n) { pid } }","variables":{"n":2}}"#
    );
    assert_eq!(e.configs[0].gateway_args, ["--ttl", "1"]);
    assert_eq!(e.configs[0].load.connections, 50);
    assert_eq!(e.configs[0].load.rate, None);
    assert_eq!(e.configs[1].post_service_args, ["--delay-ms", "5"]);
    assert_eq!(e.configs[1].load.rate, Some(500.0));
    assert_eq!(e.configs[1].load.threads, 2);
    assert_eq!(e.configs[1].load.connections, 50);
    assert_eq!(e.configs[1].load.timeout, Duration::from_secs(2));
    assert_eq!(
        e.run,
        RunSpec {
            rounds: Some(5),
            duration: Some(Duration::from_secs(3)),
            warmup: Some(Duration::ZERO)
        }
    );
    assert_eq!(e.profile.hz, 49);
}

#[test]
fn bad_files_get_clear_errors() {
    let cases: &[(&str, &str)] = &[
        (
            "[query]\ndocument = \"{a}\"\n[[config]]\nname = \"a\"\n",
            "query: needs expected or expected_file",
        ),
        (
            &MINIMAL.replace("[[config]]\nname = \"plain\"\n", ""),
            "at least one configuration",
        ),
        (
            &format!("{MINIMAL}[[config]]\nname = \"plain\"\n"),
            "used twice",
        ),
        (&MINIMAL.replace("plain", "has space"), "name must be"),
        (
            &MINIMAL.replace(r#"'{"data":{"me":{"id":"u1"}}}'"#, "'{nope'"),
            "query.expected is not JSON",
        ),
        (
            &format!("baseline = \"other\"\n{MINIMAL}"),
            "baseline \"other\"",
        ),
        (
            &format!("{MINIMAL}gateway = [\"--listen\", \"1.2.3.4:1\"]\n"),
            "--listen, which the runner sets",
        ),
        (
            &format!("{MINIMAL}load = {{ connections = 0 }}\n"),
            "load.connections = 0",
        ),
        (
            &format!("{MINIMAL}load = {{ rate = -5.0 }}\n"),
            "load.rate = -5",
        ),
        (
            &format!("{MINIMAL}load = {{ timeout = \"soon\" }}\n"),
            "load.timeout",
        ),
        (
            &format!("{MINIMAL}colour = \"red\"\n"),
            "unknown field `colour`",
        ),
        (&format!("[run]\nrounds = 0\n{MINIMAL}"), "run.rounds = 0"),
        (
            &format!("[run]\nduration = \"0s\"\n{MINIMAL}"),
            "run.duration",
        ),
        (
            &format!("[profile]\nhz = 5000\n{MINIMAL}"),
            "profile.hz = 5000",
        ),
        ("this is not toml", "exp.toml"),
    ];
    for (text, expected) in cases {
        let message = error(text);
        assert!(
            message.contains(expected),
            "expected {expected:?} in: {message}"
        );
        assert!(
            message.starts_with("exp.toml"),
            "the file is named: {message}"
        );
    }
}

#[test]
fn configurations_can_be_selected() {
    let text = format!("{MINIMAL}[[config]]\nname = \"b\"\n[[config]]\nname = \"c\"\n");
    let names = |e: &Experiment| e.configs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    let mut e = parse(&text).unwrap();
    e.select(&[], &["b".into()]).unwrap();
    assert_eq!(names(&e), ["plain", "c"]);
    let mut e = parse(&text).unwrap();
    e.select(&["plain".into(), "c".into()], &[]).unwrap();
    assert_eq!(names(&e), ["plain", "c"]);
    let mut e = parse(&text).unwrap();
    let err = e.select(&[], &["nope".into()]).unwrap_err();
    assert!(
        err.starts_with("--skip: \"nope\" is not a configuration"),
        "{err}"
    );
    let mut e = parse(&text).unwrap();
    let err = e.select(&[], &["plain".into()]).unwrap_err();
    assert!(
        err.contains("\"b\" is measured against \"plain\", which would not run"),
        "{err}"
    );
}

#[test]
fn a_configuration_may_name_its_own_baseline() {
    let e = parse(&format!(
        "{MINIMAL}\n[[config]]\nname = \"on\"\nbaseline = \"off\"\n\n[[config]]\nname = \"off\"\n"
    ))
    .unwrap();
    assert_eq!(e.configs[1].baseline.as_deref(), Some("off"));
    assert_eq!(e.configs[0].baseline, None);
    let err = parse(&format!(
        "{MINIMAL}\n[[config]]\nname = \"on\"\nbaseline = \"nope\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("baseline \"nope\" is not the name of a configuration"),
        "{err}"
    );
}

#[test]
fn a_configuration_may_run_a_peer_with_its_cache_settings() {
    let e = parse(&format!(
        "[services]\ngateway = [\"--worker-threads\", \"1\"]\n{MINIMAL}\n[[config]]\nname = \"m\"\npeer = \"mercurius\"\ncache = {{ ttl = \"10s\" }}\n"
    ))
    .unwrap();
    let peer = e.configs[1].peer.as_ref().unwrap();
    assert_eq!(peer.label(), "mercurius, ttl = 10 s");
    // The file's common gateway arguments are the lab's gateway's, not the peer's.
    assert!(e.configs[1].gateway_args.is_empty());
    assert_eq!(e.configs[0].gateway_args, ["--worker-threads", "1"]);
    assert!(e.configs[0].peer.is_none());
    for (extra, says) in [
        ("gateway = [\"--ttl\", \"0\"]", "cannot take gateway"),
        ("build = { binary = \"/bin/true\" }", "cannot take build"),
        ("redis = true", "cannot take redis"),
        ("gateways = 2", "cannot take gateways"),
    ] {
        let err = error(&format!(
            "{MINIMAL}\n[[config]]\nname = \"m\"\npeer = \"mercurius\"\n{extra}\n"
        ));
        assert!(
            err.contains("(\"m\")") && err.contains(says),
            "{extra}: {err}"
        );
    }
    let err = error(&format!(
        "{MINIMAL}\n[[config]]\nname = \"m\"\ncache = {{ ttl = 1 }}\n"
    ));
    assert!(err.contains("cache = {...} sets a peer's cache"), "{err}");
    let err = error(&format!(
        "{MINIMAL}\n[[config]]\nname = \"m\"\npeer = \"envoy\"\n"
    ));
    assert!(err.contains("peer = \"envoy\" is not a peer"), "{err}");
}

#[test]
fn an_expected_difference_must_say_why_and_keep_the_checks() {
    let e = parse(&format!(
        "{MINIMAL}\n[[config]]\nname = \"m\"\npeer = \"mercurius\"\nexpected_difference = \"Federation 1 orders lists otherwise\"\n"
    ))
    .unwrap();
    assert_eq!(
        e.configs[1].expected_difference.as_deref(),
        Some("Federation 1 orders lists otherwise")
    );
    assert_eq!(e.configs[0].expected_difference, None);
    let err = error(&format!(
        "{MINIMAL}\n[[config]]\nname = \"m\"\nexpected_difference = \" \"\n"
    ));
    assert!(err.contains("expected_difference must say why"), "{err}");
    let err = error(&format!(
        "{MINIMAL}\n[[config]]\nname = \"m\"\ncheck = false\nexpected_difference = \"x\"\n"
    ));
    assert!(err.contains("needs the answer checks"), "{err}");
}

#[test]
fn a_configuration_may_bring_its_own_query() {
    let e = parse(&format!(
        r#"{MINIMAL}
[[config]]
name = "flood"
query = {{ document = "{{ getPost(pid: \"p{{{{n}}}}\") {{ pid }} }}", expected = '{{"data":{{"getPost":null}}}}', unique_literals = true, headers = ["x-a: b"] }}
"#
    ))
    .unwrap();
    let (plain, flood) = (&e.configs[0], &e.configs[1]);
    assert!(!plain.own_query && flood.own_query);
    assert_eq!(plain.query.as_ref().unwrap().document, "{ me { id } }");
    assert_eq!(
        flood.query.as_ref().unwrap().document,
        r#"{ getPost(pid: "p{{n}}") { pid } }"#
    );
    assert_eq!(
        flood.query.as_ref().unwrap().expected,
        serde_json::json!({"data": {"getPost": null}})
    );
    assert!(flood.query.as_ref().unwrap().unique_literals);
    assert_eq!(flood.query.as_ref().unwrap().headers, ["x-a: b"]);
    // The answer check reads {{n}} as 0.
    assert_eq!(
        flood.query.as_ref().unwrap().check_body(),
        r#"{"query":"{ getPost(pid: \"p0\") { pid } }"}"#
    );

    // Without a top-level [query], every configuration needs its own.
    let own_only = r#"
[[config]]
name = "a"
query = { document = "{ a }", expected = '{"data":{"a":1}}' }
[[config]]
name = "b"
query = { document = "{ b }", expected = '{"data":{"b":2}}', path = "/gql" }
"#;
    let e = parse(own_only).unwrap();
    assert!(e.query.is_none());
    assert_eq!(e.configs[1].query.as_ref().unwrap().path, "/gql");
    let message = error(&format!("{own_only}[[config]]\nname = \"c\"\n"));
    assert!(
        message.contains("config #3 (\"c\") has no query of its own")
            && message.contains("no top-level [query]"),
        "{message}"
    );
}

#[test]
fn query_files_are_read_next_to_the_experiment_file() {
    let dir = std::env::temp_dir().join(format!("loadgen-exp-files-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("q")).unwrap();
    let fields: Vec<String> = (0..1000).map(|i| format!("f{i}: pid")).collect();
    let document = format!("{{ getPost(pid: \"p1\") {{ {} }} }}\n", fields.join(" "));
    std::fs::write(dir.join("q/wide.graphql"), &document).unwrap();
    std::fs::write(
        dir.join("q/wide.json"),
        r#"{"data":{"getPost":{"f0":"p1"}}}"#,
    )
    .unwrap();
    let text = r#"
[query]
document_file = "q/wide.graphql"
expected_file = "q/wide.json"
[[config]]
name = "wide"
[[config]]
name = "missing"
query = { document_file = "q/nope.graphql", expected = '{}' }
"#;
    let message = Experiment::parse(text, &dir.join("exp.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(
            "config #2 (\"missing\"): query.document_file \"q/nope.graphql\": cannot read"
        ),
        "{message}"
    );
    let text = text.replace("q/nope.graphql", "q/wide.graphql");
    let e = Experiment::parse(&text, &dir.join("exp.toml")).unwrap();
    assert_eq!(e.configs[0].query.as_ref().unwrap().document, document);
    assert_eq!(e.configs[1].query.as_ref().unwrap().document, document);
    assert_eq!(
        e.configs[0].query.as_ref().unwrap().expected,
        serde_json::json!({"data": {"getPost": {"f0": "p1"}}})
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn redis_and_gateways_keys() {
    let e = parse(&format!(
        r#"{MINIMAL}
[[config]]
name = "shared"
redis = true
gateways = 2
gateway = ["--storage", "redis", "--redis", "{{redis}}"]
"#
    ))
    .unwrap();
    let (plain, shared) = (&e.configs[0], &e.configs[1]);
    assert_eq!((plain.redis, plain.gateways), (false, 1));
    assert_eq!((shared.redis, shared.gateways), (true, 2));
    assert_eq!(shared.gateway_args[3], "{redis}");
    assert!(!shared.redis_cluster && !plain.redis_cluster);
    let e = parse(&format!(
        r#"{MINIMAL}
[[config]]
name = "cluster"
redis = "cluster"
gateway = ["--storage", "redis", "--redis-cluster", "{{redis-cluster}}"]
"#
    ))
    .unwrap();
    let cluster = &e.configs[1];
    assert!(cluster.redis_cluster && !cluster.redis);
    assert_eq!(cluster.gateway_args[3], "{redis-cluster}");
}

#[test]
fn bad_query_redis_and_gateways_values_are_named() {
    let cases: &[(&str, &str)] = &[
        (
            "gateways = 0",
            "config #1 (\"plain\"): gateways = 0: must be 1 to 16",
        ),
        ("gateways = 17", "gateways = 17: must be 1 to 16"),
        ("gateways = \"two\"", "gateways"),
        (
            "redis = \"yes\"",
            "redis = \"yes\": expected true, false or \"cluster\"",
        ),
        (
            "redis = true\ngateway = [\"--redis-cluster\", \"{redis-cluster}\"]",
            "gateway uses {redis-cluster} but the configuration does not say redis = \"cluster\"",
        ),
        (
            "redis = \"cluster\"\ngateway = [\"--redis\", \"{redis}\"]",
            "gateway uses {redis} but the configuration does not say redis = true",
        ),
        (
            "gateway = [\"--redis\", \"{redis}\"]",
            "gateway uses {redis} but the configuration does not say redis = true",
        ),
        (
            "redis = true\npost_service = [\"{redis}\"]",
            "post_service uses {redis}, which only gateway arguments may use",
        ),
        (
            "query = { document = \"{ a }\" }",
            "config #1 (\"plain\"): query: needs expected or expected_file",
        ),
        (
            "query = { expected = '{}' }",
            "query: needs document or document_file",
        ),
        (
            "query = { document = \"{ a }\", document_file = \"a.graphql\", expected = '{}' }",
            "either document or document_file, not both",
        ),
        (
            "query = { document = \"{ a }\", expected = '{}', expected_file = \"a.json\" }",
            "either expected or expected_file, not both",
        ),
        (
            "query = { document = \"{ a }\", expected = '{}', unique_literals = true }",
            "query.unique_literals = true, but neither the document nor the variables hold {{n}}",
        ),
        (
            "query = { document = \"{ a }\", expected = 'nope' }",
            "config #1 (\"plain\"): query.expected is not JSON",
        ),
        (
            "query = { document = \"{ a }\", expected = '{}', colour = 1 }",
            "unknown field `colour`",
        ),
    ];
    for (line, expected) in cases {
        let message = error(&format!("{MINIMAL}{line}\n"));
        assert!(
            message.contains(expected),
            "{line}: expected {expected:?} in: {message}"
        );
        assert!(message.starts_with("exp.toml"), "{message}");
    }
}

#[test]
fn the_redis_experiment_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/redis.toml");
    let e = Experiment::load(&path).unwrap();
    let names: Vec<&str> = e.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "memory",
            "redis",
            "redis-no-autopipeline",
            "layered",
            "layered-2-gateways"
        ]
    );
    assert_eq!(e.baseline, "memory");
    let seed =
        Experiment::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/seed.toml"))
            .unwrap();
    for c in &e.configs {
        assert_eq!(c.query, seed.configs[0].query, "{}: the seed query", c.name);
        assert_eq!((c.load.connections, c.load.threads), (100, 1), "{}", c.name);
        let ttl = c.gateway_args.iter().position(|a| a == "--ttl");
        assert_eq!(
            ttl.map(|i| c.gateway_args[i + 1].as_str()),
            Some("10"),
            "{}: --ttl 10",
            c.name
        );
        assert_eq!(c.redis, c.name != "memory", "{}", c.name);
    }
    assert_eq!(e.configs[4].gateways, 2);
    assert!(e.configs[..4].iter().all(|c| c.gateways == 1));
    assert_eq!(
        e.configs[2].gateway_args,
        [
            "--ttl",
            "10",
            "--storage",
            "redis",
            "--redis",
            "{redis}",
            "--redis-autopipeline",
            "false"
        ]
    );
    assert_eq!(
        e.configs[3].gateway_args,
        ["--ttl", "10", "--storage", "layered", "--redis", "{redis}"]
    );
}

#[test]
fn the_redis_cluster_experiment_is_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
    let e = Experiment::load(&dir.join("redis-cluster.toml")).unwrap();
    let seed = Experiment::load(&dir.join("seed.toml")).unwrap();
    let names: Vec<&str> = e.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["redis", "redis-cluster", "layered", "layered-cluster"]
    );
    assert_eq!(e.baseline, "redis");
    for c in &e.configs {
        let cluster = c.name.ends_with("-cluster");
        assert_eq!(
            (c.redis, c.redis_cluster),
            (!cluster, cluster),
            "{}",
            c.name
        );
        assert_eq!(c.query, seed.configs[0].query, "{}: the seed query", c.name);
        let (flag, placeholder) = if cluster {
            ("--redis-cluster", REDIS_CLUSTER_PLACEHOLDER)
        } else {
            ("--redis", REDIS_PLACEHOLDER)
        };
        let storage = if c.name.starts_with("layered") {
            "layered"
        } else {
            "redis"
        };
        assert_eq!(
            c.gateway_args,
            ["--ttl", "10", "--storage", storage, flag, placeholder],
            "{}",
            c.name
        );
    }
}

#[test]
fn every_experiment_file_of_the_repository_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
    let mut loaded = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            if let Err(e) = Experiment::load(&path) {
                panic!("{}: {e:#}", path.display());
            }
            loaded += 1;
        }
    }
    assert!(
        loaded >= 10,
        "only {loaded} experiment files in {}",
        dir.display()
    );
}

#[test]
fn the_seed_experiment_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/seed.toml");
    let e = Experiment::load(&path).unwrap();
    let names: Vec<&str> = e.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["no-cache", "ttl-0", "ttl-1", "ttl-10"]);
    assert_eq!(e.baseline, "no-cache");
    assert!(e.configs.iter().all(|c| c.load.connections == 100));
    // Every configuration runs the gateway on one worker thread (docs/cpu-and-peers.md, "Worker threads").
    assert_eq!(
        e.configs[2].gateway_args,
        ["--worker-threads", "1", "--ttl", "1"]
    );
    assert!(e
        .configs
        .iter()
        .all(|c| c.gateway_args[..2] == ["--worker-threads", "1"]));
    assert_eq!(
        e.query.as_ref().unwrap().expected,
        serde_json::json!({"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}})
    );
}

#[test]
fn a_query_names_its_document_as_send_says() {
    use crate::matrix::query::{sha256_hex, Send};
    let with = |send: &str| {
        parse(&format!(
            r#"
[query]
document = "query($n: Int) {{ me {{ id }} }}"
expected = '{{"data":{{"me":{{"id":"u1"}}}}}}'
variables = {{ n = 2 }}
send = "{send}"

[[config]]
name = "plain"
"#
        ))
    };
    let hash = sha256_hex("query($n: Int) { me { id } }");
    let e = with("apq-get").unwrap();
    let q = e.query.as_ref().unwrap();
    assert_eq!(q.send, Send::ApqGet);
    let load = q.load_request();
    assert_eq!((load.method, load.body), ("GET", None));
    assert!(load
        .query_string
        .starts_with("?extensions=%7B%22persistedQuery%22"));
    assert!(load.query_string.contains(&hash));
    assert!(load.query_string.ends_with("&variables=%7B%22n%22%3A2%7D"));
    // The answer check sends the text with its hash: it registers the document.
    let check: serde_json::Value = serde_json::from_str(&q.check_body()).unwrap();
    assert_eq!(check["query"], "query($n: Int) { me { id } }");
    assert_eq!(check["extensions"]["persistedQuery"]["sha256Hash"], hash);

    let e = with("get").unwrap();
    let load = e.query.as_ref().unwrap().load_request();
    assert_eq!((load.method, load.body), ("GET", None));
    assert_eq!(
        load.query_string,
        "?query=query%28%24n%3A%20Int%29%20%7B%20me%20%7B%20id%20%7D%20%7D&variables=%7B%22n%22%3A2%7D"
    );

    let e = with("apq").unwrap();
    let body: serde_json::Value =
        serde_json::from_str(&e.query.as_ref().unwrap().load_request().body.unwrap()).unwrap();
    assert!(body.get("query").is_none());
    assert_eq!(body["extensions"]["persistedQuery"]["version"], 1);

    let e = with("document-id").unwrap();
    let q = e.query.as_ref().unwrap();
    let body: serde_json::Value = serde_json::from_str(&q.load_request().body.unwrap()).unwrap();
    assert_eq!(body["documentId"], hash);
    assert_eq!(q.check_body(), q.load_request().body.unwrap());

    let e = with("text").unwrap();
    assert_eq!(
        e.query.as_ref().unwrap().load_request().body.unwrap(),
        e.query.as_ref().unwrap().body()
    );

    let bad = with("hash").unwrap_err().to_string();
    assert!(
        bad.contains("send \"hash\"") && bad.contains("\"apq-get\""),
        "{bad}"
    );
    let numbered = error(
        r#"
[query]
document = "{ getPost(pid: \"p{{n}}\") { pid } }"
expected = '{"data":{"getPost":null}}'
unique_literals = true
send = "apq"

[[config]]
name = "plain"
"#,
    );
    assert!(
        numbered.contains("unique_literals needs send = \"text\""),
        "{numbered}"
    );
}

#[test]
fn an_edge_is_varnish_fronting_one_gateway_and_only_it_fills_edge() {
    let config = |extra: &str| {
        parse(&format!(
            r#"
[query]
document = "{{ me {{ id }} }}"
expected = '{{"data":{{"me":{{"id":"u1"}}}}}}'

[[config]]
name = "edge"
{extra}
"#
        ))
    };
    let e = config(
        "edge = \"varnish\"\ngateway = [\"--surrogate-keys\", \"--edge-purge\", \"{edge}\"]",
    )
    .unwrap();
    assert!(e.configs[0].edge);
    for (extra, expected) in [
        (
            "edge = \"nginx\"",
            "the one edge cache the runner starts is \"varnish\"",
        ),
        (
            "gateway = [\"--edge-purge\", \"{edge}\"]",
            "does not say edge = \"varnish\"",
        ),
        (
            "edge = \"varnish\"\ngateways = 2\nload = { connections = 4 }",
            "fronts one gateway",
        ),
    ] {
        let error = config(extra).unwrap_err().to_string();
        assert!(error.contains(expected), "{extra}: {error}");
    }
}
