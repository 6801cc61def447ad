//! `tradeoff.svg`: throughput against the stale-read fraction, one point per
//! configuration (medians over rounds, whiskers min–max of req/s), for experiments whose
//! workload checks freshness. Up and to the left is better: more requests served, fewer
//! of them stale.

use std::fmt::Write as _;

use super::chart::{escape, format_value, nice_ceiling, tick_label, BAR_COLOURS};
use crate::matrix::summary::Summary;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;
const GRID_LINES: usize = 5;

/// The chart, or `None` when no configuration has freshness figures.
pub fn render(summary: &Summary) -> Option<String> {
    let points: Vec<(&str, f64, f64, f64, f64)> = summary
        .configs
        .iter()
        .filter_map(|c| {
            let stale = c.median.stale_fraction?;
            let rps = c.requests_per_sec?;
            Some((c.name.as_str(), stale * 100.0, rps.median, rps.min, rps.max))
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let x_max = nice_ceiling(points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1).max(0.1);
    let y_max = nice_ceiling(points.iter().map(|p| p.4).fold(0.0, f64::max) * 1.05);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0}" height="{HEIGHT:.0}" viewBox="0 0 {WIDTH:.0} {HEIGHT:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="28" font-size="16" font-weight="bold" text-anchor="middle">Throughput against stale reads (up and left is better)</text>"#,
        LEFT + plot_w / 2.0
    );
    for i in 0..=GRID_LINES {
        let f = i as f64 / GRID_LINES as f64;
        let (vx, vy) = (x_max * f, y_max * f);
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            LEFT,
            LEFT + plot_w,
            y(vy),
            y(vy),
            LEFT - 6.0,
            y(vy) + 4.0,
            tick_label(vy)
        );
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}%</text>"##,
            x(vx),
            x(vx),
            TOP,
            TOP + plot_h,
            x(vx),
            TOP + plot_h + 16.0,
            tick_label(vx)
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT:.1}" y="{TOP:.1}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="#444"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">stale reads (% of entity reads checked)</text>"#,
        LEFT + plot_w / 2.0,
        TOP + plot_h + 36.0
    );
    let _ = writeln!(
        out,
        r#"<text x="18" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 18 {:.1})">requests per second</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    for (i, (name, stale, median, min, max)) in points.iter().enumerate() {
        let colour = BAR_COLOURS[i % BAR_COLOURS.len()];
        let (cx, cy) = (x(*stale), y(*median));
        if max > min {
            let _ = writeln!(
                out,
                r#"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="{colour}"/>"#,
                y(*min),
                y(*max)
            );
        }
        let _ = writeln!(
            out,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{colour}"><title>{}: {} req/s (min {}, max {}), {:.3}% stale</title></circle>"#,
            escape(name),
            format_value(*median),
            format_value(*min),
            format_value(*max),
            stale
        );
        // Labels alternate sides so that neighbours at 0% stale stay readable.
        let (dx, anchor) = if i % 2 == 0 {
            (8.0, "start")
        } else {
            (-8.0, "end")
        };
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="{anchor}" fill="{colour}">{}</text>"#,
            cx + dx,
            cy - 6.0,
            escape(name)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{} — run {}: medians of {} round(s), whiskers min–max of req/s</text>"##,
        WIDTH / 2.0,
        HEIGHT - 10.0,
        escape(&summary.experiment),
        escape(&summary.run_id),
        summary.rounds
    );
    out.push_str("</svg>\n");
    Some(out)
}
