//! The run second by second: `timeline.svg` (client req/s, subgraph requests per second
//! and p99, one line per configuration) and the summary's "Per second" table (how
//! bursty the subgraphs' load was, the worst second, client-visible errors and what
//! the strategies decided).
//!
//! Totals hide what strategies change: a TTL that runs out on many keys at once sends
//! a wave of misses to the subgraphs every TTL, which a mean of requests per second
//! smooths away; an outage of a few seconds barely moves a 10-second error total.
//!
//! The legend on the right is as wide as the longest name; the subgraph and p99 panels
//! take a log scale (zero drawn apart, below a dashed break) when their values lie
//! decades apart — a cache's few subgraph requests against no cache's thousands, an
//! outage's timeouts against a cache's milliseconds — so that the quiet lines do not
//! lie on the floor.

use std::fmt::Write as _;

use super::scale::Scale;
use super::svg::{colour, dash_attribute, escape, text_width};
use crate::bench::timeline::Second;
use crate::matrix::summary::{Measurement, Spread, Summary};

const PLOT_WIDTH: f64 = 650.0;
const PANEL_HEIGHT: f64 = 200.0;
const MARGIN_LEFT: f64 = 80.0;
const MARGIN_TOP: f64 = 62.0;
const GAP: f64 = 50.0;
const LEGEND_FONT: f64 = 12.0;
const LEGEND_LINE: f64 = 18.0;

