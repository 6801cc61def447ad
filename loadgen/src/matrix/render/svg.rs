//! What every chart of a run shares: escaping text for SVG, the palette (a colour and a
//! dash pattern per series), number formats for values and ticks, and the estimated
//! width of a line of text, so that a layout can be computed before a browser draws it.
//! The charts are SVG documents of their own, written with `format!`; every name in
//! them (configurations, experiment, run, gateway arguments) goes through [`escape`].
//! The pages that show them are written with maud ([`super::html`]).

/// Escape text for an SVG text node or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Ten colours that stay apart on white, text included (Tableau 10, its yellow and grey
/// darkened).
const COLOURS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#9c755f", "#c49a00",
    "#ff9da7", "#555555",
];

/// The colour of series `i`.
pub fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// The dash pattern of series `i` (`None`: solid): the first ten are solid, the next ten
/// dashed, then dotted, so that no two of thirty lines look alike.
pub fn dash(i: usize) -> Option<&'static str> {
    match i / COLOURS.len() {
        0 => None,
        1 => Some("7 3"),
        _ => Some("2 2"),
    }
}

/// ` stroke-dasharray="…"` for series `i`, or nothing.
pub fn dash_attribute(i: usize) -> String {
    dash(i).map_or(String::new(), |d| format!(r#" stroke-dasharray="{d}""#))
}

/// Axis ticks are round numbers: no decimals unless they matter.
pub fn tick_label(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 0.01 {
        format!("{}", (v * 100.0).round() / 100.0)
    } else {
        format!("{v}")
    }
}

/// A measured value with the precision its size needs.
pub fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The width `text` takes at `font_px` in a sans-serif font, estimated on the wide side
/// (DejaVu Sans, Debian's default, is wider than Arial): narrow letters, wide letters,
/// capitals and the rest each have their own advance.
pub fn text_width(text: &str, font_px: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' => 0.32,
            'f' | 't' | 'r' | ' ' | '-' | '(' | ')' | '[' | ']' | '/' => 0.42,
            'm' | 'w' | 'M' | 'W' | '%' | '@' => 0.98,
            'A'..='Z' | '&' | '–' | '—' | '×' => 0.76,
            _ => 0.64,
        })
        .sum();
    em * font_px
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_text_and_attributes() {
        assert_eq!(
            escape(r#"a<b & "c" 'd'>"#),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;"
        );
    }

    #[test]
    fn thirty_series_are_all_different() {
        let looks: std::collections::HashSet<(&str, Option<&str>)> =
            (0..30).map(|i| (colour(i), dash(i))).collect();
        assert_eq!(looks.len(), 30);
    }

    #[test]
    fn widths_grow_with_the_text_and_the_font() {
        assert!(text_width("ttl-10-layered-2gw", 11.0) > text_width("ttl-10", 11.0));
        assert!(text_width("mmm", 11.0) > text_width("iii", 11.0));
        assert_eq!(text_width("ab", 22.0), 2.0 * text_width("ab", 11.0));
        assert_eq!(tick_label(2000.0), "2000");
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(0.001), "0.001");
        assert_eq!(format_value(4623.4), "4623");
        assert_eq!(format_value(46.26), "46.3");
    }
}
