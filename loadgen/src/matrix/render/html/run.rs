//! A run's page (`results/<run>/index.html`): what the run was and its headline, a
//! visible warning when it was disturbed, a table of the configurations with each one's
//! flamegraph a click away ([`super::configurations`]), the charts inline, summary.md's
//! tables, the other reports of the folder, and the manifest ([`super::manifest`]:
//! commit, machine, rustc, rounds, the command).
//!
//! [`RunFiles`] is what the folder holds, read by [`crate::matrix::report`]; this file
//! only turns it into HTML.

use std::collections::BTreeSet;

use maud::{html, Markup};

use super::drawing::inline_svg;
use super::manifest::date_of;
use super::page::{badge, callout, link, markdown, Page};
use super::{configurations, manifest};
use crate::matrix::disturbance::{self, Severity, CONTENDED_CORES};
use crate::matrix::manifest::Manifest;
use crate::matrix::render::svg::format_value;
use crate::matrix::summary::{Spread, Summary};

/// What a run's folder holds, as the page needs it.
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub summary: Summary,
    pub manifest: Option<Manifest>,
    /// Charts in the order shown: file name and SVG text.
    pub charts: Vec<(String, String)>,
    /// Markdown reports, summary.md first: file name and text.
    pub reports: Vec<(String, String)>,
    /// Files and folders of the run worth a link (`summary.json`, `runs/`…), present.
    pub files: Vec<String>,
    /// The flamegraph files present in the folder.
    pub flamegraphs: BTreeSet<String>,
    /// The results index, relative to the page, when there is one.
    pub index: Option<String>,
}

/// What a chart file shows, for its caption.
fn caption(file: &str) -> &'static str {
    match file {
        "chart.svg" => "req/s and p99 per configuration: medians over rounds, whiskers min–max, req/s against the baseline within rounds",
        "tradeoff.svg" => "Throughput and the gateway's CPU per request against the share of stale reads (log scale, 0% drawn apart)",
        "overload.svg" => "Open loop: goodput and the p99 of admitted requests against the offered rate",
        "timeline.svg" => "Round 1 second by second: client req/s, subgraph requests and p99 per configuration",
        _ => "",
    }
}

