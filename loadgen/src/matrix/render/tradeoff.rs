//! `tradeoff.svg`: throughput against the stale-read fraction, one point per
//! configuration (medians over rounds, whiskers min–max of req/s), for experiments whose
//! workload checks freshness. Up and to the left is better: more requests served, fewer
//! of them stale.

use std::fmt::Write as _;

use super::chart::{escape, format_value, nice_ceiling, Frame, BAR_COLOURS};
use crate::matrix::summary::Summary;

const PANEL_WIDTH: f64 = 560.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;
const GRID_LINES: usize = 5;
const LABEL_HEIGHT: f64 = 13.0;

/// One configuration's point: name, stale %, and the figure with its min–max.
struct Point<'a> {
    name: &'a str,
    stale: f64,
    value: f64,
    min: f64,
    max: f64,
}

/// The chart, or `None` when no configuration has freshness figures: throughput against
/// stale reads, and beside it the gateway's CPU per request against stale reads (steadier
/// than req/s on a shared machine).
pub fn render(summary: &Summary) -> Option<String> {
    let throughput: Vec<Point> = summary
        .configs
        .iter()
        .filter_map(|c| {
            let rps = c.requests_per_sec?;
            Some(Point {
                name: &c.name,
                stale: c.median.stale_fraction? * 100.0,
                value: rps.median,
                min: rps.min,
                max: rps.max,
            })
        })
        .collect();
    if throughput.is_empty() {
        return None;
    }
    let cpu: Vec<Point> = summary
        .configs
        .iter()
        .filter_map(|c| {
            let us = *c.median.cpu_us_per_request.get("gateway")?;
            Some(Point {
                name: &c.name,
                stale: c.median.stale_fraction? * 100.0,
                value: us,
                min: us,
                max: us,
            })
        })
        .collect();
    let x_max = nice_ceiling(throughput.iter().map(|p| p.stale).fold(0.0, f64::max) * 1.1).max(0.1);
    let panels = if cpu.is_empty() { 1.0 } else { 2.0 };
    let width = PANEL_WIDTH * panels;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{HEIGHT:.0}" viewBox="0 0 {width:.0} {HEIGHT:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    panel(
        &mut out,
        0.0,
        "Throughput against stale reads (up and left is better)",
        "requests per second",
        x_max,
        &throughput,
    );
    if !cpu.is_empty() {
        panel(
            &mut out,
            PANEL_WIDTH,
            "Gateway CPU per request (down and left is better)",
            "gateway CPU µs per request",
            x_max,
            &cpu,
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{} — run {}: medians of {} round(s); req/s whiskers min–max</text>"##,
        width / 2.0,
        HEIGHT - 10.0,
        escape(&summary.experiment),
        escape(&summary.run_id),
        summary.rounds
    );
    out.push_str("</svg>\n");
    Some(out)
}

/// One scatter panel at horizontal offset `x0`, the x axis in % stale reads.
fn panel(out: &mut String, x0: f64, title: &str, y_title: &str, x_max: f64, points: &[Point]) {
    let y_max = nice_ceiling(points.iter().map(|p| p.max).fold(0.0, f64::max) * 1.05);
    let plot_w = PANEL_WIDTH - LEFT - RIGHT;
    let left = x0 + LEFT;
    let frame = Frame {
        left,
        top: TOP,
        width: plot_w,
        height: HEIGHT - TOP - BOTTOM,
        x_max,
        y_max,
    };
    frame.draw(
        out,
        title,
        "stale reads (% of entity reads checked)",
        y_title,
        "%",
        GRID_LINES,
        x0 + 18.0,
    );
    let (x, y) = (|v| frame.x(v), |v| frame.y(v));
    // Labels go right of their point (left of it near the right edge), and move down
    // until they overlap no label already placed.
    let mut placed: Vec<(f64, f64, f64)> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let colour = BAR_COLOURS[i % BAR_COLOURS.len()];
        let (cx, cy) = (x(p.stale), y(p.value));
        if p.max > p.min {
            let _ = writeln!(
                out,
                r#"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="{colour}"/>"#,
                y(p.min),
                y(p.max)
            );
        }
        let _ = writeln!(
            out,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{colour}"><title>{}: {} (min {}, max {}), {:.3}% stale</title></circle>"#,
            escape(p.name),
            format_value(p.value),
            format_value(p.min),
            format_value(p.max),
            p.stale
        );
        let label_w = 6.5 * p.name.chars().count() as f64;
        let (lx, anchor) = if cx + 8.0 + label_w > left + plot_w {
            (cx - 8.0 - label_w, "start")
        } else {
            (cx + 8.0, "start")
        };
        let mut ly = cy - 4.0;
        while placed.iter().any(|(px, py, pw)| {
            (ly - py).abs() < LABEL_HEIGHT && lx < px + pw && *px < lx + label_w
        }) {
            ly += LABEL_HEIGHT;
        }
        placed.push((lx, ly, label_w));
        let _ = writeln!(
            out,
            r#"<text x="{lx:.1}" y="{ly:.1}" font-size="11" text-anchor="{anchor}" fill="{colour}">{}</text>"#,
            escape(p.name)
        );
    }
}
