//! Peer gateways in the matrix (`peer = "NAME"`), through real processes: the seed's
//! own Mercurius gateway, installed from its committed lock, runs beside the lab's
//! gateway on the lab's subgraphs with its answers checked; `loadgen peers` lists it;
//! and the run refuses, with a message that says why, a peer that is not installed, a
//! peer that fails to start, and a peer whose answer differs (naming the first
//! difference), unless the configuration declares that difference expected. Apollo
//! Gateway's response cache says when the graph's cache hints left it nothing to keep.
//! A gateway the runner does not start (`url = ...`, here the lab's own, started by the
//! test as someone's deployment would be) is measured by its answers alone.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[allow(dead_code)]
mod support;
use support::{gateway_command_line, loadgen, require_services, scratch};

const SEED_QUERY: &str = r#"[query]
document = "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }"
expected = '{"data":{"me":{"id":"u1","name":"John","nickname":"John","topPosts":[{"pid":"p1","author":{"id":"u1"}},{"pid":"p3","author":{"id":"u1"}}]},"topPosts":[{"pid":"p1"},{"pid":"p2"}]}}'
[load]
connections = 8
threads = 1
[profile]
enabled = false
"#;

/// The repository's `peers/` folder.
fn repository_peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("peers")
}

/// `loadgen matrix --quick` of `configs` (after the seed query), with `peers_dir` as
/// the peers' folder when given.
fn run(name: &str, configs: &str, flags: &[&str], peers_dir: Option<&Path>) -> (Output, PathBuf) {
    let bin_dir = require_services();
    let dir = scratch(name);
    let config = dir.join("peers.toml");
    std::fs::write(
        &config,
        format!("name = \"{name}\"\n{SEED_QUERY}\n{configs}"),
    )
    .unwrap();
    let out = dir.join("run");
    let mut command = Command::new(loadgen());
    command
        .args(["matrix", "--quick", "--duration", "1s", "--warmup", "300ms"])
        .args(flags)
        .arg("--config")
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .arg("--bin-dir")
        .arg(&bin_dir);
    if let Some(p) = peers_dir {
        command.env("LOADGEN_PEERS_DIR", p);
    }
    (command.output().unwrap(), out)
}

/// A peers folder whose `mercurius` holds the real lock (for its versions), counts as
/// installed, and starts `launcher` (JavaScript) instead of the real gateway.
fn fake_mercurius(name: &str, launcher: &str) -> PathBuf {
    let root = scratch(name).join("peers");
    let dir = root.join("mercurius");
    std::fs::create_dir_all(dir.join("node_modules")).unwrap();
    std::fs::copy(
        repository_peers().join("mercurius/package-lock.json"),
        dir.join("package-lock.json"),
    )
    .unwrap();
    std::fs::write(dir.join("node_modules/.package-lock.json"), "{}").unwrap();
    std::fs::write(dir.join("gateway.js"), launcher).unwrap();
    root
}

