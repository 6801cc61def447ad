//! The run's chart: req/s and p99 per configuration as bars (medians) with min–max
//! whiskers over rounds, side by side, written as plain SVG.

use std::fmt::Write as _;

use crate::matrix::summary::{Spread, Summary};

const PANEL_WIDTH: f64 = 460.0;
const PANEL_HEIGHT: f64 = 320.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_TOP: f64 = 50.0;
const MARGIN_BOTTOM: f64 = 60.0;
const GRID_LINES: usize = 4;
pub(super) const BAR_COLOURS: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1",
];

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round axis maximum: 1, 2 or 5 times a power of ten, above `value`.
pub(super) fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|c| *c >= value)
        .unwrap_or(10.0 * magnitude)
}

/// The frame of an x–y panel: title, grid lines with their tick labels on both axes,
/// border and axis titles; [`Frame::x`] and [`Frame::y`] place values inside it.
pub(super) struct Frame {
    /// Left edge of the plot area, and its top.
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    pub x_max: f64,
    pub y_max: f64,
}

impl Frame {
    pub fn x(&self, v: f64) -> f64 {
        self.left + v / self.x_max * self.width
    }

    /// Values above `y_max` are drawn at the top edge.
    pub fn y(&self, v: f64) -> f64 {
        self.top + self.height - v.min(self.y_max) / self.y_max * self.height
    }

    /// Draw the frame: `grid` lines per axis, `x_unit` after each x tick label, the
    /// y axis title centred at `y_title_x`.
    #[allow(clippy::too_many_arguments)]
    pub fn draw(
        &self,
        out: &mut String,
        title: &str,
        x_title: &str,
        y_title: &str,
        x_unit: &str,
        grid: usize,
        y_title_x: f64,
    ) {
        let (left, top, w, h) = (self.left, self.top, self.width, self.height);
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="28" font-size="14" font-weight="bold" text-anchor="middle">{}</text>"#,
            left + w / 2.0,
            escape(title)
        );
        for i in 0..=grid {
            let f = i as f64 / grid as f64;
            let (vx, vy) = (self.x_max * f, self.y_max * f);
            let _ = writeln!(
                out,
                r##"<line x1="{left:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
                left + w,
                self.y(vy),
                self.y(vy),
                left - 6.0,
                self.y(vy) + 4.0,
                tick_label(vy)
            );
            let _ = writeln!(
                out,
                r##"<line x1="{:.1}" x2="{:.1}" y1="{top:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}{x_unit}</text>"##,
                self.x(vx),
                self.x(vx),
                top + h,
                self.x(vx),
                top + h + 16.0,
                tick_label(vx)
            );
        }
        let _ = writeln!(
            out,
            r##"<rect x="{left:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="#444"/>"##
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            left + w / 2.0,
            top + h + 36.0,
            escape(x_title)
        );
        let ty = top + h / 2.0;
        let _ = writeln!(
            out,
            r#"<text x="{y_title_x:.1}" y="{ty:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 {y_title_x:.1} {ty:.1})">{}</text>"#,
            escape(y_title)
        );
    }
}

/// One panel of bars at horizontal offset `x0`.
fn panel(out: &mut String, x0: f64, title: &str, unit: &str, bars: &[(String, Option<Spread>)]) {
    let plot_w = PANEL_WIDTH - MARGIN_LEFT - 20.0;
    let plot_h = PANEL_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let top = bars
        .iter()
        .filter_map(|(_, s)| s.map(|s| s.max))
        .fold(0.0, f64::max);
    let axis_max = nice_ceiling(top * 1.05);
    let y = |v: f64| MARGIN_TOP + plot_h - (v / axis_max) * plot_h;
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="28" font-size="16" font-weight="bold" text-anchor="middle">{}</text>"#,
        x0 + MARGIN_LEFT + plot_w / 2.0,
        escape(title)
    );
    for i in 0..=GRID_LINES {
        let v = axis_max * i as f64 / GRID_LINES as f64;
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{} {}</text>"##,
            x0 + MARGIN_LEFT,
            x0 + MARGIN_LEFT + plot_w,
            y(v),
            y(v),
            x0 + MARGIN_LEFT - 6.0,
            y(v) + 4.0,
            tick_label(v),
            escape(unit)
        );
    }
    let slot = plot_w / bars.len().max(1) as f64;
    for (i, (name, spread)) in bars.iter().enumerate() {
        let cx = x0 + MARGIN_LEFT + slot * (i as f64 + 0.5);
        let bar_w = slot * 0.6;
        if let Some(s) = spread {
            let _ = writeln!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: median {} {}, min {}, max {}</title></rect>"#,
                cx - bar_w / 2.0,
                y(s.median),
                bar_w,
                (MARGIN_TOP + plot_h - y(s.median)).max(0.0),
                BAR_COLOURS[i % BAR_COLOURS.len()],
                escape(name),
                format_value(s.median),
                escape(unit),
                format_value(s.min),
                format_value(s.max)
            );
            if s.max > s.min {
                let _ = writeln!(
                    out,
                    r##"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#222"/><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#222"/>"##,
                    y(s.min),
                    y(s.max),
                    cx - 6.0,
                    cx + 6.0,
                    y(s.min),
                    y(s.min),
                    cx - 6.0,
                    cx + 6.0,
                    y(s.max),
                    y(s.max)
                );
            }
            let _ = writeln!(
                out,
                r#"<text x="{cx:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
                y(s.max) - 5.0,
                format_value(s.median)
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{cx:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            MARGIN_TOP + plot_h + 18.0,
            escape(name)
        );
    }
    let _ = writeln!(
        out,
        r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#444"/>"##,
        x0 + MARGIN_LEFT,
        x0 + MARGIN_LEFT + plot_w,
        MARGIN_TOP + plot_h,
        MARGIN_TOP + plot_h
    );
}

