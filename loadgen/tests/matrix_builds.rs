//! A configuration runs the gateway build it names (`build = { binary = ... }`), so an
//! A/B of two builds is an ordinary matrix run: the test's wrapper build records that
//! it was the one started, the manifest lists the build, and with two rounds each
//! ratio against the baseline carries its 95% interval in summary.json and summary.md.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

#[allow(dead_code)]
mod support;
use support::{matrix, require_services, scratch};

#[test]
fn a_configuration_runs_the_build_it_names_with_intervals_against_the_baseline() {
    let bin_dir = require_services();
    let dir = scratch("matrix-builds");
    // The "B" build: the same gateway behind a script that leaves a mark per start.
    let marks = dir.join("marks");
    let wrapper = dir.join("gateway-b");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho started >> '{}'\nexec '{}' \"$@\"\n",
            marks.display(),
            bin_dir.join("gateway").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("ab.toml");
    std::fs::write(
        &config,
        format!(
            r#"name = "ab"
baseline = "a"
[query]
document = "{{ topPosts(count: 2) {{ pid }} }}"
expected = '{{"data":{{"topPosts":[{{"pid":"p1"}},{{"pid":"p2"}}]}}}}'
[load]
connections = 4
threads = 1
[profile]
enabled = false
[[config]]
name = "a"
[[config]]
name = "b"
build = {{ binary = "{}" }}
"#,
            wrapper.display()
        ),
    )
    .unwrap();
    let run = dir.join("run");
    let output = matrix(
        &["--rounds", "2", "--duration", "1s", "--warmup", "200ms"],
        &config,
        &run,
        &bin_dir,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The wrapper started once per round, for "b" only.
    let starts = std::fs::read_to_string(&marks).unwrap();
    assert_eq!(starts.lines().count(), 2, "{starts}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    let builds = manifest["builds"].as_array().unwrap();
    assert_eq!(builds.len(), 1, "{manifest}");
    assert_eq!(builds[0]["config"], "b");
    assert!(builds[0]["binary"].as_str().unwrap().ends_with("gateway-b"));
    assert!(manifest["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["name"] == "gateway (b)"));
    // Two rounds: an interval on every ratio of b against a.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let b = &summary["configs"][1];
    assert_eq!(b["name"], "b");
    let rps = &b["against_baseline"]["requests_per_sec"];
    let (low, high) = (rps["low"].as_f64().unwrap(), rps["high"].as_f64().unwrap());
    let estimate = rps["estimate"].as_f64().unwrap();
    assert!(
        low <= estimate && estimate <= high && rps["rounds"] == 2,
        "{rps}"
    );
    assert!(summary["configs"][0].get("against_baseline").is_none());
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        md.contains("**Against the baseline**") && md.contains("| b | a |"),
        "{md}"
    );
    // A build that is not there is refused before anything starts.
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace(&wrapper.display().to_string(), "/nonexistent/gateway"),
    )
    .unwrap();
    let output = matrix(&["--quick"], &bad, &dir.join("bad-run"), &bin_dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("config \"b\": build.binary = /nonexistent/gateway"),
        "{stderr}"
    );
    assert!(!Path::new(&dir.join("bad-run")).exists(), "nothing started");
    std::fs::remove_dir_all(&dir).ok();
}