/// The run in one line: in open loop, the highest goodput and the rate offered for it
/// (req/s follow the rate asked for there); otherwise the configuration furthest above
/// the baseline in req/s (within-round ratio, median and range), or the one
/// configuration's req/s.
pub fn headline(summary: &Summary) -> Option<String> {
    let open_loop = summary
        .configs
        .iter()
        .filter_map(|c| {
            let of = |f: &dyn Fn(&crate::matrix::summary::Measurement) -> Option<f64>| {
                Spread::of(&c.rounds.iter().filter_map(f).collect::<Vec<_>>()).map(|s| s.median)
            };
            let offered = of(&|m| m.open_loop.as_ref().map(|o| o.target_rate))?;
            Some((c, of(&|m| m.goodput_per_sec)?, offered))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((c, goodput, offered)) = open_loop {
        return Some(format!(
            "{}: the highest goodput, {goodput:.0} answers/s without errors at {offered:.0} req/s offered",
            c.name
        ));
    }
    let best = summary
        .configs
        .iter()
        .filter(|c| c.name != summary.baseline)
        .filter_map(|c| c.ratio.map(|r| (c, r)))
        .max_by(|a, b| a.1.median.total_cmp(&b.1.median));
    if let Some((c, r)) = best {
        let vs = c.baseline.as_deref().unwrap_or(&summary.baseline);
        let interval = c
            .against_baseline
            .as_ref()
            .and_then(|a| a.requests_per_sec.as_ref());
        return Some(match interval {
            Some(i) => format!(
                "{}: {:.2}x the req/s of {vs} (95% interval {:.2}–{:.2})",
                c.name, i.estimate, i.low, i.high
            ),
            None if summary.rounds > 1 => format!(
                "{}: {:.2}x the req/s of {vs} ({:.2}–{:.2})",
                c.name, r.median, r.min, r.max
            ),
            None => format!("{}: {:.2}x the req/s of {vs}", c.name, r.median),
        });
    }
    let c = summary.configs.first()?;
    let rps = c.requests_per_sec?;
    Some(format!("{}: {} req/s", c.name, format_value(rps.median)))
}

/// The warning boxes: disturbances, then the quick-run caveat.
fn warnings(run: &RunFiles) -> Markup {
    let s = &run.summary;
    let found = disturbance::of(s);
    let disturbed = (!found.is_empty()).then(|| {
        let class = if found.iter().any(|d| d.severity == Severity::Error) {
            "error"
        } else {
            "warning"
        };
        let items: Vec<Markup> = found
            .iter()
            .map(|d| {
                let severity = match d.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                };
                html! {
                    (badge(severity, d.short)) " " (d.what)
                    ul {
                        @for (name, detail) in &d.configs {
                            li { strong { (name) } ": " (detail) }
                        }
                    }
                }
            })
            .collect();
        callout(class, "This run was disturbed", &items)
    });
    let clean = || {
        let judged = s.configs.iter().all(|c| c.median.other_cores.is_some());
        let text = if judged {
            format!(
                "No disturbance found: the rest of the machine stayed at or under {CONTENDED_CORES} cores in every configuration, every request was answered, and no rate fell short."
            )
        } else {
            "No disturbance found in what was recorded; this run did not record the rest of the machine's CPU.".into()
        };
        callout("clean", &text, &[])
    };
    let notes: Vec<Markup> = s
        .warnings
        .iter()
        .map(|w| html! { (w.replace("**", "")) })
        .collect();
    html! {
        (disturbed.unwrap_or_else(clean))
        @if s.quick {
            (callout("notes", "--quick run: one short round per configuration, indicative only", &[]))
        }
        @if !notes.is_empty() {
            (callout("notes", "Notes", &notes))
        }
    }
}

/// Each chart inline in a figure, captioned and linked to its file.
fn charts(run: &RunFiles) -> Markup {
    html! {
        @for (file, svg) in &run.charts {
            figure id=(file) {
                @if let Some(drawing) = inline_svg(svg) {
                    (drawing)
                } @else {
                    p { (link(file, file)) " (not inlined: not a plain drawing)" }
                }
                figcaption { (link(file, file)) " — " (caption(file)) }
            }
            "\n"
        }
        @if run.charts.is_empty() {
            p { "No charts in this folder." }
        }
    }
}

/// The page.
pub fn page(run: &RunFiles) -> String {
    let s = &run.summary;
    let mut page = Page::new(&format!("{} — run {}", s.experiment, s.run_id));
    page.push(html! {
        nav {
            @if let Some(index) = &run.index {
                (link(index, "← all runs")) " · "
            }
            @for id in ["configurations", "charts", "tables", "manifest"] {
                a href={ "#" (id) } { (id) }
            }
            " · files: "
            @for f in &run.files {
                (link(f, f)) " "
            }
        }
    });
    page.push(html! { h1 { (s.experiment) " — run " (s.run_id) } });
    let mut sub = Vec::new();
    if let Some(m) = &run.manifest {
        sub.push(date_of(&m.timestamp));
    }
    sub.push(format!(
        "{} configuration(s) × {} round(s), {:.0} s measured after {:.0} s warm-up, rounds interleaved; baseline {}",
        s.configs.len(),
        s.rounds,
        s.duration_s,
        s.warmup_s,
        s.baseline
    ));
    if let Some(m) = &run.manifest {
        sub.push(crate::matrix::manifest::machine_line(m));
    }
    page.push(html! { p class="sub" { (sub.join(" · ")) } });
    if let Some(h) = headline(s) {
        page.push(html! { p class="headline" { strong { (h) } } });
    }
    page.push(warnings(run));
    page.section(
        "configurations",
        "Configurations",
        configurations::table_of(run),
    );
    page.section("charts", "Charts", charts(run));
    page.section(
        "tables",
        "Summary tables",
        html! {
            @for (file, text) in &run.reports {
                h3 { (link(file, file)) } (markdown(text))
            }
            @if run.reports.is_empty() {
                p { "No summary.md in this folder." }
            }
        },
    );
    page.section(
        "manifest",
        "Manifest",
        manifest::table_of(run.manifest.as_ref()),
    );
    page.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::sampling::ProcessCpu;
    use crate::matrix::summary::fixtures::{self, measurement};

    fn run() -> RunFiles {
        let mut quiet = measurement(1, "no-cache", 1000.0, 20.0);
        quiet.machine_busy_cores = None;
        let mut busy = measurement(1, "ttl<0>", 4600.0, 4.0);
        busy.machine_busy_cores = Some(1.9);
        busy.cpu = vec![ProcessCpu {
            name: "gateway".into(),
            cpu_seconds: Some(9.0),
            cores: Some(0.9),
            us_per_request: Some(19.6),
        }];
        busy.errors.graphql = 4;
        let mut ms = vec![quiet, busy];
        crate::matrix::aggregation::set_ratios(&mut ms, &|_| "no-cache".to_string());
        let mut summary = fixtures::summary("seed", "no-cache", ms);
        summary.configs[0].flamegraph = Some("flame-no-cache.svg".into());
        summary.configs[1].flamegraph_note = Some("no flamegraph (perf missing)".into());
        RunFiles {
            summary,
            manifest: None,
            charts: vec![
                (
                    "chart.svg".into(),
                    "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>a</text></svg>".into(),
                ),
                (
                    "odd.svg".into(),
                    "<svg><script>alert(1)</script></svg>".into(),
                ),
            ],
            reports: vec![(
                "summary.md".into(),
                "# seed\n\n| config | req/s |\n|---|---:|\n| a | 1 |\n".into(),
            )],
            files: vec!["summary.json".into(), "runs/".into()],
            flamegraphs: ["flame-no-cache.svg".to_string()].into_iter().collect(),
            index: Some("../index.html".into()),
        }
    }

    #[test]
    fn the_page_has_the_tables_charts_flamegraph_links_and_a_visible_warning() {
        let html = page(&run());
        assert!(html.contains("<h1>seed — run r</h1>"), "{html}");
        // The headline: the configuration furthest above the baseline.
        assert!(
            html.contains("ttl&lt;0&gt;: 4.60x the req/s of no-cache"),
            "{html}"
        );
        // Disturbed: the rest of the machine (1.0 core) and the GraphQL errors.
        assert!(html.contains("This run was disturbed"), "{html}");
        assert!(
            html.contains(">machine busy<") && html.contains(">failed requests<"),
            "{html}"
        );
        assert!(
            html.contains("<strong>ttl&lt;0&gt;</strong>: 1.00 cores (median)"),
            "{html}"
        );
        assert!(
            html.contains("4 request(s), 0.009% of those made: GraphQL 4"),
            "{html}"
        );
        // One row per configuration, the flamegraph linked or its absence explained.
        assert!(
            html.contains("<a href=\"flame-no-cache.svg\">flame-no-cache.svg</a>"),
            "{html}"
        );
        assert!(html.contains("no flamegraph (perf missing)"), "{html}");
        // The chart inline, the one with a script only linked; the Markdown as a table.
        assert!(html.contains("<figure id=\"chart.svg\"><svg"), "{html}");
        assert!(!html.contains("<script"), "{html}");
        assert!(
            html.contains("<a href=\"odd.svg\">odd.svg</a> (not inlined"),
            "{html}"
        );
        assert!(
            html.contains("<td style=\"text-align: right\">1</td>"),
            "{html}"
        );
        assert!(html.contains("No manifest.json in this folder"), "{html}");
        assert!(
            html.contains("<a href=\"../index.html\">← all runs</a>"),
            "{html}"
        );
        // Names are escaped everywhere.
        assert!(!html.contains("ttl<0>"), "{html}");
    }

    #[test]
    fn a_quiet_run_says_so_and_quotes_its_command() {
        let mut r = run();
        r.summary.configs.truncate(1);
        r.summary.configs[0].median.other_cores = Some(0.1);
        r.summary.warnings.clear();
        r.manifest = Some(serde_json::from_value(serde_json::json!({
            "schema": "loadgen.manifest/1", "run_id": "r", "timestamp": "2026-12-01T05:35:50Z",
            "git": {"commit": "d74d1245c60d68d1d2ac72b288a424a62e969db0", "dirty": false},
            "rustc": "rustc 1.95.0", "loadgen_version": "0.1.0", "cpu_model": "Xeon", "cores": 2,
            "kernel": "6.18", "experiment_file": "experiments/seed.toml", "experiment": "name = \"seed\"",
            "arguments": ["loadgen", "matrix", "--only", "a b"],
            "settings": {"rounds": 3, "duration_s": 10.0, "warmup_s": 2.0, "quick": false}, "binaries": []
        })).unwrap());
        let html = page(&r);
        assert!(html.contains("No disturbance found"), "{html}");
        assert!(!html.contains("This run was disturbed"), "{html}");
        assert!(
            html.contains("<code>loadgen matrix --only 'a b'</code>"),
            "{html}"
        );
        assert!(
            html.contains("d74d1245c60d68d1d2ac72b288a424a62e969db0"),
            "{html}"
        );
        assert!(html.contains("2026-12-01 05:35:50 UTC"), "{html}");
        assert!(
            html.contains("3 round(s), 10 s measured after 2 s warm-up"),
            "{html}"
        );
    }
}