/// Axis ticks are round numbers: no decimals unless they matter.
pub(super) fn tick_label(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{}", (v * 100.0).round() / 100.0)
    }
}

pub(super) fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The chart of a run as an SVG document.
pub fn render(summary: &Summary) -> String {
    let rps: Vec<(String, Option<Spread>)> = summary
        .configs
        .iter()
        .map(|c| (c.name.clone(), c.requests_per_sec))
        .collect();
    let p99: Vec<(String, Option<Spread>)> = summary
        .configs
        .iter()
        .map(|c| (c.name.clone(), c.p99_ms))
        .collect();
    let width = PANEL_WIDTH * 2.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{:.0}" viewBox="0 0 {width:.0} {:.0}" font-family="sans-serif">"#,
        PANEL_HEIGHT + 20.0,
        PANEL_HEIGHT + 20.0
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    panel(
        &mut out,
        0.0,
        "Throughput (req/s, higher is better)",
        "",
        &rps,
    );
    panel(
        &mut out,
        PANEL_WIDTH,
        "p99 latency (ms, lower is better)",
        "ms",
        &p99,
    );
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{} — run {}: bars are medians of {} round(s), whiskers min–max</text>"##,
        width / 2.0,
        PANEL_HEIGHT + 12.0,
        escape(&summary.experiment),
        escape(&summary.run_id),
        summary.rounds
    );
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ceilings_are_round() {
        assert_eq!(nice_ceiling(4623.0), 5000.0);
        assert_eq!(nice_ceiling(1013.0), 2000.0);
        assert_eq!(nice_ceiling(46.5), 50.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(10.0), 10.0);
    }

    #[test]
    fn svg_has_a_bar_per_config_in_each_panel() {
        let spread = |m: f64| {
            Some(Spread {
                median: m,
                min: m * 0.9,
                max: m * 1.1,
            })
        };
        let summary: Summary = serde_json::from_value(serde_json::json!({
            "schema": "loadgen.summary/1", "run_id": "x", "experiment": "seed & co", "baseline": "a",
            "rounds": 3, "duration_s": 10.0, "warmup_s": 2.0, "quick": false, "warnings": [],
            "configs": [
                {"name": "a", "description": null, "gateway_args": [], "user_service_args": [], "post_service_args": [],
                 "load": {}, "rounds": [], "median": {"requests_per_sec": 1000.0, "p50_ms": 1.0, "p99_ms": 250.0,
                 "upstream_per_request": null, "gateway_cpu_cores": null, "gateway_peak_rss_bytes": null,
                 "cache_hits": null, "cache_misses": null, "cache_dedupes": null, "loadgen_cpu_cores": 0.1},
                 "requests_per_sec": spread(1000.0), "p99_ms": spread(250.0), "ratio": null, "p99_ratio": null,
                 "flamegraph": null, "flamegraph_note": null, "errors_total": 0},
                {"name": "b<", "description": null, "gateway_args": [], "user_service_args": [], "post_service_args": [],
                 "load": {}, "rounds": [], "median": {"requests_per_sec": 4000.0, "p50_ms": 1.0, "p99_ms": 40.0,
                 "upstream_per_request": null, "gateway_cpu_cores": null, "gateway_peak_rss_bytes": null,
                 "cache_hits": null, "cache_misses": null, "cache_dedupes": null, "loadgen_cpu_cores": 0.1},
                 "requests_per_sec": spread(4000.0), "p99_ms": spread(40.0), "ratio": null, "p99_ratio": null,
                 "flamegraph": null, "flamegraph_note": null, "errors_total": 0}
            ]
        }))
        .unwrap();
        let svg = render(&summary);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect x=").count(), 4, "{svg}");
        assert!(svg.contains("b&lt;") && svg.contains("seed &amp; co"));
        assert!(!svg.contains("b<"));
    }
}
