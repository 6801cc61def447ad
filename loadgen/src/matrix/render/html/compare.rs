//! The page of `loadgen compare A B --html OUT`: what changed between two runs, and how
//! sure we are. For each figure (req/s, p99, the gateway's CPU per request, req/s
//! against the run's baseline) and configuration: A and B with their rounds' range, the
//! ratio B/A with its 95% interval, the verdict (improved, regressed, within noise, no
//! change), and every round drawn as a dot. Above them, what makes the two runs hard to
//! compare: other machines, other experiments, disturbed or quick runs.

use maud::{html, Markup};

use super::manifest::date_of;
use super::page::{badge, callout, link, table, Page};
use super::run::headline;
use crate::matrix::compare::{pairs, Change, Metric, METRICS};
use crate::matrix::confidence::Verdict;
use crate::matrix::disturbance;
use crate::matrix::manifest::Manifest;
use crate::matrix::render::svg::colour;
use crate::matrix::summary::{ConfigSummary, Spread, Summary};

/// One of the two runs.
pub struct Side {
    /// `A` or `B`.
    pub label: &'static str,
    pub summary: Summary,
    pub manifest: Option<Manifest>,
    /// Its page, relative to the comparison's, when it has one.
    pub page: Option<String>,
}

fn machine(m: &Option<Manifest>) -> String {
    m.as_ref().map_or("not recorded".into(), |m| {
        format!(
            "{} ({} cores), kernel {}",
            m.cpu_model.as_deref().unwrap_or("unknown CPU"),
            m.cores,
            m.kernel.as_deref().unwrap_or("unknown")
        )
    })
}

/// The two runs, one row each.
fn runs(a: &Side, b: &Side) -> Markup {
    let rows: Vec<Vec<Markup>> = [a, b]
        .iter()
        .map(|s| {
            let run = match &s.page {
                Some(p) => link(p, &s.summary.run_id),
                None => html! { (s.summary.run_id) },
            };
            let m = &s.manifest;
            let commit = m.as_ref().and_then(|m| m.git.commit.as_deref());
            vec![
                html! { strong { (s.label) } },
                run,
                html! { (s.summary.experiment) },
                html! { (m.as_ref().map_or("–".into(), |m| date_of(&m.timestamp))) },
                html! {
                    @match commit {
                        Some(c) => code { (c.chars().take(12).collect::<String>()) },
                        None => "–",
                    }
                },
                html! { (machine(m)) },
                html! { (s.summary.rounds) @if s.summary.quick { " (--quick)" } },
                html! { (headline(&s.summary).unwrap_or_default()) },
            ]
        })
        .collect();
    table(
        &[
            "",
            "run",
            "experiment",
            "started",
            "commit",
            "machine",
            "rounds",
            "headline",
        ],
        &[false, false, false, false, false, false, true, false],
        &rows,
    )
}

/// What makes the two runs hard to compare.
fn caveats(a: &Side, b: &Side) -> Vec<Markup> {
    let mut out = Vec::new();
    let same_machine = match (&a.manifest, &b.manifest) {
        (Some(x), Some(y)) => x.cpu_model == y.cpu_model && x.cores == y.cores,
        _ => false,
    };
    if !same_machine {
        out.push(html! {
            (badge("warning", "machines"))
            " The runs are not known to come from the same machine (A: " (machine(&a.manifest))
            "; B: " (machine(&b.manifest)) "): absolute req/s, p99 and CPU say little across \
            machines; the ratios against each run's baseline are what can be compared."
        });
    }
    if a.summary.experiment != b.summary.experiment {
        out.push(html! {
            (badge("warning", "experiments"))
            " Different experiments (" (a.summary.experiment) " and " (b.summary.experiment)
            "): only configurations with the same name are set side by side."
        });
    }
    for s in [a, b] {
        if s.summary.rounds < 2 {
            out.push(html! {
                (badge("warning", "1 round")) " " (s.label)
                " has one round: its figures have no spread, and a change cannot be told from noise."
            });
        }
        if s.summary.quick {
            out.push(html! {
                (badge("quiet", "--quick")) " " (s.label) " is a --quick run: indicative only."
            });
        }
        for d in disturbance::of(&s.summary) {
            let configs: Vec<String> = d
                .configs
                .iter()
                .map(|(name, detail)| format!("{name}: {detail}"))
                .collect();
            out.push(html! {
                (badge("warning", d.short)) " " (s.label) " was disturbed: " (d.what) ". "
                (configs.join("; "))
            });
        }
    }
    out
}

fn spread_text(s: Option<Spread>, digits: usize) -> Markup {
    match s {
        Some(s) if s.min < s.max => html! {
            (format!("{:.digits$}", s.median)) " "
            small { (format!("({:.digits$}–{:.digits$})", s.min, s.max)) }
        },
        Some(s) => html! { (format!("{:.digits$}", s.median)) },
        None => html! { "–" },
    }
}

