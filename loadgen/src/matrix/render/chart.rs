//! The run's chart (`chart.svg`): req/s and p99 per configuration as horizontal bars
//! (medians) with min–max whiskers over rounds, the two panels side by side and one row
//! per configuration, so that names and values each have a line of their own and never
//! run into one another however many configurations there are. The req/s value carries
//! the ratio to the baseline taken within rounds.

use std::fmt::Write as _;

use super::labels::Rect;
use super::scale::Scale;
use super::svg::{colour, escape, format_value, text_width};
use crate::matrix::summary::{Spread, Summary};

const ROW: f64 = 24.0;
const BAR_HEIGHT: f64 = 14.0;
const TOP: f64 = 64.0;
const PLOT_WIDTH: f64 = 330.0;
const PANEL_GAP: f64 = 28.0;
const NAME_FONT: f64 = 12.0;
const VALUE_FONT: f64 = 11.0;

/// One panel: its title, unit, and per configuration the spread and its value label.
struct Panel {
    title: &'static str,
    bars: Vec<(Option<Spread>, String)>,
}

/// The chart of a run as an SVG document.
pub fn render(summary: &Summary) -> String {
    draw(summary).0
}

/// The chart and the boxes of its texts (names, values, titles), for layout tests.
fn draw(summary: &Summary) -> (String, Vec<Rect>) {
    let rps = Panel {
        title: "Throughput (req/s, higher is better)",
        bars: summary
            .configs
            .iter()
            .map(|c| {
                let value = c.requests_per_sec.map_or("no figure".into(), |s| {
                    match c.ratio.filter(|_| c.name != summary.baseline) {
                        Some(r) => format!("{} · {:.2}x", format_value(s.median), r.median),
                        None => format_value(s.median),
                    }
                });
                (c.requests_per_sec, value)
            })
            .collect(),
    };
    let p99 = Panel {
        title: "p99 latency (ms, lower is better)",
        bars: summary
            .configs
            .iter()
            .map(|c| {
                let value = c.p99_ms.map_or("no figure".into(), |s| {
                    format!("{} ms", format_value(s.median))
                });
                (c.p99_ms, value)
            })
            .collect(),
    };
    let panels = [rps, p99];
    let names: Vec<&str> = summary.configs.iter().map(|c| c.name.as_str()).collect();
    let name_column = names
        .iter()
        .map(|n| text_width(n, NAME_FONT))
        .fold(50.0, f64::max)
        + 22.0;
    let value_column = panels
        .iter()
        .flat_map(|p| p.bars.iter().map(|(_, v)| text_width(v, VALUE_FONT)))
        .fold(0.0, f64::max)
        + 14.0;
    let panel_width = PLOT_WIDTH + value_column;
    let plot_height = ROW * names.len().max(1) as f64;
    let width = name_column + 2.0 * panel_width + PANEL_GAP + 10.0;
    let height = TOP + plot_height + 56.0;
    let mut boxes = Vec::new();
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let title = format!(
        "{} — run {}: bars are medians of {} round(s), whiskers min–max; · 1.20x: req/s over {}'s in the same round",
        summary.experiment, summary.run_id, summary.rounds, summary.baseline
    );
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="22" font-size="13" text-anchor="middle" fill="#333">{}</text>"##,
        width / 2.0,
        escape(&title)
    );
    for (i, name) in names.iter().enumerate() {
        let centre = TOP + ROW * (i as f64 + 0.5);
        if i % 2 == 1 {
            let _ = writeln!(
                out,
                r##"<rect x="0" y="{:.1}" width="{width:.0}" height="{ROW:.0}" fill="#f6f6f6"/>"##,
                centre - ROW / 2.0
            );
        }
        let w = text_width(name, NAME_FONT);
        boxes.push(Rect {
            x: name_column - 10.0 - w,
            y: centre - NAME_FONT / 2.0,
            w,
            h: NAME_FONT,
        });
        let _ = writeln!(
            out,
            r#"<text class="label" x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
            name_column - 10.0,
            centre + 4.0,
            escape(name)
        );
    }
    for (p, panel) in panels.iter().enumerate() {
        let x0 = name_column + p as f64 * (panel_width + PANEL_GAP);
        draw_panel(&mut out, &mut boxes, panel, x0, plot_height);
    }
    (out + "</svg>\n", boxes)
}

