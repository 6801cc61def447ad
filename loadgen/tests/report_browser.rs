//! The run pages in a real browser: a `--quick` matrix run (three configurations of
//! `experiments/ttl-tradeoff.toml`: every chart the lab draws for a workload), its
//! `index.html` opened from disk in headless Chromium (Debian's `chromium`), and the DOM
//! Chromium built checked: the tables, the inline charts, the flamegraph links and the
//! files every link names, the warning that matches the run's figures; the results index
//! lists the run. Then `loadgen report --charts` on a copy of committed run
//! 20261201-010445 (five configurations at 0% stale) and `loadgen compare --html`, and in
//! every page the labels of every chart measured by the browser itself: no two overlap.
//!
//! Nothing here depends on timing: what the page must say follows from the run's own
//! summary.json, whatever the machine's load made of the figures.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use loadgen::matrix::summary::Summary;

#[allow(dead_code)]
mod support;
use support::{loadgen, quick_matrix, require_services, scratch};

/// Chromium, or a failure saying how to get it (the test does not skip).
fn chromium() -> PathBuf {
    let found = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/bin/chromium", "/usr/bin/chromium-browser"].map(PathBuf::from))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "chromium is not installed, so this test cannot run (it does not skip): \
             apt-get install chromium (scripts/test.sh installs it), or set CHROMIUM"
        )
    })
}