/// Every round of A (top line) and B (bottom line) as dots on one axis, medians as
/// ticks.
fn rounds_strip(metric: &Metric, a: Option<&ConfigSummary>, b: Option<&ConfigSummary>) -> Markup {
    let values = |c: Option<&ConfigSummary>| -> Vec<f64> {
        c.map_or(Vec::new(), |c| {
            c.rounds.iter().filter_map(metric.round).collect()
        })
    };
    let (va, vb) = (values(a), values(b));
    let all: Vec<f64> = va
        .iter()
        .chain(&vb)
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if all.is_empty() {
        return html! { "–" };
    }
    let (lo, hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(*v), h.max(*v))
        });
    let pad = if hi > lo {
        (hi - lo) * 0.08
    } else {
        hi.abs().max(1.0) * 0.05
    };
    let (lo, hi) = (lo - pad, hi + pad);
    let (width, left, right) = (220.0, 8.0, 212.0);
    let x = |v: f64| format!("{:.1}", left + (v - lo) / (hi - lo) * (right - left));
    let one = |v: f64| format!("{v:.1}");
    // Elements of an SVG inside HTML are closed with an end tag: a void `<line>` would
    // hold the elements after it.
    html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(width) height="34"
            viewBox={ "0 0 " (width) " 34" } role="img" {
            line x1=(left) x2=(right) y1="17" y2="17" stroke="#ddd" {}
            @for (k, (label, values, y)) in [("A", &va, 9.0), ("B", &vb, 25.0)].into_iter().enumerate() {
                @if let Some(s) = Spread::of(values) {
                    line x1=(x(s.median)) x2=(x(s.median)) y1=(one(y - 7.0)) y2=(one(y + 7.0))
                        stroke=(colour(k)) stroke-width="2" {}
                }
                @for v in values.iter() {
                    circle cx=(x(*v)) cy=(one(y)) r="3.5" fill=(colour(k)) fill-opacity="0.75" {
                        title { (label) ": " (format!("{v:.2}")) }
                    }
                }
            }
        }
    }
}

/// One figure's table: a row per configuration; an improvement or a regression
/// colours its verdict.
fn metric_table(metric: &Metric, a: &Summary, b: &Summary, noise: f64) -> Markup {
    let header = [
        "config",
        "A: median (min–max)",
        "B: median (min–max)",
        "B/A [95% interval]",
        "verdict",
        "rounds: A above, B below",
    ];
    let rows = pairs(a, b).into_iter().map(|(name, ca, cb)| {
        let change = Change::between(metric, ca, cb, noise);
        let ratio = match (change.interval, change.ratio()) {
            (Some(i), _) => html! {
                (format!("{:.3}x", i.estimate)) " "
                small { (format!("[{:.3}–{:.3}]", i.low, i.high)) }
            },
            (None, Some(r)) => html! { (format!("{r:.3}x")) },
            (None, None) => html! { "–" },
        };
        let both = change.a.is_some() && change.b.is_some();
        let class = match change.judgement {
            Verdict::Improved if both => Some("good"),
            Verdict::Regressed if both => Some("bad"),
            _ => None,
        };
        let word = match (both, change.interval) {
            (false, _) => "–".to_string(),
            (true, Some(i)) => format!(
                "{:+.1}%: {}",
                (i.estimate - 1.0) * 100.0,
                change.judgement.text()
            ),
            (true, None) => change.judgement.text().to_string(),
        };
        html! {
            tr {
                td { strong { (name) } }
                td class="num" { (spread_text(change.a, metric.digits)) }
                td class="num" { (spread_text(change.b, metric.digits)) }
                td class="num" { (ratio) }
                @match class {
                    Some(class) => td class=(class) { strong { (word) } },
                    None => td { (word) },
                }
                td { (rounds_strip(metric, ca, cb)) }
            }
            "\n"
        }
    });
    let rows: Vec<Markup> = rows.collect();
    html! {
        div class="table" {
            table {
                thead { tr { @for h in header { th { (h) } } } }
                tbody { "\n" @for row in &rows { (row) } }
            }
        }
        "\n"
    }
}

