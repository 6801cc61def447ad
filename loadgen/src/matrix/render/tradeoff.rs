//! `tradeoff.svg`: throughput against the stale-read fraction, one point per
//! configuration (medians over rounds, whiskers min–max of req/s), for experiments whose
//! workload checks freshness. Up and to the left is better: more requests served, fewer
//! of them stale.

use std::fmt::Write as _;

use super::chart::{escape, format_value, nice_ceiling, tick_label, BAR_COLOURS};
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
    let plot_h = HEIGHT - TOP - BOTTOM;
    let left = x0 + LEFT;
    let x = |v: f64| left + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="28" font-size="14" font-weight="bold" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        escape(title)
    );
    for i in 0..=GRID_LINES {
        let f = i as f64 / GRID_LINES as f64;
        let (vx, vy) = (x_max * f, y_max * f);
        let _ = writeln!(
            out,
            r##"<line x1="{left:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            left + plot_w,
            y(vy),
            y(vy),
            left - 6.0,
            y(vy) + 4.0,
            tick_label(vy)
        );
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{TOP:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}%</text>"##,
            x(vx),
            x(vx),
            TOP + plot_h,
            x(vx),
            TOP + plot_h + 16.0,
            tick_label(vx)
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{left:.1}" y="{TOP:.1}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="#444"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">stale reads (% of entity reads checked)</text>"#,
        left + plot_w / 2.0,
        TOP + plot_h + 36.0
    );
    let ty = TOP + plot_h / 2.0;
    let tx = x0 + 18.0;
    let _ = writeln!(
        out,
        r#"<text x="{tx:.1}" y="{ty:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 {tx:.1} {ty:.1})">{}</text>"#,
        escape(y_title)
    );
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
