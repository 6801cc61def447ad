//! The frame of an x–y panel: its title, grid lines with tick labels on both axes (a
//! log axis's decades stronger than their 2× and 5× lines, and a break where zero is
//! drawn apart), the border and the axis titles. [`Frame::x`] and [`Frame::y`] place a
//! value inside it.

use std::fmt::Write as _;

use super::labels::Rect;
use super::scale::Scale;
use super::svg::{escape, text_width};

pub struct Frame {
    /// Left edge of the plot area, and its top.
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    pub x: Scale,
    pub y: Scale,
}

/// What a frame's texts say.
pub struct Titles<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    /// After each x tick label (`%`).
    pub x_unit: &'a str,
    /// The centre of the rotated y title.
    pub y_title_x: f64,
}

const TICK_FONT: f64 = 11.0;

impl Frame {
    pub fn x(&self, v: f64) -> f64 {
        self.left + self.x.fraction(v) * self.width
    }

    pub fn y(&self, v: f64) -> f64 {
        self.top + self.height - self.y.fraction(v) * self.height
    }

    /// The plot area.
    pub fn area(&self) -> Rect {
        Rect {
            x: self.left,
            y: self.top,
            w: self.width,
            h: self.height,
        }
    }

    /// Draw the frame. Tick labels that would overlap the one drawn before them are left
    /// out.
    pub fn draw(&self, out: &mut String, titles: &Titles) {
        let (left, top, w, h) = (self.left, self.top, self.width, self.height);
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="28" font-size="14" font-weight="bold" text-anchor="middle">{}</text>"#,
            left + w / 2.0,
            escape(titles.title)
        );
        let mut last_y_label: Option<Rect> = None;
        for tick in self.y.ticks() {
            let y = self.y(tick.value);
            let stroke = if tick.major { "#e4e4e4" } else { "#f2f2f2" };
            let _ = writeln!(
                out,
                r#"<line x1="{left:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{stroke}"/>"#,
                left + w
            );
            if tick.label.is_empty() {
                continue;
            }
            let width = text_width(&tick.label, TICK_FONT);
            let rect = Rect {
                x: left - 6.0 - width,
                y: y - TICK_FONT / 2.0,
                w: width,
                h: TICK_FONT,
            };
            if last_y_label.is_some_and(|r| r.intersects(&rect)) {
                continue;
            }
            last_y_label = Some(rect);
            let _ = writeln!(
                out,
                r#"<text class="tick" x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"#,
                left - 6.0,
                y + 4.0,
                escape(&tick.label)
            );
        }
        let mut last_x_label: Option<Rect> = None;
        for tick in self.x.ticks() {
            let x = self.x(tick.value);
            let stroke = if tick.major { "#e4e4e4" } else { "#f2f2f2" };
            let _ = writeln!(
                out,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="{top:.1}" y2="{:.1}" stroke="{stroke}"/>"#,
                top + h
            );
            if tick.label.is_empty() {
                continue;
            }
            let text = format!("{}{}", tick.label, titles.x_unit);
            let width = text_width(&text, TICK_FONT);
            let rect = Rect {
                x: x - width / 2.0 - 2.0,
                y: top + h + 6.0,
                w: width + 4.0,
                h: TICK_FONT,
            };
            if last_x_label.is_some_and(|r| r.intersects(&rect)) {
                continue;
            }
            last_x_label = Some(rect);
            let _ = writeln!(
                out,
                r#"<text class="tick" x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
                top + h + 16.0,
                escape(&text)
            );
        }
        let _ = writeln!(
            out,
            r##"<rect x="{left:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="#444"/>"##
        );
        if let Some(at) = self.x.break_at() {
            self.x_break(out, left + at * w);
        }
        if let Some(at) = self.y.break_at() {
            self.y_break(out, top + h - at * h);
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}{}</text>"#,
            left + w / 2.0,
            top + h + 36.0,
            escape(titles.x),
            if self.x.is_log() {
                " — log scale"
            } else {
                ""
            }
        );
        let ty = top + h / 2.0;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{ty:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 {:.1} {ty:.1})">{}{}</text>"#,
            titles.y_title_x,
            titles.y_title_x,
            escape(titles.y),
            if self.y.is_log() {
                " — log scale"
            } else {
                ""
            }
        );
    }

    /// A break in the x axis at `x`: zero is left of it, the decades right of it.
    fn x_break(&self, out: &mut String, x: f64) {
        let bottom = self.top + self.height;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{bottom:.1}" stroke="#bbb" stroke-dasharray="3 3"/><rect x="{:.1}" y="{:.1}" width="6" height="12" fill="white"/><path d="M{:.1},{:.1} l4,-6 M{:.1},{:.1} l4,-6" stroke="#444"/>"##,
            self.top,
            x - 3.0,
            bottom - 6.0,
            x - 4.0,
            bottom + 3.0,
            x,
            bottom + 3.0
        );
    }

    /// A break in the y axis at `y`: zero is below it.
    fn y_break(&self, out: &mut String, y: f64) {
        let left = self.left;
        let _ = writeln!(
            out,
            r##"<line x1="{left:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#bbb" stroke-dasharray="3 3"/><rect x="{:.1}" y="{:.1}" width="12" height="6" fill="white"/><path d="M{:.1},{:.1} l6,-4 M{:.1},{:.1} l6,-4" stroke="#444"/>"##,
            left + self.width,
            left - 6.0,
            y - 3.0,
            left - 3.0,
            y + 2.0,
            left - 3.0,
            y + 6.0
        );
    }
}
