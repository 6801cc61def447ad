//! Which SVG files a run's page draws inline: the charts the lab wrote (`chart.svg`,
//! `timeline.svg`…) and any other SVG of the folder that is a plain drawing. The file's
//! markup goes into the page as it is, so it must be markup that can do nothing but
//! draw: every element one of the shapes, texts and groups the charts use, no attribute
//! that runs code (`on…`), links or loads something (`href`, `style`, `url(…)`), no
//! comment, CDATA or processing instruction that would hide anything from this check.
//! Any other SVG is linked, not inlined.

use maud::{Markup, PreEscaped};

/// The elements of a plain drawing: what the lab's charts are made of, and their kin.
const DRAWING_ELEMENTS: [&str; 13] = [
    "svg", "g", "rect", "line", "path", "polyline", "polygon", "circle", "ellipse", "text",
    "tspan", "title", "desc",
];

/// The SVG document `text` ready to sit inside a page (its XML prolog and doctype
/// dropped), or `None` when it is not a plain drawing.
pub fn inline_svg(text: &str) -> Option<Markup> {
    let start = text.find("<svg")?;
    let svg = text[start..].trim_end();
    // Safe markup: every tag of it was read here as a browser reads it, and each is an
    // element that only draws, with attributes that neither run code nor load anything;
    // text between tags cannot hold a `<` that starts anything else.
    plain_drawing(svg).then(|| PreEscaped(svg.to_string()))
}

/// Whether every tag of `svg` is an opening or closing tag of a drawing element, each
/// attribute neither an event handler nor a link, style or reference to elsewhere.
/// Tags are split as an HTML parser splits them: a name up to white space, `/` or `>`;
/// attributes separated by white space or `/`, values quoted with `"` or `'` or up to
/// white space or `>`.
fn plain_drawing(svg: &str) -> bool {
    let lower = svg.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut i = 0;
    let at_name_end = |b: u8| b.is_ascii_whitespace() || b == b'/' || b == b'>';
    while let Some(open) = lower[i..].find('<') {
        i += open + 1;
        if bytes.get(i) == Some(&b'/') {
            i += 1;
        }
        let name_start = i;
        while i < bytes.len() && !at_name_end(bytes[i]) {
            i += 1;
        }
        if !DRAWING_ELEMENTS.contains(&&lower[name_start..i]) {
            return false;
        }
        // The attributes, up to the tag's `>`.
        loop {
            while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
                i += 1;
            }
            match bytes.get(i) {
                None => return false,
                Some(b'>') => break,
                Some(_) => {}
            }
            let attr_start = i;
            while i < bytes.len() && !at_name_end(bytes[i]) && bytes[i] != b'=' {
                i += 1;
            }
            let attr = &lower[attr_start..i];
            if attr.starts_with("on") || attr.ends_with("href") || attr == "style" {
                return false;
            }
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            if bytes.get(i) != Some(&b'=') {
                continue;
            }
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            let value = match bytes.get(i) {
                Some(&quote @ (b'"' | b'\'')) => {
                    let Some(len) = lower[i + 1..].find(quote as char) else {
                        return false;
                    };
                    i += len + 2;
                    &lower[i - len - 1..i - 1]
                }
                _ => {
                    let start = i;
                    while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'>' {
                        i += 1;
                    }
                    &lower[start..i]
                }
            };
            if value.contains("url(") {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inlined(svg: &str) -> bool {
        inline_svg(svg).is_some()
    }

    #[test]
    fn plain_drawings_are_inlined_without_their_prolog() {
        let plain = "<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg xmlns=\"x\"><rect/></svg>\n";
        assert_eq!(
            inline_svg(plain).unwrap().into_string(),
            "<svg xmlns=\"x\"><rect/></svg>"
        );
        let chart =
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" font-family='sans-serif'>\n\
             <g><line x1=\"0\" x2=\"1\" stroke-dasharray=\"7 3\"/><circle r=3 fill=\"#4e79a7\">\
             <title>ttl&lt;0&gt; onload=x: 1</title></circle>\
             <text class=\"label\">a &amp; b's on=1 &lt;script&gt;</text></g></svg>";
        assert!(inlined(chart), "text that reads like markup is text");
    }

    #[test]
    fn anything_that_runs_links_or_loads_is_linked_instead() {
        for svg in [
            "<svg onload=\"x()\"></svg>",
            "<svg/onload=x()></svg>",
            "<svg><rect x=\"1\"onclick=\"x()\"/></svg>",
            "<svg><rect\tONMOUSEOVER='x()'/></svg>",
            "<svg><script>x()</script></svg>",
            "<svg><title><img src=x onerror=x()></title></svg>",
            "<svg><foreignObject><p>x</p></foreignObject></svg>",
            "<svg><a href=\"javascript:x()\"><text>x</text></a></svg>",
            "<svg><use xlink:href=\"other.svg#x\"/></svg>",
            "<svg><set attributeName=\"fill\" to=\"red\"/></svg>",
            "<svg><rect style=\"fill: red\"/></svg>",
            "<svg><rect fill=\"url(http://example.org/p.svg#p)\"/></svg>",
            "<svg><!-- <script>x()</script> --></svg>",
            "<svg><text><![CDATA[x]]></text></svg>",
            "<svg><rect x=\"1></svg>",
            "<svg><rect",
            "<svg></svg><script>x()</script>",
            "not a drawing",
        ] {
            assert!(!inlined(svg), "{svg}");
        }
    }
}
