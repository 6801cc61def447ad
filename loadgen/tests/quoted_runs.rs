//! The documentation against the runs it quotes. Every figure in `README.md` and
//! `docs/*.md` names the run it came from, and a run that is quoted but was never
//! committed is a figure nobody can check. These tests read those pages and fail when:
//!
//! - a page names a run (`results/<8 digits>-<6 digits>[-suffix]`, or the bare run id)
//!   that is not a non-empty folder under `results/` (and, where git can tell, one with
//!   files in the index: CI runs on a clean clone, where only committed runs exist);
//! - a relative link of a page (`[text](path)`, `![alt](path)`, `path#anchor`, `#anchor`)
//!   leads to a file that does not exist, or to an anchor that no heading of the target
//!   page makes (GitHub's rule: lower case, punctuation dropped, spaces as hyphens).
//!
//! Links into fenced code blocks are not links and are skipped; run ids are checked
//! everywhere, code blocks included.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// The repository's root: loadgen's parent.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("loadgen sits in the workspace")
        .to_path_buf()
}

/// `README.md` and every `docs/*.md`, as paths relative to the root.
fn pages() -> Vec<PathBuf> {
    let root = repo();
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| {
            path.strip_prefix(&root)
                .expect("under the root")
                .to_path_buf()
        })
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(repo().join(path))
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A run a page names: `folder` is the whole folder name after `results/`, or `None`
/// for a bare run id (which names the run whose folder starts with it).
#[derive(Debug, PartialEq)]
struct Quote {
    line: usize,
    id: String,
    folder: Option<String>,
}

/// Every run id in `text`: eight digits, a hyphen, six digits, with no digit on either
/// side; after `results/`, the folder name runs on over letters, digits, `-` and `_`.
fn quoted_runs(text: &str) -> Vec<Quote> {
    let bytes = text.as_bytes();
    let mut quotes = Vec::new();
    let mut i = 0;
    while i + 15 <= bytes.len() {
        let is_id = bytes[i..i + 8].iter().all(u8::is_ascii_digit)
            && bytes[i + 8] == b'-'
            && bytes[i + 9..i + 15].iter().all(u8::is_ascii_digit)
            && (i == 0 || !bytes[i - 1].is_ascii_digit())
            && bytes.get(i + 15).is_none_or(|b| !b.is_ascii_digit());
        if !is_id {
            i += 1;
            continue;
        }
        let id = text[i..i + 15].to_string();
        let line = 1 + bytes[..i].iter().filter(|&&b| b == b'\n').count();
        let folder = text[..i].ends_with("results/").then(|| {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches('-').to_string()
        });
        quotes.push(Quote { line, id, folder });
        i += 15;
    }
    quotes
}

/// Whether `dir` holds at least one file, at any depth.
fn has_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            let path = entry.path();
            path.is_file() || (path.is_dir() && has_files(&path))
        })
    })
}

