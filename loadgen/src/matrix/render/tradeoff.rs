//! `tradeoff.svg`: throughput against the stale-read fraction, one point per
//! configuration (medians over rounds, whiskers min–max of req/s), for experiments whose
//! workload checks freshness; beside it the gateway's CPU per request against the same
//! fraction. Up (down for CPU) and to the left is better.
//!
//! The stale axis is logarithmic with 0% drawn apart: most configurations read nothing
//! stale, and those that do range from a few hundredths of a percent to tens of percent,
//! which a linear 0–100% axis would squeeze into a few pixels. Labels are placed by
//! [`super::labels`]: configurations on one spot get a stack of labels with leader
//! lines, never labels on top of one another.

use std::fmt::Write as _;

use super::frame::{Frame, Titles};
use super::labels::{self, Label, Rect};
use super::scale::Scale;
use super::svg::{colour, escape, format_value, text_width};
use crate::matrix::summary::Summary;

const PANEL_WIDTH: f64 = 600.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 80.0;
const LABEL_FONT: f64 = 11.0;

/// One configuration's point: name, stale %, and the figure with its min–max.
struct Point<'a> {
    name: &'a str,
    /// Its index among the configurations: its colour.
    index: usize,
    stale: f64,
    value: f64,
    min: f64,
    max: f64,
}

/// The chart, or `None` when no configuration has freshness figures: throughput against
/// stale reads, and beside it the gateway's CPU per request against stale reads (steadier
/// than req/s on a shared machine).
pub fn render(summary: &Summary) -> Option<String> {
    draw(summary).map(|(svg, _)| svg)
}