fn draw_panel(out: &mut String, boxes: &mut Vec<Rect>, panel: &Panel, x0: f64, plot_height: f64) {
    let scale = Scale::linear(panel.bars.iter().filter_map(|(s, _)| s.map(|s| s.max)));
    let x = |v: f64| x0 + scale.fraction(v) * PLOT_WIDTH;
    let bottom = TOP + plot_height;
    let title_width = text_width(panel.title, 13.0);
    boxes.push(Rect {
        x: x0 + PLOT_WIDTH / 2.0 - title_width / 2.0,
        y: TOP - 24.0,
        w: title_width,
        h: 13.0,
    });
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="13" font-weight="bold" text-anchor="middle">{}</text>"#,
        x0 + PLOT_WIDTH / 2.0,
        TOP - 13.0,
        escape(panel.title)
    );
    for tick in scale.ticks() {
        let tx = x(tick.value);
        let _ = writeln!(
            out,
            r##"<line x1="{tx:.1}" x2="{tx:.1}" y1="{TOP:.1}" y2="{bottom:.1}" stroke="#ddd"/><text class="tick" x="{tx:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
            bottom + 15.0,
            escape(&tick.label)
        );
    }
    for (i, (spread, value)) in panel.bars.iter().enumerate() {
        let centre = TOP + ROW * (i as f64 + 0.5);
        let mut end = x0;
        if let Some(s) = spread {
            let _ = writeln!(
                out,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{BAR_HEIGHT:.1}" fill="{}"><title>median {}, min {}, max {}</title></rect>"#,
                centre - BAR_HEIGHT / 2.0,
                (x(s.median) - x0).max(0.5),
                colour(i),
                format_value(s.median),
                format_value(s.min),
                format_value(s.max)
            );
            end = x(s.median);
            if s.max > s.min {
                let (a, b) = (x(s.min), x(s.max));
                let _ = writeln!(
                    out,
                    r##"<path d="M{a:.1},{:.1} v8 M{a:.1},{centre:.1} H{b:.1} M{b:.1},{:.1} v8" stroke="#222" fill="none"/>"##,
                    centre - 4.0,
                    centre - 4.0
                );
                end = end.max(b);
            }
        }
        let w = text_width(value, VALUE_FONT);
        boxes.push(Rect {
            x: end + 6.0,
            y: centre - VALUE_FONT / 2.0,
            w,
            h: VALUE_FONT,
        });
        let _ = writeln!(
            out,
            r#"<text class="label" x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            end + 6.0,
            centre + 4.0,
            escape(value)
        );
    }
    let _ = writeln!(
        out,
        r##"<line x1="{x0:.1}" x2="{x0:.1}" y1="{TOP:.1}" y2="{bottom:.1}" stroke="#444"/>"##
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::render::labels::any_overlap;

    fn summary(names: &[&str]) -> Summary {
        let configs: Vec<serde_json::Value> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let m = 1000.0 * (i as f64 + 1.0);
                let spread = serde_json::json!({"median": m, "min": m * 0.9, "max": m * 1.1});
                serde_json::json!({
                    "name": name, "description": null, "gateway_args": [], "user_service_args": [],
                    "post_service_args": [], "load": {}, "rounds": [],
                    "median": {"requests_per_sec": m, "p50_ms": 1.0, "p99_ms": 250.0 / m,
                        "upstream_per_request": null, "gateway_cpu_cores": null, "gateway_peak_rss_bytes": null,
                        "cache_hits": null, "cache_misses": null, "cache_dedupes": null, "loadgen_cpu_cores": 0.1},
                    "requests_per_sec": spread, "p99_ms": spread, "ratio": {"median": i as f64 + 1.0, "min": 1.0, "max": 1.0},
                    "p99_ratio": null, "flamegraph": null, "flamegraph_note": null, "errors_total": 0
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema": "loadgen.summary/1", "run_id": "x", "experiment": "seed & co", "baseline": names[0],
            "rounds": 3, "duration_s": 10.0, "warmup_s": 2.0, "quick": false, "warnings": [],
            "configs": configs
        }))
        .unwrap()
    }

    #[test]
    fn svg_has_a_bar_per_config_in_each_panel_and_escapes_names() {
        let svg = render(&summary(&["a", "b<"]));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect x=").count() - 1, 4, "{svg}");
        assert!(svg.contains("b&lt;") && svg.contains("seed &amp; co"));
        assert!(!svg.contains("b<"));
        // The ratio to the baseline beside the req/s of the others.
        assert!(svg.contains(">2000 · 2.00x<"), "{svg}");
        assert!(!svg.contains(">1000 · 1.00x<"), "{svg}");
    }

    #[test]
    fn no_two_texts_overlap_with_many_long_names() {
        let names: Vec<String> = (0..14)
            .map(|i| format!("ttl-{i}-layered-2gw-no-inval-{}", "x".repeat(i)))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (_, boxes) = draw(&summary(&names));
        assert_eq!(boxes.len(), 14 * 3 + 2);
        assert_eq!(any_overlap(&boxes), None);
    }
}