/// The run folders with files in git's index, when git can tell (`None` outside a
/// repository or without git).
fn tracked_runs() -> Option<BTreeSet<String>> {
    let output = Command::new("git")
        .args(["ls-files", "-z", "--", "results/"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|output| output.status.success())?;
    let listing = String::from_utf8(output.stdout).ok()?;
    Some(
        listing
            .split('\0')
            .filter_map(|path| path.strip_prefix("results/")?.split('/').next())
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn every_quoted_run_is_committed_under_results() {
    let results = repo().join("results");
    let folders: Vec<String> = std::fs::read_dir(&results)
        .expect("results/ exists")
        .flatten()
        .filter(|entry| entry.path().is_dir() && has_files(&entry.path()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    let tracked = tracked_runs();
    let committed = |name: &str| {
        folders.iter().any(|f| f.as_str() == name)
            && tracked.as_ref().is_none_or(|t| t.contains(name))
    };
    let mut quoted = 0;
    let mut missing = Vec::new();
    for page in pages() {
        for quote in quoted_runs(&read(&page)) {
            quoted += 1;
            let found = match &quote.folder {
                Some(folder) => committed(folder),
                None => folders
                    .iter()
                    .filter(|f| *f == &quote.id || f.starts_with(&format!("{}-", quote.id)))
                    .any(|f| committed(f)),
            };
            if !found {
                let what = match &quote.folder {
                    Some(folder) => format!("results/{folder}"),
                    None => format!("run {} (no folder results/{}*)", quote.id, quote.id),
                };
                missing.push(format!(
                    "{}:{}: {what} is quoted but not committed, or empty",
                    page.display(),
                    quote.line
                ));
            }
        }
    }
    assert!(
        quoted > 0,
        "no run quoted in README.md or docs/: is the scan broken?"
    );
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// GitHub's anchor for a heading's text: lower case, every character but letters,
/// digits, spaces, `-` and `_` dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((n + 1, line));
        }
    }
    lines
}

/// The anchors a page's headings make, numbered as GitHub numbers repeats (`x`, `x-1`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let level = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[level..]);
        let mut anchor = base.clone();
        let mut n = 0;
        while anchors.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        anchors.insert(anchor);
    }
    anchors
}

/// Every link target of `text` outside code blocks (`[text](target)`, images too), with
/// its line.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    for (n, line) in prose_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after
                .find(|c: char| c == ')' || c.is_whitespace())
                .unwrap_or(after.len());
            targets.push((n, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    targets
}

/// `base/relative` with `..` and `.` folded, so that a link that climbs out of the
/// repository is seen doing so.
fn join(base: &Path, relative: &str) -> Option<PathBuf> {
    let mut path = PathBuf::new();
    for component in base.join(relative).components() {
        match component {
            Component::ParentDir => {
                if !path.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    Some(path)
}

#[test]
fn every_relative_link_between_the_pages_leads_somewhere() {
    let root = repo();
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        for (line, target) in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                Some(page.clone())
            } else {
                join(page.parent().unwrap_or(Path::new("")), path)
            };
            let Some(file) = file.filter(|f| root.join(f).exists()) else {
                broken.push(format!("{}:{line}: {target}: no such file", page.display()));
                continue;
            };
            if let Some(anchor) = anchor {
                let is_page = file.extension().is_some_and(|ext| ext == "md");
                if is_page && !anchors(&read(&file)).contains(anchor) {
                    broken.push(format!(
                        "{}:{line}: {target}: {} has no heading #{anchor}",
                        page.display(),
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(checked > 0, "no relative link found: is the scan broken?");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_scan_reads_run_ids_links_and_headings_as_intended() {
    let text = "run [`results/20261201-053311-mercurius`](results/20261201-053311-mercurius/summary.txt)\n\
                and run 20261201-055537, not 1234567890-123456; results/20261201-010445/tradeoff.svg.";
    let quotes = quoted_runs(text);
    let named: Vec<(usize, &str, Option<&str>)> = quotes
        .iter()
        .map(|q| (q.line, q.id.as_str(), q.folder.as_deref()))
        .collect();
    assert_eq!(
        named,
        [
            (1, "20261201-053311", Some("20261201-053311-mercurius")),
            (1, "20261201-053311", Some("20261201-053311-mercurius")),
            (2, "20261201-055537", None),
            (2, "20261201-010445", Some("20261201-010445")),
        ]
    );
    assert_eq!(
        link_targets("a [b](docs/x.md#y) ![c](d.svg)\n```\n[e](not-a-link)\n```\n"),
        [(1, "docs/x.md#y".to_string()), (1, "d.svg".to_string())]
    );
    let page = "# Top\n## The gateway's CPU per request\n```\n# not a heading\n```\n## Top\n### `loadgen matrix`\n";
    let made: Vec<String> = anchors(page).into_iter().collect();
    assert_eq!(
        made,
        [
            "loadgen-matrix",
            "the-gateways-cpu-per-request",
            "top",
            "top-1"
        ]
    );
    assert_eq!(
        join(Path::new("docs"), "../results/x/summary.md"),
        Some(PathBuf::from("results/x/summary.md"))
    );
    assert_eq!(join(Path::new("docs"), "../../outside"), None);
}
