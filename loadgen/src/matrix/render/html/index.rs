//! The results index (`results/index.html`): every run of the folder, newest first, with
//! its experiment, date, commit, machine and headline figure, and a mark on the runs that
//! were disturbed. Matrix runs link to their page; runs made by scripts (summary.txt,
//! soak.md…) are listed with what their files say and link to their main file; runs
//! stopped before their summary are listed as incomplete.
//!
//! [`Entry`] is read from each folder by [`crate::matrix::report`]; this file only turns
//! the entries into HTML.

use maud::html;

use super::page::{badge, link, Page};
use crate::matrix::disturbance::Severity;

/// What made a run's folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `loadgen matrix`: summary.json, manifest.json, its page.
    Matrix,
    /// A script of `scripts/` (summary.txt, its own reports).
    Script,
    /// A matrix run stopped before it wrote its summary.
    Incomplete,
}

/// One run in the index.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The folder's name.
    pub id: String,
    /// Its page or main file, relative to the index.
    pub link: Option<String>,
    pub kind: Kind,
    pub experiment: String,
    /// UTC, RFC 3339 (`2026-12-01T05:35:50Z`): shown, and the order of the list.
    pub timestamp: Option<String>,
    pub commit: Option<String>,
    pub dirty: bool,
    pub machine: Option<String>,
    pub headline: Option<String>,
    /// Marks: disturbances of the run, or warnings a script printed.
    pub flags: Vec<(Severity, String)>,
    pub quick: bool,
    /// Configurations × rounds, for matrix runs.
    pub shape: Option<(usize, u32)>,
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Matrix => "matrix",
        Kind::Script => "script",
        Kind::Incomplete => "incomplete",
    }
}

/// The index page of `entries` (in any order: the page lists the newest first).
pub fn page(title: &str, entries: &[Entry]) -> String {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then_with(|| b.id.cmp(&a.id)));
    let mut page = Page::new(title);
    page.push(html! { h1 { (title) } });
    let count = |kind: Kind| entries.iter().filter(|e| e.kind == kind).count();
    page.push(html! {
        p class="sub" {
            (entries.len()) " run(s): " (count(Kind::Matrix)) " matrix run(s) with their own page, "
            (count(Kind::Script)) " made by scripts, " (count(Kind::Incomplete)) " incomplete. \
            Newest first. A mark says the run was disturbed (the rest of the machine above 0.3 cores, a rate not held, \
            failed requests, wrong answers) or that its script printed warnings; the run's page or summary says more. \
            Written by " code { "loadgen matrix" } " after each run and by " code { "loadgen report" } "."
        }
    });
    page.push(html! {
        div class="table" {
            table {
                thead {
                    tr {
                        @for h in ["run", "experiment", "date (UTC)", "commit", "machine", "headline", "marks"] {
                            th { (h) }
                        }
                    }
                }
                tbody {
                    "\n"
                    @for e in sorted {
                        tr {
                            td class="nowrap" {
                                @match &e.link {
                                    Some(l) => (link(l, &e.id)),
                                    None => (e.id),
                                }
                            }
                            td {
                                (e.experiment) " " (badge("quiet", kind_name(e.kind)))
                                @if let Some((configs, rounds)) = e.shape {
                                    br;
                                    small { (configs) " config(s) × " (rounds) " round(s)" }
                                }
                            }
                            td class="num" {
                                @match &e.timestamp {
                                    Some(t) => (t.trim_end_matches('Z').replacen('T', " ", 1)),
                                    None => "–",
                                }
                            }
                            td {
                                @match &e.commit {
                                    Some(c) => {
                                        code { (c.chars().take(10).collect::<String>()) }
                                        @if e.dirty { " (dirty)" }
                                    }
                                    None => "–",
                                }
                            }
                            td { (e.machine.as_deref().unwrap_or("–")) }
                            td { (e.headline.as_deref().unwrap_or("–")) }
                            td {
                                @if e.quick { (badge("quiet", "--quick")) }
                                @for (severity, text) in &e.flags {
                                    @let class = match severity {
                                        Severity::Error => "error",
                                        Severity::Warning => "warning",
                                    };
                                    (badge(class, text))
                                }
                            }
                        }
                        "\n"
                    }
                }
            }
        }
    });
    page.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, timestamp: Option<&str>, kind: Kind) -> Entry {
        Entry {
            id: id.into(),
            link: Some(format!("{id}/index.html")),
            kind,
            experiment: "seed".into(),
            timestamp: timestamp.map(String::from),
            commit: Some("d74d1245c60d68d1d2ac72b288a424a62e969db0".into()),
            dirty: false,
            machine: Some("Xeon (2 cores)".into()),
            headline: Some("ttl-10: 5.79x the req/s of no-cache".into()),
            flags: vec![],
            quick: false,
            shape: Some((4, 3)),
        }
    }

    #[test]
    fn runs_are_listed_newest_first_with_their_marks() {
        let mut busy = entry(
            "20261201-053550",
            Some("2026-12-01T05:35:50Z"),
            Kind::Matrix,
        );
        busy.flags = vec![(Severity::Warning, "machine busy".into())];
        let mut script = entry(
            "20261201-062049-cpu<x>",
            Some("2026-12-01T06:20:49Z"),
            Kind::Script,
        );
        script.link = Some("20261201-062049-cpu<x>/summary.txt".into());
        script.shape = None;
        let old = entry(
            "20261130-103107",
            Some("2026-11-30T10:31:07Z"),
            Kind::Matrix,
        );
        let html = page("Runs", &[old, busy, script]);
        let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s}: {html}"));
        assert!(at("20261201-062049-cpu&lt;x&gt;") < at(">20261201-053550<"));
        assert!(at(">20261201-053550<") < at(">20261130-103107<"));
        assert!(
            html.contains("<span class=\"badge warning\">machine busy</span>"),
            "{html}"
        );
        assert!(
            html.contains("href=\"20261201-053550/index.html\""),
            "{html}"
        );
        assert!(html.contains("<code>d74d1245c6</code>"), "{html}");
        assert!(html.contains("3 run(s): 2 matrix run(s)"), "{html}");
        assert!(html.contains("2026-12-01 05:35:50"), "{html}");
        assert!(!html.contains("cpu<x>"), "{html}");
    }
}