#[test]
fn mercurius_runs_beside_the_lab_with_its_answers_checked() {
    let (output, out) = run(
        "peers-mercurius",
        r#"[[config]]
name = "lab-ttl-0"
gateway = ["--ttl", "0"]
[[config]]
name = "mercurius-ttl-0"
peer = "mercurius"
cache = { ttl = 0 }
"#,
        &["--install-peers"],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let peer = &manifest["peers"]["configs"][0];
    assert_eq!(peer["config"], "mercurius-ttl-0", "{manifest}");
    assert_eq!(peer["versions"][0]["package"], "@mercuriusjs/gateway");
    assert!(manifest["peers"]["node_version"]
        .as_str()
        .unwrap()
        .starts_with('v'));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let mercurius = &summary["configs"][1];
    assert_eq!(mercurius["peer"]["label"], "mercurius, ttl = 0 s");
    // It answered, its answers were checked before and after, and its CPU was taken.
    let round = &mercurius["rounds"][0];
    assert!(round["requests"].as_u64().unwrap() > 0, "{round}");
    assert!(
        mercurius["median"]["cpu_us_per_request"]["gateway"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{mercurius}"
    );
    let line = gateway_command_line(&out, "r1-mercurius-ttl-0");
    assert!(line[1].ends_with("peers/mercurius/gateway.js"), "{line:?}");
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(markdown.contains("**Peer gateways**"), "{markdown}");
    assert!(
        markdown.contains("@mercuriusjs/gateway 5.2.0"),
        "{markdown}"
    );
}

#[test]
fn loadgen_peers_lists_each_peer_with_its_versions_and_knobs() {
    let output = Command::new(loadgen())
        .arg("peers")
        .env("LOADGEN_PEERS_DIR", repository_peers())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("mercurius"), "{stdout}");
    assert!(stdout.contains("@mercuriusjs/gateway 5.2.0"), "{stdout}");
    assert!(stdout.contains("mercurius-cache 8.0.0"), "{stdout}");
    assert!(stdout.contains("cache = { ttl = … }"), "{stdout}");
    assert!(stdout.contains("hive-gateway"), "{stdout}");
    assert!(stdout.contains("@graphql-hive/gateway 2.15.1"), "{stdout}");
    assert!(stdout.contains("cache = { response_ttl = … }"), "{stdout}");
    assert!(stdout.contains("@apollo/gateway 2.14.4"), "{stdout}");
    assert!(
        stdout.contains("@apollo/server-plugin-response-cache 5.0.0"),
        "{stdout}"
    );
    // Hive Router is built from crates.io on request only, and says so.
    assert!(stdout.contains("hive-router 0.2.0"), "{stdout}");
    assert!(stdout.contains("cache = { dedupe = … }"), "{stdout}");
}

#[test]
fn apollo_gateway_says_when_the_graphs_hints_leave_its_cache_nothing() {
    // The seed query holds `me`, which the user subgraph marks private: sent without
    // credentials, Apollo's response cache may keep none of it. The public topPosts it
    // keeps and serves.
    let (output, out) = run(
        "peers-apollo",
        r#"[[config]]
name = "apollo-private"
peer = "apollo-gateway"
cache = { response_ttl = "10s" }
[[config]]
name = "apollo-public"
peer = "apollo-gateway"
cache = { response_ttl = "10s" }
query = { document = "{ topPosts(count: 2) { pid title } }", expected = '{"data":{"topPosts":[{"pid":"p1","title":"Post 1"},{"pid":"p2","title":"Post 2"}]}}' }
"#,
        &["--install-peers"],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let (private, public) = (&summary["configs"][0], &summary["configs"][1]);
    assert_eq!(private["median"]["cache_hits"], 0.0, "{private}");
    assert!(
        private["median"]["cache_skips"].as_f64().unwrap() > 0.0,
        "{private}"
    );
    assert!(
        public["median"]["cache_hits"].as_f64().unwrap() > 0.0,
        "{public}"
    );
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let row = |config: &str| {
        markdown
            .lines()
            .find(|l| l.starts_with(&format!("| {config} | apollo-gateway")))
            .unwrap_or_else(|| panic!("no peer row for {config}:\n{markdown}"))
            .to_string()
    };
    assert!(row("apollo-private").contains("**nothing**"), "{markdown}");
    assert!(row("apollo-public").contains("hit ratio"), "{markdown}");
}

const ONE_PEER: &str = r#"[[config]]
name = "mercurius"
peer = "mercurius"
"#;

/// Run `ONE_PEER` with `peers_dir` as the peers' folder; the run must fail, and its
/// stderr is returned.
fn refused(name: &str, peers_dir: &Path) -> String {
    let (output, _) = run(name, ONE_PEER, &[], Some(peers_dir));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "the run did not fail:\n{stderr}");
    stderr
}

#[test]
fn a_peer_that_is_not_installed_is_refused_with_the_way_to_install_it() {
    let root = scratch("peers-missing").join("peers");
    std::fs::create_dir_all(root.join("mercurius")).unwrap();
    let stderr = refused("peers-missing-run", &root);
    assert!(
        stderr.contains("peer mercurius is not installed")
            && stderr.contains("loadgen peers install mercurius"),
        "{stderr}"
    );
}

#[test]
fn a_peer_that_fails_to_start_is_named_with_its_log() {
    let root = fake_mercurius(
        "peers-broken",
        "console.error('cannot compose: unsupported directive @foo'); process.exit(3)\n",
    );
    let stderr = refused("peers-broken-run", &root);
    assert!(
        stderr.contains("peer mercurius did not start")
            && stderr.contains("unsupported directive @foo"),
        "{stderr}"
    );
}

/// A "gateway" that is up, and answers the seed query with one wrong post.
const WRONG_POST: &str = r#"const port = Number(process.argv[process.argv.indexOf('--port') + 1])
const answer = JSON.stringify({ data: { me: { id: 'u1', name: 'John', nickname: 'John', topPosts: [{ pid: 'p1', author: { id: 'u1' } }, { pid: 'p3', author: { id: 'u1' } }] }, topPosts: [{ pid: 'p1' }, { pid: 'p9' }] } })
require('http').createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    if (req.url === '/health') { res.end('ok'); return }
    res.setHeader('content-type', 'application/json')
    res.end(answer)
  })
}).listen(port, '127.0.0.1')
"#;

