//! The overload curve (`overload.svg` and a table in `summary.md`), for experiments whose
//! configurations offer load in open loop (`load = { rate = R }`): goodput (answers
//! without errors, per second) and the p99 of those admitted-and-served answers against
//! the offered rate, one line per gateway setting (configurations with the same gateway
//! arguments). Medians over rounds.
//!
//! A gateway that sheds well keeps goodput flat at its capacity past it, with a bounded
//! p99; one that queues without bound keeps goodput but its p99 climbs with the backlog.
//! Such p99s lie decades apart, so the p99 panel takes a log scale when they do (a
//! bounded 12 ms must not sit on the floor under an unbounded 3 s); the legend below the
//! panels has a line per curve and the chart grows to hold them.

use std::fmt::Write as _;

use super::frame::{Frame, Titles};
use super::scale::Scale;
use super::svg::{colour, dash_attribute, escape, format_value};
use crate::matrix::summary::{ConfigSummary, Summary};

const PANEL_WIDTH: f64 = 520.0;
const PLOT_HEIGHT: f64 = 300.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
/// Below the plots: tick labels and the axis title, then the legend.
const LEGEND_FROM: f64 = TOP + PLOT_HEIGHT + 56.0;
const LEGEND_LINE: f64 = 15.0;

/// One configuration's point on the curve (medians over its rounds).
struct Point<'a> {
    config: &'a ConfigSummary,
    offered: f64,
    sent: f64,
    goodput: f64,
    ok_p99_ms: f64,
    p99_ms: f64,
    shed_share: f64,
    rate_held: bool,
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

fn point(c: &ConfigSummary) -> Option<Point<'_>> {
    let open: Vec<_> = c
        .rounds
        .iter()
        .filter_map(|r| r.open_loop.as_ref())
        .collect();
    if open.is_empty() {
        return None;
    }
    let of = |f: &dyn Fn(&crate::matrix::summary::Measurement) -> Option<f64>| {
        median(c.rounds.iter().filter_map(f).collect())
    };
    Some(Point {
        config: c,
        offered: median(open.iter().map(|o| o.target_rate).collect())?,
        sent: median(open.iter().map(|o| o.sent_rate).collect())?,
        goodput: of(&|r| r.goodput_per_sec)?,
        ok_p99_ms: of(&|r| r.ok_p99_ms).unwrap_or(f64::NAN),
        p99_ms: of(&|r| Some(r.p99_ms))?,
        shed_share: of(&|r| Some(r.errors.shed as f64 / r.requests.max(1) as f64))?,
        rate_held: open.iter().all(|o| o.rate_held),
    })
}

/// The curves: per gateway setting, its points by offered rate.
fn curves(summary: &Summary) -> Vec<(String, Vec<Point<'_>>)> {
    let mut curves: Vec<(String, Vec<Point>)> = Vec::new();
    for p in summary.configs.iter().filter_map(point) {
        let label = if p.config.gateway_args.is_empty() {
            "gateway defaults".to_string()
        } else {
            p.config.gateway_args.join(" ")
        };
        match curves.iter_mut().find(|(l, _)| *l == label) {
            Some((_, points)) => points.push(p),
            None => curves.push((label, vec![p])),
        }
    }
    for (_, points) in &mut curves {
        points.sort_by(|a, b| a.offered.total_cmp(&b.offered));
    }
    curves.retain(|(_, points)| points.len() >= 2);
    curves
}

/// The chart, or `None` when fewer than two configurations ran in open loop with the
/// same gateway arguments.
pub fn render(summary: &Summary) -> Option<String> {
    let curves = curves(summary);
    if curves.is_empty() {
        return None;
    }
    let all = || curves.iter().flat_map(|(_, p)| p.iter());
    let x = Scale::linear(all().map(|p| p.offered));
    let width = 2.0 * PANEL_WIDTH;
    let height = LEGEND_FROM + LEGEND_LINE * curves.len() as f64 + 24.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    panel(
        &mut out,
        0.0,
        (
            "Goodput against offered load",
            "answers without errors per second",
        ),
        x.clone(),
        Scale::linear(all().map(|p| p.goodput.max(p.sent))),
        &curves,
        |p| Some(p.goodput),
        true,
    );
    panel(
        &mut out,
        PANEL_WIDTH,
        (
            "p99 of the admitted requests",
            "p99 of answers without errors (ms)",
        ),
        x,
        Scale::auto(all().map(|p| p.ok_p99_ms)),
        &curves,
        |p| p.ok_p99_ms.is_finite().then_some(p.ok_p99_ms),
        false,
    );
    for (i, (label, _)) in curves.iter().enumerate() {
        let y = LEGEND_FROM + LEGEND_LINE * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{}" stroke-width="3"{}/><text class="label" x="{:.1}" y="{y:.1}" font-size="11">{}</text>"#,
            LEFT,
            LEFT + 18.0,
            y - 4.0,
            y - 4.0,
            colour(i),
            dash_attribute(i),
            LEFT + 24.0,
            escape(label)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{} — run {}: medians of {} round(s); open loop, latency from the intended send time; dashed: goodput = offered; hollow: rate not held</text>"##,
        width / 2.0,
        height - 8.0,
        escape(&summary.experiment),
        escape(&summary.run_id),
        summary.rounds
    );
    out.push_str("</svg>\n");
    Some(out)
}

