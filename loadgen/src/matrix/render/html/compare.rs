//! The page of `loadgen compare A B --html OUT`: what changed between two runs, and how
//! sure we are. For each figure (req/s, p99, the gateway's CPU per request, req/s
//! against the run's baseline) and configuration: A and B with their rounds' range, the
//! ratio B/A with the range the rounds allow, whether the change is beyond the rounds'
//! spread, and every round drawn as a dot. Above them, what makes the two runs hard to
//! compare: other machines, other experiments, disturbed or quick runs.

use std::fmt::Write as _;

use super::manifest::date_of;
use super::page::{badge, callout, escape, link, table, Page};
use super::run::headline;
use crate::matrix::compare::{pairs, Change, Metric, Verdict, METRICS};
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
fn runs(a: &Side, b: &Side) -> String {
    let rows: Vec<Vec<String>> = [a, b]
        .iter()
        .map(|s| {
            let run = match &s.page {
                Some(p) => link(p, &s.summary.run_id),
                None => escape(&s.summary.run_id),
            };
            let m = &s.manifest;
            let commit = m
                .as_ref()
                .and_then(|m| m.git.commit.as_deref())
                .map_or("–".into(), |c| {
                    format!("<code>{}</code>", escape(&c[..c.len().min(12)]))
                });
            vec![
                format!("<strong>{}</strong>", s.label),
                run,
                escape(&s.summary.experiment),
                escape(&m.as_ref().map_or("–".into(), |m| date_of(&m.timestamp))),
                commit,
                escape(&machine(m)),
                format!(
                    "{}{}",
                    s.summary.rounds,
                    if s.summary.quick { " (--quick)" } else { "" }
                ),
                escape(&headline(&s.summary).unwrap_or_default()),
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
fn caveats(a: &Side, b: &Side) -> Vec<String> {
    let mut out = Vec::new();
    let same_machine = match (&a.manifest, &b.manifest) {
        (Some(x), Some(y)) => x.cpu_model == y.cpu_model && x.cores == y.cores,
        _ => false,
    };
    if !same_machine {
        out.push(format!(
            "{} The runs are not known to come from the same machine (A: {}; B: {}): absolute \
             req/s, p99 and CPU say little across machines; the ratios against each run's baseline \
             are what can be compared.",
            badge("warning", "machines"),
            escape(&machine(&a.manifest)),
            escape(&machine(&b.manifest))
        ));
    }
    if a.summary.experiment != b.summary.experiment {
        out.push(format!(
            "{} Different experiments ({} and {}): only configurations with the same name are set side by side.",
            badge("warning", "experiments"),
            escape(&a.summary.experiment),
            escape(&b.summary.experiment)
        ));
    }
    for s in [a, b] {
        if s.summary.rounds < 2 {
            out.push(format!(
                "{} {} has one round: its figures have no spread, and a change cannot be told from noise.",
                badge("warning", "1 round"),
                s.label
            ));
        }
        if s.summary.quick {
            out.push(format!(
                "{} {} is a --quick run: indicative only.",
                badge("quiet", "--quick"),
                s.label
            ));
        }
        for d in disturbance::of(&s.summary) {
            let configs: Vec<String> = d
                .configs
                .iter()
                .map(|(name, detail)| format!("{}: {}", escape(name), escape(detail)))
                .collect();
            out.push(format!(
                "{} {} was disturbed: {}. {}",
                badge("warning", d.short),
                s.label,
                escape(&d.what),
                configs.join("; ")
            ));
        }
    }
    out
}

fn spread_text(s: Option<Spread>, digits: usize) -> String {
    s.map_or("–".into(), |s| {
        if s.min < s.max {
            format!(
                "{:.digits$} <small>({:.digits$}–{:.digits$})</small>",
                s.median, s.min, s.max
            )
        } else {
            format!("{:.digits$}", s.median)
        }
    })
}

/// Every round of A (top line) and B (bottom line) as dots on one axis, medians as
/// ticks.
fn rounds_strip(metric: &Metric, a: Option<&ConfigSummary>, b: Option<&ConfigSummary>) -> String {
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
        return "–".into();
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
    let x = |v: f64| left + (v - lo) / (hi - lo) * (right - left);
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="34" viewBox="0 0 {width:.0} 34" role="img"><line x1="{left}" x2="{right}" y1="17" y2="17" stroke="#ddd"/>"##
    );
    for (k, (label, values, y)) in [("A", &va, 9.0), ("B", &vb, 25.0)].into_iter().enumerate() {
        if let Some(s) = Spread::of(values) {
            let _ = write!(
                svg,
                r#"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="{3}" stroke-width="2"/>"#,
                x(s.median),
                y - 7.0,
                y + 7.0,
                colour(k)
            );
        }
        for v in values.iter() {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{y:.1}" r="3.5" fill="{}" fill-opacity="0.75"><title>{label}: {v:.2}</title></circle>"#,
                x(*v),
                colour(k)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// One figure's table: a row per configuration.
fn metric_table(metric: &Metric, a: &Summary, b: &Summary) -> String {
    let rows: Vec<Vec<String>> = pairs(a, b)
        .into_iter()
        .map(|(name, ca, cb)| {
            let change = Change::of(
                ca.and_then(metric.spread),
                cb.and_then(metric.spread),
                a.rounds,
                b.rounds,
            );
            let ratio = match (change.ratio(), change.ratio_range()) {
                (Some(r), Some((lo, hi))) if lo < hi => {
                    format!("{r:.3}x <small>({lo:.3}–{hi:.3})</small>")
                }
                (Some(r), _) => format!("{r:.3}x"),
                _ => "–".into(),
            };
            let (word, class) = match (change.ratio(), change.verdict) {
                (Some(r), Verdict::Beyond) => {
                    let better = (r > 1.0) == metric.higher_is_better;
                    (
                        format!(
                            "{:+.1}%: {}",
                            (r - 1.0) * 100.0,
                            if better { "better" } else { "worse" }
                        ),
                        if better { "good" } else { "bad" },
                    )
                }
                (Some(r), Verdict::Within) => (
                    format!("{:+.1}%: within the rounds' spread", (r - 1.0) * 100.0),
                    "",
                ),
                (Some(r), Verdict::NoSpread) => (
                    format!("{:+.1}%: no spread to judge by", (r - 1.0) * 100.0),
                    "",
                ),
                _ => ("–".into(), ""),
            };
            let verdict = if class.is_empty() {
                escape(&word)
            } else {
                format!("<strong>{}</strong>", escape(&word))
            };
            let mut cells = vec![
                format!("<strong>{}</strong>", escape(name)),
                spread_text(change.a, metric.digits),
                spread_text(change.b, metric.digits),
                ratio,
                verdict,
                rounds_strip(metric, ca, cb),
            ];
            if !class.is_empty() {
                cells[4] = format!("<span class=\"{class}\">{}</span>", cells[4]);
            }
            cells
        })
        .collect();
    let html = table(
        &[
            "config",
            "A: median (min–max)",
            "B: median (min–max)",
            "B/A (range the rounds allow)",
            "change",
            "rounds: A above, B below",
        ],
        &[false, true, true, true, false, false],
        &rows,
    );
    // A change beyond the spread colours its cell.
    html.replace("<td><span class=\"good\">", "<td class=\"good\"><span>")
        .replace("<td><span class=\"bad\">", "<td class=\"bad\"><span>")
}

/// The page.
pub fn page(a: &Side, b: &Side) -> String {
    let mut page = Page::new(&format!(
        "compare {} run {} → {} run {}",
        a.summary.experiment, a.summary.run_id, b.summary.experiment, b.summary.run_id
    ));
    page.push(&format!(
        "<h1>What changed from A ({} run {}) to B ({} run {})</h1>",
        escape(&a.summary.experiment),
        escape(&a.summary.run_id),
        escape(&b.summary.experiment),
        escape(&b.summary.run_id)
    ));
    page.push(&runs(a, b));
    let caveats = caveats(a, b);
    if caveats.is_empty() {
        page.push(&callout(
            "clean",
            "Same machine, same experiment, several rounds each, neither run disturbed.",
            &[],
        ));
    } else {
        page.push(&callout("warning", "Read with care", &caveats));
    }
    page.push(
        "<p class=\"sub\">B/A is B's median over A's; its range runs from B's smallest round over A's largest \
         to B's largest over A's smallest. A change is <strong>beyond the spread</strong> when the two runs' \
         ranges over rounds do not overlap (the range of B/A then excludes 1): larger than anything the \
         rounds varied by. With three rounds a side that is a coarse test — more rounds make it finer. \
         Within one run, each configuration's ratio to its baseline was taken round by round on the same \
         machine state: the last table moves least between runs.</p>",
    );
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
            &metric_table(metric, &a.summary, &b.summary),
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
        let html = page(&a, &b);
        // ttl<0>: 4600 → 5600, ranges apart: better; no-cache within the spread.
        assert!(
            html.contains("<td class=\"good\"><span><strong>+21.7%: better</strong>"),
            "{html}"
        );
        assert!(
            html.contains("+1.0%: within the rounds&#39; spread"),
            "{html}"
        );
        assert!(
            html.contains("1.217x <small>(1.170–1.267)</small>"),
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
            c.p99_ms = Some(Spread {
                median: 30.0,
                min: 29.0,
                max: 31.0,
            });
        }
        let html = metric_table(&METRICS[1], &a.summary, &b.summary);
        assert!(
            html.contains("<td class=\"bad\"><span><strong>+200.0%: worse</strong>"),
            "{html}"
        );
    }
}