#[test]
fn a_peer_whose_answer_differs_stops_the_run_naming_the_first_difference() {
    let root = fake_mercurius("peers-wrong", WRONG_POST);
    let stderr = refused("peers-wrong-run", &root);
    assert!(
        stderr.contains("first difference: data.topPosts[1].pid: expected \"p2\", got \"p9\""),
        "{stderr}"
    );
}

#[test]
fn a_difference_declared_expected_is_measured_and_reported() {
    let root = fake_mercurius("peers-declared", WRONG_POST);
    let (output, out) = run(
        "peers-declared-run",
        r#"[[config]]
name = "mercurius"
peer = "mercurius"
expected_difference = "this stand-in answers p9 for the second post"
"#,
        &[],
        Some(&root),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let differences = &summary["configs"][0]["rounds"][0]["answer_differences"];
    assert_eq!(differences.as_array().map(Vec::len), Some(2), "{summary}");
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        markdown.contains("**Answers declared to differ.**"),
        "{markdown}"
    );
    assert!(
        markdown.contains("| mercurius | this stand-in answers p9 for the second post | 2 of 2 |")
            && markdown.contains("data.topPosts[1].pid: expected \"p2\", got \"p9\""),
        "{markdown}"
    );
}

/// A child process stopped by PID when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free port on 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Wait until `port` accepts connections (at most 20 s).
fn wait_listening(port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing listens on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_gateway_at_a_url_is_measured_by_its_answers_alone() {
    // Someone's deployment: the lab's gateway and subgraphs, started here, not by the runner.
    let bin = require_services();
    let (user, post, gateway) = (free_port(), free_port(), free_port());
    let start = |binary: &str, args: Vec<String>| {
        Running(
            Command::new(bin.join(binary))
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let _user = start(
        "user-service",
        vec!["--listen".into(), format!("127.0.0.1:{user}")],
    );
    let _post = start(
        "post-service",
        vec!["--listen".into(), format!("127.0.0.1:{post}")],
    );
    wait_listening(user);
    wait_listening(post);
    let _gateway = start(
        "gateway",
        vec![
            "--listen".into(),
            format!("127.0.0.1:{gateway}"),
            "--subgraph".into(),
            format!("user=http://127.0.0.1:{user}/graphql"),
            "--subgraph".into(),
            format!("post=http://127.0.0.1:{post}/graphql"),
        ],
    );
    wait_listening(gateway);
    let (output, out) = run(
        "peers-url",
        &format!("[[config]]\nname = \"theirs\"\nurl = \"http://127.0.0.1:{gateway}/graphql\"\n"),
        &[],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let theirs = &summary["configs"][0];
    let round = &theirs["rounds"][0];
    assert!(round["requests"].as_u64().unwrap() > 0, "{round}");
    assert_eq!(round["errors"]["transport"], 0, "{round}");
    // Nothing of its own was started, so nothing of it was measured but its answers.
    assert!(
        theirs["median"]["cpu_us_per_request"]["gateway"].is_null(),
        "{theirs}"
    );
    assert!(round["upstream_requests"].is_null(), "{round}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("runs/r1-theirs.json")).unwrap())
            .unwrap();
    assert_eq!(
        record["services"].as_array().map(Vec::len),
        Some(0),
        "{record}"
    );
    let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        markdown.contains(&format!(
            "| theirs | the gateway at http://127.0.0.1:{gateway}/graphql | not known"
        )),
        "{markdown}"
    );

    // Nothing there: the check before the window says where it asked.
    drop(_gateway);
    let (output, _) = run(
        "peers-url-gone",
        &format!("[[config]]\nname = \"theirs\"\nurl = \"http://127.0.0.1:{gateway}/graphql\"\n"),
        &[],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("theirs, round 1: gateway at 127.0.0.1:{gateway}")),
        "{stderr}"
    );
}