/// A panel of `timeline.svg`: its title, the figure it draws, and whether its scale may
/// be logarithmic.
type Panel = (&'static str, fn(&Second) -> Option<f64>, bool);

/// The median over rounds of `figure`, where rounds have it.
fn median(rounds: &[Measurement], figure: impl Fn(&Measurement) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = rounds.iter().filter_map(figure).collect();
    Spread::of(&values).map(|s| s.median)
}

/// Client requests that got no usable answer / client requests made.
pub fn error_rate(m: &Measurement) -> Option<f64> {
    let made = m.requests + m.errors.transport + m.errors.timeouts;
    (made > 0).then(|| m.errors.total() as f64 / made as f64)
}

/// The "Per second" section of `summary.md`; empty when no round kept a timeline.
pub fn markdown(summary: &Summary) -> String {
    if summary
        .configs
        .iter()
        .all(|c| c.rounds.iter().all(|r| r.timeline.is_empty()))
    {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Per second\n\n\
         | config | upstream req/s peak | mean | peak/mean | slowest second (client req/s) | worst second's p99 | client error rate | served stale | strategy decisions |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for c in &summary.configs {
        let rounds = &c.rounds;
        let peak = median(rounds, |m| m.upstream_per_second.map(|p| p.peak));
        let mean = median(rounds, |m| m.upstream_per_second.map(|p| p.mean));
        let ratio = median(rounds, |m| m.upstream_per_second.and_then(|p| p.ratio));
        let slowest = median(rounds, |m| {
            m.timeline
                .iter()
                .map(|s| s.requests as f64)
                .reduce(f64::min)
        });
        let worst_p99 = median(rounds, |m| {
            m.timeline.iter().map(|s| s.p99_ms).reduce(f64::max)
        });
        let errors = median(rounds, error_rate);
        let stale = median(rounds, |m| m.stale_served);
        let mut decisions: Vec<String> = Vec::new();
        let names: std::collections::BTreeSet<&String> = rounds
            .iter()
            .flat_map(|m| m.strategy_decisions.keys())
            .collect();
        for name in names {
            if let Some(v) = median(rounds, |m| m.strategy_decisions.get(name).copied()) {
                decisions.push(format!("{name} {v:.0}"));
            }
        }
        let num =
            |v: Option<f64>, digits: usize| v.map_or("–".into(), |x| format!("{x:.digits$}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.name,
            num(peak, 0),
            num(mean, 0),
            ratio.map_or("–".into(), |r| format!("{r:.2}x")),
            num(slowest, 0),
            worst_p99.map_or("–".into(), |p| format!("{p:.1} ms")),
            errors.map_or("–".into(), |e| format!("{:.2}%", e * 100.0)),
            num(stale, 0),
            if decisions.is_empty() {
                "–".into()
            } else {
                decisions.join(", ")
            }
        );
    }
    let _ = writeln!(
        out,
        "\nMedians over rounds. upstream req/s: requests the subgraphs counted in each whole second of the window \
         (read from their `/metrics` once a second); peak/mean 1.00x is a flat load, a stampede shows as a high peak. \
         slowest second: the fewest client responses in one second; worst second's p99: the largest per-second p99. \
         client error rate: requests without a usable answer (GraphQL errors included) / requests made. \
         served stale: Δ`gateway_cache_stale_total`. strategy decisions: Δ`gateway_cache_strategy_decisions_total` \
         by strategy/decision, all fields summed. The lines of round 1 are drawn in [timeline.svg](timeline.svg)."
    );
    out
}

/// `timeline.svg`: round 1 of every configuration, three panels sharing the time axis.
pub fn render(summary: &Summary) -> Option<String> {
    let lines: Vec<(&str, &[Second])> = summary
        .configs
        .iter()
        .filter_map(|c| {
            c.rounds
                .first()
                .filter(|r| !r.timeline.is_empty())
                .map(|r| (c.name.as_str(), r.timeline.as_slice()))
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let seconds = lines.iter().map(|(_, t)| t.len()).max().unwrap_or(1).max(2);
    let panels: [Panel; 3] = [
        ("client req/s", |s| Some(s.requests as f64), false),
        ("subgraph requests/s", |s| s.upstream_requests, true),
        ("p99 per second (ms)", |s| Some(s.p99_ms), true),
    ];
    let legend_width = lines
        .iter()
        .map(|(name, _)| text_width(name, LEGEND_FONT))
        .fold(60.0, f64::max)
        + 50.0;
    let width = MARGIN_LEFT + PLOT_WIDTH + legend_width;
    let panels_height = panels.len() as f64 * (PANEL_HEIGHT + GAP);
    let legend_height = LEGEND_LINE * lines.len() as f64 + 14.0;
    let height = MARGIN_TOP + panels_height.max(legend_height) + 10.0;
    let x = |i: f64| MARGIN_LEFT + PLOT_WIDTH * (i + 0.5) / seconds as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="22" font-size="15" font-weight="bold" text-anchor="middle">{} — run {}: round 1, second by second</text>"#,
        MARGIN_LEFT + PLOT_WIDTH / 2.0,
        escape(&summary.experiment),
        escape(&summary.run_id)
    );
    for (p, (title, value, may_be_log)) in panels.iter().enumerate() {
        let top = MARGIN_TOP + p as f64 * (PANEL_HEIGHT + GAP);
        let values = lines.iter().flat_map(|(_, t)| t.iter().filter_map(value));
        let scale = if *may_be_log {
            Scale::auto(values)
        } else {
            Scale::linear(values)
        };
        let y = |v: f64| top + PANEL_HEIGHT - scale.fraction(v) * PANEL_HEIGHT;
        let _ = writeln!(
            out,
            r#"<text x="{MARGIN_LEFT:.1}" y="{:.1}" font-size="13" font-weight="bold">{title}{}</text>"#,
            top - 8.0,
            if scale.is_log() { " — log scale" } else { "" }
        );
        let mut last_label = f64::INFINITY;
        for tick in scale.ticks() {
            let ty = y(tick.value);
            let _ = writeln!(
                out,
                r##"<line x1="{MARGIN_LEFT:.1}" x2="{:.1}" y1="{ty:.1}" y2="{ty:.1}" stroke="{}"/>"##,
                MARGIN_LEFT + PLOT_WIDTH,
                if tick.major { "#ddd" } else { "#f0f0f0" }
            );
            // Labels at least a line apart (ticks go upwards).
            if !tick.label.is_empty() && last_label - ty >= 12.0 {
                last_label = ty;
                let _ = writeln!(
                    out,
                    r#"<text class="tick" x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"#,
                    MARGIN_LEFT - 6.0,
                    ty + 4.0,
                    escape(&tick.label)
                );
            }
        }
        if let Some(at) = scale.break_at() {
            let by = top + PANEL_HEIGHT - at * PANEL_HEIGHT;
            let _ = writeln!(
                out,
                r##"<line x1="{MARGIN_LEFT:.1}" x2="{:.1}" y1="{by:.1}" y2="{by:.1}" stroke="#999" stroke-dasharray="3 3"/>"##,
                MARGIN_LEFT + PLOT_WIDTH
            );
        }
        for (k, (name, timeline)) in lines.iter().enumerate() {
            let points: Vec<String> = timeline
                .iter()
                .enumerate()
                .filter_map(|(i, s)| value(s).map(|v| format!("{:.1},{:.1}", x(i as f64), y(v))))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{} points="{}"/>"#,
                colour(k),
                dash_attribute(k),
                points.join(" ")
            );
            if p == 0 {
                let ly = MARGIN_TOP + 14.0 + k as f64 * LEGEND_LINE;
                let lx = MARGIN_LEFT + PLOT_WIDTH + 10.0;
                let _ = writeln!(
                    out,
                    r#"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{}" stroke-width="3"{}/><text class="label" x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
                    lx + 20.0,
                    colour(k),
                    dash_attribute(k),
                    lx + 26.0,
                    ly + 4.0,
                    escape(name)
                );
            }
        }
        let bottom = top + PANEL_HEIGHT;
        for i in (0..seconds).step_by(seconds.div_ceil(10).max(1)) {
            let _ = writeln!(
                out,
                r#"<text class="tick" x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{i}s</text>"#,
                x(i as f64),
                bottom + 14.0
            );
        }
    }
    out.push_str("</svg>\n");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::recorder::ErrorCounts;
    use crate::bench::timeline::PeakToMean;
    use crate::matrix::summary::fixtures;

    fn round(config: &str, upstream: &[f64]) -> Measurement {
        let timeline: Vec<Second> = upstream
            .iter()
            .enumerate()
            .map(|(i, u)| Second {
                second: i as u32,
                requests: 100,
                errors: 0,
                p99_ms: 5.0 + i as f64,
                upstream_requests: Some(*u),
            })
            .collect();
        let mut m = fixtures::measurement(1, config, 100.0, 3.0);
        m.requests = 990;
        m.errors = ErrorCounts {
            graphql: 10,
            timeouts: 10,
            ..ErrorCounts::default()
        };
        m.upstream_per_second = PeakToMean::of(upstream.iter().copied());
        m.strategy_decisions
            .insert("stale-if-error/served_stale".into(), 7.0);
        m.timeline = timeline;
        m
    }

    #[test]
    fn the_section_and_the_chart_show_every_configuration() {
        let mut summary: Summary = serde_json::from_value(serde_json::json!({
            "schema": "loadgen.summary/1", "run_id": "r1", "experiment": "stampede", "baseline": "ttl",
            "rounds": 1, "duration_s": 4.0, "warmup_s": 1.0, "quick": false, "warnings": [],
            "configs": []
        }))
        .unwrap();
        for (name, upstream) in [("ttl", [10.0, 90.0, 10.0, 10.0]), ("early", [30.0; 4])] {
            summary.configs.push(
                serde_json::from_value(serde_json::json!({
                    "name": name, "description": null, "gateway_args": [], "user_service_args": [],
                    "post_service_args": [], "load": {}, "rounds": [round(name, &upstream)],
                    "median": {"requests_per_sec": 1.0, "p50_ms": 1.0, "p99_ms": 1.0,
                        "upstream_per_request": null, "gateway_cpu_cores": null, "gateway_peak_rss_bytes": null,
                        "cache_hits": null, "cache_misses": null, "cache_dedupes": null, "loadgen_cpu_cores": 0.1},
                    "requests_per_sec": null, "p99_ms": null, "ratio": null, "p99_ratio": null,
                    "flamegraph": null, "flamegraph_note": null, "errors_total": 0
                }))
                .unwrap(),
            );
        }
        let text = markdown(&summary);
        assert!(
            text.contains("| ttl | 90 | 30 | 3.00x | 100 | 8.0 ms | 2.00% | – | stale-if-error/served_stale 7 |"),
            "{text}"
        );
        assert!(text.contains("| early | 30 | 30 | 1.00x |"), "{text}");
        let svg = render(&summary).unwrap();
        assert_eq!(
            svg.matches("<polyline").count(),
            6,
            "3 panels x 2 configurations"
        );
        assert!(svg.contains(">early</text>"));
    }
}