/// The page; `noise` is the threshold a change must exceed (a share).
pub fn page(a: &Side, b: &Side, noise: f64) -> String {
    let mut page = Page::new(&format!(
        "compare {} run {} → {} run {}",
        a.summary.experiment, a.summary.run_id, b.summary.experiment, b.summary.run_id
    ));
    page.push(html! {
        h1 {
            "What changed from A (" (a.summary.experiment) " run " (a.summary.run_id)
            ") to B (" (b.summary.experiment) " run " (b.summary.run_id) ")"
        }
    });
    page.push(runs(a, b));
    let caveats = caveats(a, b);
    if caveats.is_empty() {
        page.push(callout(
            "clean",
            "Same machine, same experiment, several rounds each, neither run disturbed.",
            &[],
        ));
    } else {
        page.push(callout("warning", "Read with care", &caveats));
    }
    page.push(html! {
        p class="sub" {
            (crate::matrix::confidence::UNPAIRED_METHOD) ". A change is "
            strong { "improved" } " or " strong { "regressed" } " when the whole interval lies beyond \
            the noise threshold of ±" (format!("{:.1}%", noise * 100.0)) "; " strong { "within noise" }
            " when it excludes 1 but reaches into the threshold; " strong { "no change" } " when it holds 1. \
            How often these verdicts cry wolf on this machine is measured by the A/A experiment \
            (docs/matrix.md, \"How sure a ratio is\"). Within one run, each configuration's ratio to its \
            baseline was taken round by round on the same machine state: the last table moves least \
            between runs."
        }
    });
    for (i, metric) in METRICS.iter().enumerate() {
        page.section(
            &format!("metric-{i}"),
            &format!(
                "{} ({} is better)",
                metric.title,
                if metric.higher_is_better {
                    "higher"
                } else {
                    "lower"
                }
            ),
            metric_table(metric, &a.summary, &b.summary, noise),
        );
    }
    page.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::summary::fixtures::{self, measurement};

    fn side(label: &'static str, rps: [[f64; 3]; 2]) -> Side {
        let mut ms = Vec::new();
        for round in 0..3 {
            for (name, values) in ["no-cache", "ttl<0>"].iter().zip(rps) {
                let mut m = measurement(round + 1, name, values[round as usize], 10.0);
                m.machine_busy_cores = None;
                ms.push(m);
            }
        }
        crate::matrix::aggregation::set_ratios(&mut ms, &|_| "no-cache".to_string());
        let mut s = fixtures::summary("seed", "no-cache", vec![]);
        for name in ["no-cache", "ttl<0>"] {
            let rounds: Vec<_> = ms.iter().filter(|m| m.config == name).cloned().collect();
            s.configs.push(ConfigSummary::from_rounds(
                name,
                None,
                Default::default(),
                serde_json::json!({}),
                rounds,
            ));
        }
        s.rounds = 3;
        s.run_id = format!("run-{label}");
        Side {
            label,
            summary: s,
            manifest: None,
            page: Some(format!("../{label}/index.html")),
        }
    }

    #[test]
    fn a_change_beyond_the_spread_is_marked_with_its_direction() {
        let a = side("A", [[1000.0, 1050.0, 980.0], [4600.0, 4500.0, 4700.0]]);
        let b = side("B", [[1010.0, 1040.0, 990.0], [5600.0, 5500.0, 5700.0]]);
        let html = page(&a, &b, 0.02);
        // ttl<0>: 4600 → 5600, the whole interval above +2%: improved; no-cache's
        // interval holds 1.
        assert!(
            html.contains("<td class=\"good\"><strong>+21.7%: improved</strong>"),
            "{html}"
        );
        assert!(html.contains("+0.4%: no change"), "{html}");
        assert!(html.contains("1.217x <small>[1.156–1.282]"), "{html}");
        assert!(
            html.contains("Welch's t") && html.contains("±2.0%"),
            "{html}"
        );
        // Each round a dot: 3 rounds × 2 runs × 2 configurations × 4 figures (CPU: none).
        assert_eq!(html.matches("<circle").count(), 3 * 2 * 2 * 3, "{html}");
        assert!(
            html.contains("<a href=\"../A/index.html\">run-A</a>"),
            "{html}"
        );
        // No manifests: the machines are not known to be one.
        assert!(html.contains(">machines<"), "{html}");
        assert!(
            html.contains("ttl&lt;0&gt;") && !html.contains("ttl<0>"),
            "{html}"
        );
        assert!(!html.contains("<script"), "{html}");
    }

    #[test]
    fn worse_latency_is_marked_bad() {
        let a = side("A", [[1000.0, 1050.0, 980.0], [4600.0, 4500.0, 4700.0]]);
        let mut b = side("B", [[1000.0, 1050.0, 980.0], [4600.0, 4500.0, 4700.0]]);
        for c in &mut b.summary.configs {
            for (m, p99) in c.rounds.iter_mut().zip([29.0, 30.0, 31.0]) {
                m.p99_ms = p99;
            }
            c.p99_ms = Spread::of(&[29.0, 30.0, 31.0]);
        }
        let html = metric_table(&METRICS[1], &a.summary, &b.summary, 0.02).into_string();
        assert!(
            html.contains("<td class=\"bad\"><strong>+199.9%: regressed</strong>"),
            "{html}"
        );
    }
}