#[allow(clippy::too_many_arguments)]
fn panel(
    out: &mut String,
    x0: f64,
    (title, y_title): (&str, &str),
    x: Scale,
    y: Scale,
    curves: &[(String, Vec<Point>)],
    value: impl Fn(&Point) -> Option<f64>,
    diagonal: bool,
) {
    let frame = Frame {
        left: x0 + LEFT,
        top: TOP,
        width: PANEL_WIDTH - LEFT - RIGHT,
        height: PLOT_HEIGHT,
        x,
        y,
    };
    frame.draw(
        out,
        &Titles {
            title,
            x: "offered load (requests per second)",
            y: y_title,
            x_unit: "",
            y_title_x: x0 + 18.0,
        },
    );
    let (x, y) = (|v| frame.x(v), |v| frame.y(v));
    if diagonal {
        let end = match (&frame.x, &frame.y) {
            (Scale::Linear { max: a, .. }, Scale::Linear { max: b, .. }) => a.min(*b),
            _ => 0.0,
        };
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="4 4"/>"##,
            x(0.0),
            y(0.0),
            x(end),
            y(end)
        );
    }
    for (i, (_, points)) in curves.iter().enumerate() {
        let colour = colour(i);
        let coords: Vec<(f64, f64, &Point)> = points
            .iter()
            .filter_map(|p| Some((x(p.offered), y(value(p)?), p)))
            .collect();
        let line: Vec<String> = coords
            .iter()
            .map(|(cx, cy, _)| format!("{cx:.1},{cy:.1}"))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{}/>"#,
            line.join(" "),
            dash_attribute(i)
        );
        for (cx, cy, p) in coords {
            let v = value(p).unwrap_or(f64::NAN);
            let fill = if p.rate_held { colour } else { "white" };
            let _ = writeln!(
                out,
                r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="4" fill="{fill}" stroke="{colour}"><title>{}: offered {}/s, {}{}</title></circle>"#,
                escape(&p.config.name),
                format_value(p.offered),
                format_value(v),
                if p.rate_held { "" } else { " (rate not held)" }
            );
        }
    }
}

/// The curve as a markdown table, or `None` as for [`render`].
pub fn table(summary: &Summary) -> Option<String> {
    let curves = curves(summary);
    if curves.is_empty() {
        return None;
    }
    let mut out = String::from(
        "\n**Overload curve** (open loop; medians over rounds; `shed` = answered 503 at \
         once; p99 admitted = p99 of the answers without errors, from the intended send \
         time; chart: `overload.svg`)\n\n\
         | config | gateway | offered req/s | sent req/s | goodput req/s | goodput / offered | shed | p99 admitted | p99 all answers | rate held |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (label, points) in &curves {
        for p in points {
            let _ = writeln!(
                out,
                "| {} | `{}` | {:.0} | {:.0} | {:.0} | {:.2} | {:.1}% | {} | {:.1} ms | {} |",
                p.config.name,
                label,
                p.offered,
                p.sent,
                p.goodput,
                p.goodput / p.offered,
                p.shed_share * 100.0,
                if p.ok_p99_ms.is_finite() {
                    format!("{:.1} ms", p.ok_p99_ms)
                } else {
                    "–".into()
                },
                p.p99_ms,
                if p.rate_held { "yes" } else { "no" }
            );
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::summary::fixtures::measurement;
    use crate::matrix::summary::{OpenLoopFigures, SCHEMA};

    fn summary(open_loop: bool) -> Summary {
        let mut configs = Vec::new();
        for (limit, goodput_at) in [
            ("32", [500.0, 1000.0, 1000.0]),
            ("0", [500.0, 1000.0, 990.0]),
        ] {
            for (rate, goodput) in [500.0, 1000.0, 3000.0].into_iter().zip(goodput_at) {
                let name = format!("limit-{limit}-{rate}");
                let mut m = measurement(1, &name, rate, 10.0);
                m.goodput_per_sec = Some(goodput);
                m.ok_p99_ms = Some(if limit == "0" { rate } else { 12.0 });
                m.open_loop = open_loop.then_some(OpenLoopFigures {
                    target_rate: rate,
                    sent_rate: rate,
                    missed: 0,
                    rate_held: limit != "0" || rate < 3000.0,
                });
                configs.push(ConfigSummary::from_rounds(
                    &name,
                    None,
                    [
                        vec!["--max-concurrent-requests".into(), limit.into()],
                        vec![],
                        vec![],
                    ],
                    serde_json::json!({ "rate": rate }),
                    vec![m],
                ));
            }
        }
        Summary {
            schema: SCHEMA.into(),
            run_id: "r".into(),
            experiment: "overload".into(),
            baseline: configs[0].name.clone(),
            rounds: 1,
            duration_s: 8.0,
            warmup_s: 2.0,
            quick: false,
            configs,
            warnings: vec![],
        }
    }

    #[test]
    fn one_curve_per_gateway_setting_in_chart_and_table() {
        let s = summary(true);
        let svg = render(&s).expect("open-loop configurations make a chart");
        assert_eq!(svg.matches("<polyline").count(), 4, "2 settings × 2 panels");
        assert!(svg.contains("--max-concurrent-requests 32"));
        // A point whose rate was not held is drawn hollow.
        assert!(svg.contains(r#"fill="white" stroke="#) && svg.contains("(rate not held)"));
        // 12 ms against 3 s: the p99 panel is drawn on a log scale, goodput is not.
        assert_eq!(svg.matches("log scale").count(), 1, "{svg}");
        assert_eq!(
            svg.matches(r#"class="label""#).count(),
            2,
            "a legend line per curve"
        );
        let table = table(&s).unwrap();
        assert!(
            table.contains(
                "| limit-32-3000 | `--max-concurrent-requests 32` | 3000 | 3000 | 1000 | 0.33 |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| 12.0 ms |") && table.contains("| no |"),
            "{table}"
        );
    }

    #[test]
    fn closed_loop_runs_have_no_curve() {
        let s = summary(false);
        assert!(render(&s).is_none() && table(&s).is_none());
    }
}
