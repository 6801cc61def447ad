//! The shell every page of the lab shares: one self-contained HTML document (inline
//! style, no script, nothing fetched from a network) that opens from disk; and what the
//! pages put in it — links relative to the page, Markdown turned into HTML with any raw
//! HTML shown as text, warning boxes, badges, tables.
//!
//! Every page is written with maud's `html!`, which escapes each string it is given: a
//! name, a path or a message from a run's files is text on the page whatever it holds.
//! Markup that is already HTML goes in only as [`Markup`] made by `html!` itself, or by
//! the three `PreEscaped` of the pages, each with why it is safe: the style sheet, the
//! Markdown ([`markdown`]) and an SVG drawing ([`super::drawing`]).

use std::path::{Component, Path, PathBuf};

use maud::{html, Markup, PreEscaped, DOCTYPE};
use pulldown_cmark::{CowStr, Event, Options, Parser, Tag};

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
    body: Vec<Markup>,
}

impl Page {
    pub fn new(title: &str) -> Page {
        Page {
            title: title.to_string(),
            body: Vec::new(),
        }
    }

    /// Append a block of the page.
    pub fn push(&mut self, html: Markup) {
        self.body.push(html);
    }

    /// A section: a heading with an anchor, and its HTML.
    pub fn section(&mut self, id: &str, title: &str, html: Markup) {
        self.body.push(html! {
            section id=(id) { h2 { (title) } "\n" (html) }
        });
    }

    /// The whole document.
    pub fn finish(self) -> String {
        html! {
            (DOCTYPE) "\n"
            html lang="en" {
                "\n"
                head {
                    "\n" meta charset="utf-8";
                    "\n" meta name="viewport" content="width=device-width, initial-scale=1";
                    "\n" meta name="generator" content={ "loadgen " (env!("CARGO_PKG_VERSION")) };
                    "\n" title { (self.title) }
                    // Safe markup: the constant above, nothing from a run in it (a style
                    // element's text is read as written, so it cannot go in escaped).
                    "\n" style { (PreEscaped(STYLE)) } "\n"
                }
                "\n"
                body {
                    "\n"
                    @for block in &self.body { (block) "\n" }
                }
                "\n"
            }
            "\n"
        }
        .into_string()
    }
}

/// A link target from a path relative to the page: each segment percent-encoded where
/// a URL needs it (the page escapes it for the attribute).
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
    out
}

/// `<a href="…">text</a>`, both escaped.
pub fn link(relative: &str, text: &str) -> Markup {
    html! { a href=(href(relative)) { (text) } }
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
/// `https` links and images are kept.
pub fn markdown(text: &str) -> Markup {
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
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) if !safe_url(&dest_url) => Event::Start(Tag::Image {
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
    html! {
        div class="markdown" {
            "\n"
            // Safe markup: pulldown-cmark escapes every text, code span and attribute it
            // writes; the only raw HTML it would pass on (HTML blocks and inline HTML) was
            // turned into text above, and links and images to other schemes than http(s)
            // (`javascript:`) now lead nowhere.
            (PreEscaped(html))
        }
        "\n"
    }
}

fn safe_url(url: &str) -> bool {
    match url.split_once(':') {
        Some((scheme, _)) if !scheme.contains('/') => {
            scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
        }
        _ => true,
    }
}

/// A box of the given class (`error`, `warning`, `notes`, `clean`) with a title and
/// items.
pub fn callout(class: &str, title: &str, items: &[Markup]) -> Markup {
    html! {
        div class={ "box " (class) } role="note" {
            h2 { (title) }
            @if !items.is_empty() {
                ul { @for item in items { li { (item) } } }
            }
        }
    }
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
pub fn badge(class: &str, text: &str) -> Markup {
    html! { span class={ "badge " (class) } { (text) } }
}

/// A table from a header and rows of cells; `numeric` columns are right aligned.
pub fn table(header: &[&str], numeric: &[bool], rows: &[Vec<Markup>]) -> Markup {
    html! {
        div class="table" {
            table {
                thead { tr { @for h in header { th { (h) } } } }
                tbody {
                    "\n"
                    @for row in rows {
                        tr {
                            @for (i, cell) in row.iter().enumerate() {
                                @if numeric.get(i).copied().unwrap_or(false) {
                                    td class="num" { (cell) }
                                } @else {
                                    td { (cell) }
                                }
                            }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_tables_become_html_and_raw_html_stays_text() {
        let html = markdown(
            "# title\n\n| config | req/s |\n|---|---:|\n| <b>x</b> | 12 |\n\n\
             [svg](flame-a.svg) [bad](javascript:alert(1)) ![bad](javascript:alert(2)) \
             <script>alert(1)</script>",
        )
        .into_string();
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
            link("a b#c.svg", "<x>").into_string(),
            "<a href=\"a%20b%23c.svg\">&lt;x&gt;</a>"
        );
    }

    #[test]
    fn a_page_is_one_document_without_scripts() {
        let mut page = Page::new("seed <run>");
        page.section("charts", "Charts", html! { p { "x" } });
        page.push(callout("warning", "Disturbed", &[html! { "a" }]));
        let html = page.finish();
        assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
        assert!(html.contains("<title>seed &lt;run&gt;</title>"));
        assert!(
            !html.contains("<script") && !html.contains("http://") && !html.contains("https://")
        );
        assert!(html.contains("<section id=\"charts\"><h2>Charts</h2>"));
    }
}
