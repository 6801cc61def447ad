//! The shell every page of the lab shares: one self-contained HTML document (inline
//! style, no script, nothing fetched from a network) that opens from disk; and what the
//! pages put in it — escaped text, links relative to the page, Markdown turned into HTML
//! with any raw HTML shown as text, an SVG chart inlined, warning boxes.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag};

pub use crate::matrix::render::svg::escape;

/// The style of every page: readable tables, numbers aligned, charts that shrink to the
/// window.
const STYLE: &str = "
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif; margin: 0 auto; padding: 1rem 1.5rem 3rem; max-width: 1500px; color: #1d1d1d; line-height: 1.45; }
h1 { font-size: 1.6rem; margin: 0.4rem 0; }
h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
h3 { font-size: 1.05rem; }
a { color: #1f5fa8; }
nav { font-size: 0.9rem; margin: 0.5rem 0 1rem; }
nav a { margin-right: 0.9rem; }
.sub { color: #555; margin: 0.2rem 0; }
.headline { font-size: 1.15rem; margin: 0.6rem 0; }
.box { border-left: 6px solid; padding: 0.5rem 1rem; margin: 1rem 0; border-radius: 3px; }
.box h2 { border: none; margin: 0.3rem 0; font-size: 1.1rem; }
.box ul { margin: 0.3rem 0; padding-left: 1.2rem; }
.error { border-color: #b71c1c; background: #fdecea; }
.warning { border-color: #e65100; background: #fff3e0; }
.notes { border-color: #f9a825; background: #fffbe6; }
.clean { border-color: #2e7d32; background: #edf7ed; }
.clean h2 { font-weight: normal; font-size: 1rem; }
.badge { display: inline-block; font-size: 0.75rem; padding: 0.05rem 0.45rem; border-radius: 0.6rem; margin: 0 0.2rem 0.1rem 0; white-space: nowrap; }
.badge.error { background: #b71c1c; color: white; }
.badge.warning { background: #e65100; color: white; }
.badge.quiet { background: #e0e0e0; color: #333; }
.table { overflow-x: auto; margin: 0.6rem 0; }
table { border-collapse: collapse; font-size: 0.88rem; }
th, td { border: 1px solid #d6d6d6; padding: 0.25rem 0.5rem; vertical-align: top; }
th { background: #f1f3f5; text-align: left; }
tbody tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap, .markdown td[style*='right'] { white-space: nowrap; }
td.bad { background: #fdecea !important; }
td.good { background: #edf7ed !important; }
code, pre { font-family: 'DejaVu Sans Mono', ui-monospace, monospace; font-size: 0.85em; }
pre { background: #f6f8fa; padding: 0.6rem; overflow-x: auto; }
figure { margin: 1rem 0 2rem; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #444; }
details { margin: 0.5rem 0; }
.markdown h1:first-child { display: none; }
";

/// A page under construction.
pub struct Page {
    title: String,
    body: String,
}

impl Page {
    pub fn new(title: &str) -> Page {
        Page {
            title: title.to_string(),
            body: String::new(),
        }
    }

    /// Append HTML (already escaped by whoever made it).
    pub fn push(&mut self, html: &str) {
        self.body.push_str(html);
        self.body.push('\n');
    }

    /// A section: a heading with an anchor, and its HTML.
    pub fn section(&mut self, id: &str, title: &str, html: &str) {
        let _ = writeln!(
            self.body,
            "<section id=\"{}\"><h2>{}</h2>\n{html}</section>",
            escape(id),
            escape(title)
        );
    }

    /// The whole document.
    pub fn finish(self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"loadgen {}\">\n<title>{}</title>\n<style>{STYLE}</style>\n\
             </head>\n<body>\n{}</body>\n</html>\n",
            env!("CARGO_PKG_VERSION"),
            escape(&self.title),
            self.body
        )
    }
}

/// A link target from a path relative to the page: each segment percent-encoded where
/// a URL needs it, then escaped for the attribute.
pub fn href(relative: &str) -> String {
    let mut out = String::with_capacity(relative.len());
    for c in relative.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '#' => out.push_str("%23"),
            '?' => out.push_str("%3F"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    escape(&out)
}

/// `<a href="…">text</a>` with both escaped.
pub fn link(relative: &str, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", href(relative), escape(text))
}

/// The path of `target` as seen from the directory `from` (both made absolute first),
/// with `/` separators: `../20261201-053550/index.html`.
pub fn relative_path(from: &Path, target: &Path) -> String {
    let absolute = |p: &Path| -> PathBuf {
        let p = std::fs::canonicalize(p).unwrap_or_else(|_| {
            std::env::current_dir()
                .map(|d| d.join(p))
                .unwrap_or_else(|_| p.to_path_buf())
        });
        // Drop `.` and fold `..` of paths that do not exist (yet).
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                c => out.push(c),
            }
        }
        out
    };
    let (from, target) = (absolute(from), absolute(target));
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = target.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// Markdown (the lab's summary.md and the scripts' reports) as HTML: tables, emphasis,
/// code and links; raw HTML in the text is shown as text, and only relative, `http` and
/// `https` links are kept.
pub fn markdown(text: &str) -> String {
    let parser = Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH);
    let events = parser.map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) if !safe_url(&dest_url) => Event::Start(Tag::Link {
            link_type,
            dest_url: CowStr::from("#"),
            title,
            id,
        }),
        other => other,
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    // Wide tables scroll inside the page rather than widening it.
    let html = html
        .replace("<table>", "<div class=\"table\"><table>")
        .replace("</table>", "</table></div>");
    format!("<div class=\"markdown\">\n{html}</div>\n")
}

fn safe_url(url: &str) -> bool {
    match url.split_once(':') {
        Some((scheme, _)) if !scheme.contains('/') => {
            scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
        }
        _ => true,
    }
}

/// An SVG document made ready to sit inside the page: its XML prolog and doctype
/// dropped. `None` for anything that is not a plain drawing — no `<svg`, or a script,
/// an event handler or foreign content in it — which is then linked, not inlined.
pub fn inline_svg(text: &str) -> Option<String> {
    let start = text.find("<svg")?;
    let svg = &text[start..];
    let lower = svg.to_ascii_lowercase();
    let unsafe_markers = [
        "<script",
        "<foreignobject",
        " onload",
        " onclick",
        "javascript:",
    ];
    if unsafe_markers.iter().any(|m| lower.contains(m)) {
        return None;
    }
    Some(svg.trim_end().to_string())
}

/// A box of the given class (`error`, `warning`, `notes`, `clean`) with a title and
/// items (HTML each).
pub fn callout(class: &str, title: &str, items: &[String]) -> String {
    let mut out = format!(
        "<div class=\"box {}\" role=\"note\"><h2>{}</h2>",
        escape(class),
        escape(title)
    );
    if !items.is_empty() {
        out.push_str("<ul>");
        for item in items {
            let _ = write!(out, "<li>{item}</li>");
        }
        out.push_str("</ul>");
    }
    out.push_str("</div>");
    out
}

/// An argument as a POSIX shell reads it: single-quoted when it needs to be.
pub fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=:,+-@%".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// A small label: `error`, `warning` or `quiet`.
pub fn badge(class: &str, text: &str) -> String {
    format!(
        "<span class=\"badge {}\">{}</span>",
        escape(class),
        escape(text)
    )
}

/// A table from a header and rows of cells (HTML each); `numeric` columns are right
/// aligned.
pub fn table(header: &[&str], numeric: &[bool], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<div class=\"table\"><table><thead><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            if numeric.get(i).copied().unwrap_or(false) {
                let _ = write!(out, "<td class=\"num\">{cell}</td>");
            } else {
                let _ = write!(out, "<td>{cell}</td>");
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_tables_become_html_and_raw_html_stays_text() {
        let html = markdown(
            "# title\n\n| config | req/s |\n|---|---:|\n| <b>x</b> | 12 |\n\n\
             [svg](flame-a.svg) [bad](javascript:alert(1)) <script>alert(1)</script>",
        );
        assert!(
            html.contains("<table>") && html.contains("<td style=\"text-align: right\">12</td>"),
            "{html}"
        );
        assert!(html.contains("&lt;b&gt;x&lt;/b&gt;"), "{html}");
        assert!(
            html.contains("&lt;script&gt;") && !html.contains("<script"),
            "{html}"
        );
        assert!(html.contains("<a href=\"flame-a.svg\">svg</a>"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
    }

    #[test]
    fn svgs_are_inlined_only_when_they_are_plain_drawings() {
        let plain = "<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg xmlns=\"x\"><rect/></svg>\n";
        assert_eq!(inline_svg(plain).unwrap(), "<svg xmlns=\"x\"><rect/></svg>");
        assert!(inline_svg("<svg onload=\"x()\"></svg>").is_none());
        assert!(inline_svg("<svg><script>x()</script></svg>").is_none());
        assert!(inline_svg("not a drawing").is_none());
    }

    #[test]
    fn links_are_relative_encoded_and_escaped() {
        let base = std::env::temp_dir().join(format!("loadgen-page-{}", std::process::id()));
        let run = base.join("results").join("20261201-053550");
        std::fs::create_dir_all(&run).unwrap();
        assert_eq!(
            relative_path(&base.join("results"), &run.join("index.html")),
            "20261201-053550/index.html"
        );
        assert_eq!(
            relative_path(&run, &base.join("results/index.html")),
            "../index.html"
        );
        assert_eq!(
            relative_path(&base.join("out/x"), &run),
            "../../results/20261201-053550"
        );
        assert_eq!(relative_path(&run, &run), ".");
        std::fs::remove_dir_all(&base).ok();
        assert_eq!(
            link("a b#c.svg", "<x>"),
            "<a href=\"a%20b%23c.svg\">&lt;x&gt;</a>"
        );
    }

    #[test]
    fn a_page_is_one_document_without_scripts() {
        let mut page = Page::new("seed <run>");
        page.section("charts", "Charts", "<p>x</p>");
        page.push(&callout("warning", "Disturbed", &["a".into()]));
        let html = page.finish();
        assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
        assert!(html.contains("<title>seed &lt;run&gt;</title>"));
        assert!(
            !html.contains("<script") && !html.contains("http://") && !html.contains("https://")
        );
        assert!(html.contains("<section id=\"charts\"><h2>Charts</h2>"));
    }
}