/// The DOM of `page` once Chromium has loaded it from disk, with a fresh profile and no
/// network use of its own. Chromium is stopped by PID if it takes over two minutes.
fn dump_dom(page: &Path, scratch: &Path) -> String {
    let profile = scratch.join(format!(
        "chromium-profile-{}",
        page.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_dir_all(&profile);
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let out_file = scratch.join("dom.html");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(&url)
        .stdout(std::fs::File::create(&out_file).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish loading {url} in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "chromium --dump-dom {url}: {status}");
    let dom = std::fs::read_to_string(&out_file).unwrap();
    assert!(dom.contains("</html>"), "no DOM for {url}: {dom}");
    let _ = std::fs::remove_dir_all(&profile);
    dom
}

/// Every `href="…"` of the DOM, anchors within the page left out.
fn links(dom: &str) -> Vec<String> {
    dom.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|h| !h.starts_with('#'))
        .map(|h| h.replace("&amp;", "&").replace("%20", " "))
        .collect()
}

/// Every link of `dom` names a file or folder that exists next to `page`, and none
/// leaves the disk.
fn assert_links_resolve(dom: &str, page: &Path) {
    let base = page.parent().unwrap();
    let all = links(dom);
    assert!(!all.is_empty(), "{}: no links", page.display());
    for link in all {
        assert!(
            !link.contains("://"),
            "{}: a link off the disk: {link}",
            page.display()
        );
        assert!(
            base.join(&link).exists(),
            "{}: {link} does not exist",
            page.display()
        );
    }
    assert!(
        !dom.contains("src=\"http") && !dom.contains("<link"),
        "{}: nothing is fetched",
        page.display()
    );
}

/// A copy of `page` with a script that measures, in the browser, every chart label
/// (`text.label`) of every inline SVG and writes the pairs that intersect into
/// `<pre id="overlaps">`; returns what it wrote.
fn measured_overlaps(page: &Path, scratch: &Path) -> String {
    const PROBE: &str = r#"<script>
      const found = [];
      document.querySelectorAll('svg').forEach((svg, s) => {
        const boxes = [...svg.querySelectorAll('text.label')].map(t => [t.textContent, t.getBoundingClientRect()]);
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
          const [na, a] = boxes[i], [nb, b] = boxes[j];
          const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
          const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
          if (w > 0.5 && h > 0.5) found.push(`svg ${s}: ${na} / ${nb}`);
        }
      });
      const labels = document.querySelectorAll('svg text.label').length;
      const pre = document.createElement('pre');
      pre.id = 'overlaps';
      pre.textContent = `labels ${labels}; overlaps ${found.length}: ${found.join('; ')}`;
      document.body.appendChild(pre);
    </script>"#;
    let html = std::fs::read_to_string(page).unwrap();
    let probe = page.with_file_name("probe.html");
    std::fs::write(&probe, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let dom = dump_dom(&probe, scratch);
    std::fs::remove_file(&probe).ok();
    let start = dom.find("<pre id=\"overlaps\">").expect("the probe ran") + 19;
    dom[start..start + dom[start..].find("</pre>").unwrap()].to_string()
}

fn assert_no_label_overlaps(page: &Path, scratch: &Path, at_least: usize) {
    let result = measured_overlaps(page, scratch);
    let labels: usize = result
        .strip_prefix("labels ")
        .and_then(|r| r.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{result}"));
    assert!(
        labels >= at_least,
        "{}: {labels} labels measured: {result}",
        page.display()
    );
    assert!(
        result.contains("; overlaps 0:"),
        "{}: {result}",
        page.display()
    );
}

/// Run a loadgen command; fail the test with its stderr when it fails.
fn run_loadgen(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_quick_runs_page_opens_in_chromium_with_its_tables_charts_and_links() {
    let bin_dir = require_services();
    chromium();
    let dir = scratch("report-browser");
    let results = dir.join("results");
    let run = results.join("quick");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/ttl-tradeoff.toml");
    quick_matrix(
        &config,
        &run,
        &bin_dir,
        &[
            "--duration",
            "4s",
            "--warmup",
            "1s",
            "--only",
            "no-cache,ttl-10,ttl-10-no-inval",
        ],
    );
    let summary: Summary =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let page = run.join("index.html");
    let dom = dump_dom(&page, &dir);

    // The summary tables: the configurations' table and summary.md's, a row per
    // configuration in the first.
    assert!(dom.contains("<h1>ttl-tradeoff — run "), "{dom}");
    assert!(dom.matches("<table").count() >= 3, "{dom}");
    for c in &summary.configs {
        assert!(
            dom.contains(&format!("<td><strong>{}</strong></td>", c.name)),
            "{}: {dom}",
            c.name
        );
    }
    // The charts inline, one <svg> per chart file, each in its figure.
    for chart in ["chart.svg", "tradeoff.svg", "timeline.svg"] {
        assert!(run.join(chart).is_file(), "{chart}");
        assert!(
            dom.contains(&format!("<figure id=\"{chart}\"><svg")),
            "{chart}: {dom}"
        );
    }
    assert!(dom.matches("<svg").count() >= 3, "{dom}");
    // Each configuration's flamegraph a click away, or why it has none.
    for c in &summary.configs {
        match &c.flamegraph {
            Some(f) => {
                assert!(run.join(f).is_file(), "{f}");
                assert!(dom.contains(&format!("href=\"{f}\"")), "{f}: {dom}");
            }
            None => {
                let note = c.flamegraph_note.as_deref().unwrap_or("none");
                let text = note
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;");
                assert!(dom.contains(&text), "{note}: {dom}");
            }
        }
    }
    // The manifest: commit, machine, rustc, rounds, the command.
    for fact in [
        "rustc ",
        "--quick",
        "ttl-tradeoff.toml",
        "1 round(s), 4 s measured after 1 s warm-up",
    ] {
        assert!(dom.contains(fact), "{fact}: {dom}");
    }
    // The warning says what the figures say.
    let busy = summary
        .configs
        .iter()
        .any(|c| c.median.other_cores.is_some_and(|r| r > 0.3));
    let failed = summary.configs.iter().any(|c| c.errors_total > 0);
    if busy || failed {
        assert!(dom.contains("This run was disturbed"), "{dom}");
        if busy {
            assert!(dom.contains(">machine busy<"), "{dom}");
        }
    } else {
        assert!(dom.contains("No disturbance found"), "{dom}");
    }
    assert_links_resolve(&dom, &page);
    assert_no_label_overlaps(&page, &dir, 3 + 2 * 3 + 3);

    // The results index lists the run and links its page.
    let index = results.join("index.html");
    let dom = dump_dom(&index, &dir);
    assert!(dom.contains("href=\"quick/index.html\""), "{dom}");
    assert!(dom.contains("ttl-tradeoff"), "{dom}");
    assert_links_resolve(&dom, &index);

    // A committed run with five configurations on one spot of the trade-off chart: its
    // page from `loadgen report --charts`, which draws its charts again.
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/20261201-010445");
    let copy = results.join("20261201-010445");
    std::fs::create_dir_all(&copy).unwrap();
    for file in ["summary.json", "manifest.json", "summary.md"] {
        std::fs::copy(committed.join(file), copy.join(file)).unwrap();
    }
    run_loadgen(
        Command::new(loadgen())
            .args(["report", "--charts"])
            .arg(&copy),
    );
    let page = copy.join("index.html");
    let dom = dump_dom(&page, &dir);
    assert!(dom.contains("<figure id=\"tradeoff.svg\"><svg"), "{dom}");
    assert!(dom.contains("flame-ttl-0.svg (file missing)"), "{dom}");
    assert_no_label_overlaps(&page, &dir, 8 * 3 + 2 * 8);
    let dom = dump_dom(&index, &dir);
    assert!(
        dom.find("quick/index.html").unwrap() < dom.find("20261201-010445/index.html").unwrap(),
        "newest first: {dom}"
    );

    // Two runs side by side.
    let compare = dir.join("compare.html");
    run_loadgen(
        Command::new(loadgen())
            .arg("compare")
            .arg(&copy)
            .arg(&run)
            .arg("--html")
            .arg(&compare),
    );
    let dom = dump_dom(&compare, &dir);
    assert!(
        dom.contains("What changed from A (ttl-tradeoff run 20261201-010445)"),
        "{dom}"
    );
    assert!(dom.contains("<td><strong>ttl-10</strong></td>"), "{dom}");
    assert!(dom.contains(">1 round<"), "B has one round: {dom}");
    assert!(dom.matches("<circle").count() >= 3 * 2, "{dom}");
    assert_links_resolve(&dom, &compare);

    std::fs::remove_dir_all(&dir).ok();
}