/// The chart and the boxes of its point labels, for layout tests.
fn draw(summary: &Summary) -> Option<(String, Vec<Rect>)> {
    let throughput: Vec<Point> = summary
        .configs
        .iter()
        .enumerate()
        .filter_map(|(index, c)| {
            let rps = c.requests_per_sec?;
            Some(Point {
                name: &c.name,
                index,
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
        .enumerate()
        .filter_map(|(index, c)| {
            let us = *c.median.cpu_us_per_request.get("gateway")?;
            Some(Point {
                name: &c.name,
                index,
                stale: c.median.stale_fraction? * 100.0,
                value: us,
                min: us,
                max: us,
            })
        })
        .collect();
    let x = Scale::log(throughput.iter().map(|p| p.stale));
    let panels = if cpu.is_empty() { 1.0 } else { 2.0 };
    let width = PANEL_WIDTH * panels;
    let mut out = String::new();
    let mut boxes = Vec::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{HEIGHT:.0}" viewBox="0 0 {width:.0} {HEIGHT:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    panel(
        &mut out,
        &mut boxes,
        0.0,
        "Throughput against stale reads (up and left is better)",
        "requests per second",
        &x,
        &throughput,
    );
    if !cpu.is_empty() {
        panel(
            &mut out,
            &mut boxes,
            PANEL_WIDTH,
            "Gateway CPU per request (down and left is better)",
            "gateway CPU µs per request",
            &x,
            &cpu,
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{} — run {}: medians of {} round(s); req/s whiskers min–max; 0% stale is drawn apart, left of the break</text>"##,
        width / 2.0,
        HEIGHT - 10.0,
        escape(&summary.experiment),
        escape(&summary.run_id),
        summary.rounds
    );
    out.push_str("</svg>\n");
    Some((out, boxes))
}

/// One scatter panel at horizontal offset `x0`, the x axis in % stale reads.
fn panel(
    out: &mut String,
    boxes: &mut Vec<Rect>,
    x0: f64,
    title: &str,
    y_title: &str,
    x: &Scale,
    points: &[Point],
) {
    let frame = Frame {
        left: x0 + LEFT,
        top: TOP,
        width: PANEL_WIDTH - LEFT - RIGHT,
        height: HEIGHT - TOP - BOTTOM,
        x: x.clone(),
        y: Scale::linear(points.iter().map(|p| p.max)),
    };
    frame.draw(
        out,
        &Titles {
            title,
            x: "stale reads (% of entity reads checked)",
            y: y_title,
            x_unit: "%",
            y_title_x: x0 + 18.0,
        },
    );
    let centres: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (frame.x(p.stale), frame.y(p.value)))
        .collect();
    let markers: Vec<Rect> = centres
        .iter()
        .map(|(cx, cy)| Rect {
            x: cx - 6.0,
            y: cy - 6.0,
            w: 12.0,
            h: 12.0,
        })
        .collect();
    let wanted: Vec<Label> = points
        .iter()
        .zip(&centres)
        .map(|(p, (cx, cy))| Label {
            x: *cx,
            y: *cy,
            width: text_width(p.name, LABEL_FONT),
            height: LABEL_FONT + 2.0,
        })
        .collect();
    let placed = labels::place(
        &wanted,
        frame.area(),
        &markers,
        frame.left + frame.width + 4.0,
    );
    for (p, (cx, _)) in points.iter().zip(&centres) {
        if p.max > p.min {
            let _ = writeln!(
                out,
                r#"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="{}"/>"#,
                frame.y(p.min),
                frame.y(p.max),
                colour(p.index)
            );
        }
    }
    for ((p, (cx, cy)), spot) in points.iter().zip(&centres).zip(&placed) {
        let c = colour(p.index);
        if spot.leader {
            let (lx, ly) = spot.rect.nearest_point(*cx, *cy);
            let _ = writeln!(
                out,
                r#"<line x1="{cx:.1}" y1="{cy:.1}" x2="{lx:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="0.8" opacity="0.7"/>"#
            );
        }
        let _ = writeln!(
            out,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{c}" fill-opacity="0.85" stroke="white"><title>{}: {} (min {}, max {}), {:.3}% stale</title></circle>"#,
            escape(p.name),
            format_value(p.value),
            format_value(p.min),
            format_value(p.max),
            p.stale
        );
        let _ = writeln!(
            out,
            r#"<text class="label" x="{:.1}" y="{:.1}" font-size="11" fill="{c}">{}</text>"#,
            spot.rect.x,
            spot.rect.y + spot.rect.h - 3.0,
            escape(p.name)
        );
        boxes.push(spot.rect);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::render::labels::any_overlap;
    use crate::matrix::summary::fixtures::{self, measurement};

    /// The configurations of run 20261201-010445: five at 0% stale with req/s close
    /// together, three between 2% and 46%.
    fn tradeoff_run() -> Summary {
        let points = [
            ("no-cache", 18226.8, 0.0),
            ("ttl-0", 17996.5, 0.0),
            ("ttl-1", 22246.4, 0.0),
            ("ttl-10", 21247.7, 0.0),
            ("ttl-60", 21328.3, 0.0),
            ("ttl-10-no-inval", 23124.6, 0.4377),
            ("ttl-60-no-inval", 20602.4, 0.4547),
            ("ttl-10-layered-2gw", 17811.4, 0.0257),
            ("ttl-1-no-inval", 22246.4, 0.001),
        ];
        let ms = points
            .iter()
            .map(|(name, rps, _)| measurement(1, name, *rps, 10.0))
            .collect();
        let mut s = fixtures::summary("ttl-tradeoff", "no-cache", ms);
        for (c, (_, _, stale)) in s.configs.iter_mut().zip(&points) {
            c.median.stale_fraction = Some(*stale);
            c.median.cpu_us_per_request.insert("gateway".into(), 50.0);
        }
        s
    }

    #[test]
    fn configurations_on_one_spot_get_labels_that_do_not_overlap() {
        let (svg, boxes) = draw(&tradeoff_run()).unwrap();
        assert_eq!(boxes.len(), 2 * 9, "a label per point in each panel");
        assert_eq!(any_overlap(&boxes), None, "{boxes:?}");
        assert_eq!(svg.matches("class=\"label\"").count(), 18);
        // The log axis names zero and the decades, and says it is a log scale.
        for tick in [">0%<", ">0.1%<", ">1%<", ">10%<", ">100%<", "log scale"] {
            assert!(svg.contains(tick), "{tick}: {svg}");
        }
        // Stacked labels are joined to their points.
        assert!(svg.contains("opacity=\"0.7\""), "leader lines");
    }

    #[test]
    fn a_tenth_of_a_percent_and_one_percent_are_far_apart() {
        let x = Scale::log([0.0, 0.1, 1.0, 45.0]);
        let width = PANEL_WIDTH - LEFT - RIGHT;
        let gap = (x.fraction(1.0) - x.fraction(0.1)) * width;
        assert!(gap > 100.0, "{gap} px");
        assert!((x.fraction(0.1) - x.fraction(0.0)) * width > 40.0);
    }
}
