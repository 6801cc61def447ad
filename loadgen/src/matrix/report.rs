//! `loadgen report`: (re)write run pages (`<run>/index.html`) and the results index
//! (`index.html` of the folder that holds the runs) from the files of the run folders.
//! The matrix calls it at the end of every run; `loadgen report` gives committed runs
//! their page, and `loadgen report --all results` all of them.
//!
//! This file reads the folders (summary, manifest, charts, reports, what scripts left)
//! and writes the pages; [`super::render::html`] makes the HTML.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::compare::load_summary;
use super::disturbance;
use super::manifest;
use super::reaper::INCOMPLETE;
use super::render::html::index::{self, Entry, Kind};
use super::render::html::run::{self, RunFiles};
use crate::cli::ReportArgs;

/// The charts of a run in the order its page shows them; other SVGs (not flamegraphs)
/// follow in name order.
const CHARTS: [&str; 4] = ["chart.svg", "tradeoff.svg", "overload.svg", "timeline.svg"];

/// The page's file name, in a run folder and in the results folder.
pub const PAGE: &str = "index.html";

/// Write `text` to `path` through a temporary file and a rename, so that a reader (or
/// a second run writing the index at the same time) never sees half a page.
fn write_atomic(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension(format!("html.tmp-{}", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

/// The names of the entries of `dir`, sorted (none when it cannot be read).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// What a matrix run's folder holds, for its page.
fn read_run(dir: &Path) -> anyhow::Result<RunFiles> {
    let summary = load_summary(dir)?;
    let manifest = manifest::load(dir)?;
    let all = names(dir);
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .with_context(|| format!("reading {}/{name}", dir.display()))
    };
    let mut charts = Vec::new();
    for name in CHARTS {
        if all.iter().any(|n| n == name) {
            charts.push((name.to_string(), read(name)?));
        }
    }
    for name in &all {
        if name.ends_with(".svg") && !name.starts_with("flame-") && !CHARTS.contains(&name.as_str())
        {
            charts.push((name.clone(), read(name)?));
        }
    }
    let mut reports = Vec::new();
    if all.iter().any(|n| n == "summary.md") {
        reports.push(("summary.md".to_string(), read("summary.md")?));
    }
    for name in &all {
        if name.ends_with(".md") && name != "summary.md" {
            reports.push((name.clone(), read(name)?));
        }
    }
    let mut files: Vec<String> = ["summary.json", "manifest.json", INCOMPLETE]
        .into_iter()
        .filter(|n| all.iter().any(|a| a == n))
        .map(String::from)
        .collect();
    for name in &all {
        let listed = files.contains(name);
        if !listed && [".json", ".csv", ".txt"].iter().any(|e| name.ends_with(e)) {
            files.push(name.clone());
        }
    }
    for sub in ["runs", "logs", "profiles"] {
        if dir.join(sub).is_dir() {
            files.push(format!("{sub}/"));
        }
    }
    let flamegraphs: BTreeSet<String> = all
        .iter()
        .filter(|n| n.starts_with("flame-") && n.ends_with(".svg"))
        .cloned()
        .collect();
    Ok(RunFiles {
        summary,
        manifest,
        charts,
        reports,
        files,
        flamegraphs,
        index: Some(format!("../{PAGE}")),
    })
}

/// Write `dir/index.html`, the page of the matrix run in `dir`; returns its path.
pub fn write_run_page(dir: &Path) -> anyhow::Result<PathBuf> {
    let files = read_run(dir)?;
    let path = dir.join(PAGE);
    write_atomic(&path, &run::page(&files))?;
    Ok(path)
}

/// `20261201-053550…` as `2026-12-01T05:35:50Z`.
fn timestamp_of_name(name: &str) -> Option<String> {
    let b = name.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    if !(digits(0..8) && b.get(8) == Some(&b'-') && digits(9..15)) {
        return None;
    }
    Some(format!(
        "{}-{}-{}T{}:{}:{}Z",
        &name[0..4],
        &name[4..6],
        &name[6..8],
        &name[9..11],
        &name[11..13],
        &name[13..15]
    ))
}

/// When the folder was last changed, for folders named otherwise.
fn timestamp_of_mtime(dir: &Path) -> Option<String> {
    let modified = std::fs::metadata(dir).and_then(|m| m.modified()).ok()?;
    Some(manifest::utc_stamps(modified).0)
}

fn machine_of(m: &manifest::Manifest) -> String {
    format!(
        "{} ({} cores)",
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.cores
    )
}

/// The index entry of a matrix run.
fn matrix_entry(name: &str, dir: &Path, all: &[String]) -> anyhow::Result<Entry> {
    let summary = load_summary(dir)?;
    let m = manifest::load(dir)?;
    let main = if all.iter().any(|n| n == PAGE) {
        PAGE
    } else {
        "summary.md"
    };
    Ok(Entry {
        id: name.to_string(),
        link: Some(format!("{name}/{main}")),
        kind: Kind::Matrix,
        experiment: summary.experiment.clone(),
        timestamp: m
            .as_ref()
            .map(|m| m.timestamp.clone())
            .or_else(|| timestamp_of_name(name)),
        commit: m.as_ref().and_then(|m| m.git.commit.clone()),
        dirty: m.as_ref().and_then(|m| m.git.dirty) == Some(true),
        machine: m.as_ref().map(machine_of),
        headline: run::headline(&summary),
        flags: disturbance::of(&summary)
            .into_iter()
            .map(|d| (d.severity, d.short.to_string()))
            .collect(),
        quick: summary.quick,
        shape: Some((summary.configs.len(), summary.rounds)),
    })
}

/// The index entry of a folder with a manifest and no summary: a run that stopped.
fn incomplete_entry(name: &str, dir: &Path, all: &[String]) -> Entry {
    let m = manifest::load(dir).ok().flatten();
    let experiment = m
        .as_ref()
        .and_then(|m| toml::from_str::<toml::Table>(&m.experiment).ok())
        .and_then(|t| t.get("name").and_then(|n| n.as_str()).map(String::from))
        .unwrap_or_else(|| "–".into());
    let marker = all.iter().any(|n| n == INCOMPLETE);
    let why = std::fs::read_to_string(dir.join(INCOMPLETE))
        .ok()
        .and_then(|t| t.lines().next().map(String::from));
    Entry {
        id: name.to_string(),
        link: Some(format!(
            "{name}/{}",
            if marker { INCOMPLETE } else { "manifest.json" }
        )),
        kind: Kind::Incomplete,
        experiment,
        timestamp: m
            .as_ref()
            .map(|m| m.timestamp.clone())
            .or_else(|| timestamp_of_name(name)),
        commit: m.as_ref().and_then(|m| m.git.commit.clone()),
        dirty: m.as_ref().and_then(|m| m.git.dirty) == Some(true),
        machine: m.as_ref().map(machine_of),
        headline: Some(why.unwrap_or_else(|| "stopped before its summary was written".into())),
        flags: vec![(disturbance::Severity::Warning, "incomplete".into())],
        quick: false,
        shape: None,
    }
}

/// The index entry of a folder a script wrote: its main file, and what its summary.txt
/// (or summary.json) says of the commit, the machine, a verdict and warnings.
fn script_entry(name: &str, dir: &Path, all: &[String]) -> Option<Entry> {
    let has = |n: &str| all.iter().any(|a| a == n);
    let main = ["summary.md", "soak.md", "summary.txt"]
        .into_iter()
        .find(|n| has(n))
        .map(String::from)
        .or_else(|| all.iter().find(|n| n.ends_with(".md")).cloned())?;
    let text = std::fs::read_to_string(dir.join("summary.txt")).unwrap_or_default();
    let mut commit = None;
    let mut dirty = false;
    if let Some(rest) = text.lines().next().and_then(|l| l.strip_prefix("commit ")) {
        let mut words = rest.split_whitespace();
        commit = words.next().map(String::from);
        dirty = words.next() == Some("(dirty)");
    }
    if commit.is_none() {
        if let Some(json) = std::fs::read_to_string(dir.join("summary.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        {
            commit = json["commit"].as_str().map(String::from);
            dirty = json["dirty"].as_bool() == Some(true);
        }
    }
    let machine = text
        .lines()
        .find_map(|l| l.strip_prefix("machine: "))
        .map(String::from);
    let headline = text
        .lines()
        .find(|l| l.contains("Verdict"))
        .map(|l| l.replace("**", ""));
    let warnings = text.lines().filter(|l| l.starts_with("warning:")).count();
    let experiment = match timestamp_of_name(name) {
        Some(_) => name.get(16..).filter(|s| !s.is_empty()).unwrap_or(name),
        None => name,
    };
    Some(Entry {
        id: name.to_string(),
        link: Some(format!("{name}/{main}")),
        kind: Kind::Script,
        experiment: experiment.to_string(),
        timestamp: timestamp_of_name(name).or_else(|| timestamp_of_mtime(dir)),
        commit,
        dirty,
        machine,
        headline,
        flags: if warnings > 0 {
            vec![(
                disturbance::Severity::Warning,
                format!("{warnings} warning(s) printed"),
            )]
        } else {
            vec![]
        },
        quick: false,
        shape: None,
    })
}

/// Whether `dir` holds a matrix run's summary (`loadgen.summary/…`).
fn is_matrix_run(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("summary.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| {
            v["schema"]
                .as_str()
                .map(|s| s.starts_with("loadgen.summary/"))
        })
        .unwrap_or(false)
}

/// Every run folder of `results` (symbolic links such as `latest` left out).
fn run_folders(results: &Path) -> Vec<(String, PathBuf)> {
    names(results)
        .into_iter()
        .map(|n| (n.clone(), results.join(&n)))
        .filter(|(_, p)| p.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .collect()
}

/// Write `results/index.html`: every run folder in `results`; returns its path.
pub fn write_index(results: &Path) -> anyhow::Result<PathBuf> {
    let mut entries = Vec::new();
    for (name, dir) in run_folders(results) {
        let all = names(&dir);
        if is_matrix_run(&dir) {
            // A folder that does not read is listed with why, not left out, and does not
            // keep the other runs from their index.
            entries.push(matrix_entry(&name, &dir, &all).unwrap_or_else(|e| {
                let mut entry = incomplete_entry(&name, &dir, &all);
                entry.headline = Some(format!("{e:#}"));
                entry.flags = vec![(disturbance::Severity::Error, "unreadable".into())];
                entry
            }));
        } else if all.iter().any(|n| n == "manifest.json") {
            entries.push(incomplete_entry(&name, &dir, &all));
        } else if let Some(e) = script_entry(&name, &dir, &all) {
            entries.push(e);
        }
    }
    let title = match results.file_name() {
        Some(n) => format!("Runs in {}/", n.to_string_lossy()),
        None => "Runs".to_string(),
    };
    let path = results.join(PAGE);
    write_atomic(&path, &index::page(&title, &entries))?;
    Ok(path)
}

/// The folder that holds the run folder `dir` (`.` for a bare name).
pub fn results_of(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Write a run's page and its results index (the end of `loadgen matrix` and `render`).
pub fn write_pages(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let page = write_run_page(dir)?;
    let index = write_index(&results_of(dir))?;
    Ok((page, index))
}

/// `loadgen report`.
pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let (dirs, results): (Vec<PathBuf>, Vec<PathBuf>) = match &args.all {
        Some(results) => {
            if !results.is_dir() {
                anyhow::bail!("--all {}: not a folder", results.display());
            }
            let dirs = run_folders(results)
                .into_iter()
                .map(|(_, p)| p)
                .filter(|p| is_matrix_run(p))
                .collect();
            (dirs, vec![results.clone()])
        }
        None => {
            let mut results: Vec<PathBuf> = Vec::new();
            for dir in &args.dirs {
                if !is_matrix_run(dir) {
                    anyhow::bail!(
                        "{}: no loadgen summary.json there (a run folder is results/RUN-ID; --all RESULTS does every run)",
                        dir.display()
                    );
                }
                let parent = results_of(dir);
                if !results.contains(&parent) {
                    results.push(parent);
                }
            }
            (args.dirs.clone(), results)
        }
    };
    let mut failed = Vec::new();
    for dir in &dirs {
        let charts = || -> anyhow::Result<()> {
            if args.charts {
                super::write_charts(dir, &load_summary(dir)?)?;
            }
            Ok(())
        };
        match charts().and_then(|()| write_run_page(dir)) {
            Ok(path) => eprintln!("loadgen report: {}", path.display()),
            Err(e) => {
                eprintln!("loadgen report: {}: {e:#}", dir.display());
                failed.push(dir.display().to_string());
            }
        }
    }
    for r in &results {
        eprintln!("loadgen report: {}", write_index(r)?.display());
    }
    if !failed.is_empty() {
        anyhow::bail!("no page for {}", failed.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_folder_names_give_their_time() {
        assert_eq!(
            timestamp_of_name("20261201-053311-mercurius").as_deref(),
            Some("2026-12-01T05:33:11Z")
        );
        assert_eq!(
            timestamp_of_name("20261201-053550").as_deref(),
            Some("2026-12-01T05:35:50Z")
        );
        assert_eq!(timestamp_of_name("first"), None);
        assert_eq!(timestamp_of_name("2026120-053550"), None);
    }

    #[test]
    fn a_folder_of_runs_gets_an_index_listing_script_runs_and_incomplete_ones() {
        let base = std::env::temp_dir().join(format!("loadgen-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let script = base.join("20261201-053311-mercurius");
        std::fs::create_dir_all(&script).unwrap();
        std::fs::write(
            script.join("summary.txt"),
            "commit 1cd8084a67b16510f17650e4d24791c0687965c7 (dirty)\nmachine: Xeon (2 cores)\n\
             warning: the machine was saturated\n**Verdict: passed** (bounded)\n",
        )
        .unwrap();
        let stopped = base.join("20261201-060000");
        std::fs::create_dir_all(&stopped).unwrap();
        std::fs::write(stopped.join(INCOMPLETE), "stopped by SIGTERM in round 1\n").unwrap();
        std::fs::write(
            stopped.join("manifest.json"),
            serde_json::json!({
                "schema": "loadgen.manifest/1", "run_id": "20261201-060000", "timestamp": "2026-12-01T06:00:00Z",
                "git": {"commit": null, "dirty": null}, "rustc": "rustc", "loadgen_version": "0.1.0",
                "cpu_model": null, "cores": 2, "kernel": null, "experiment_file": "e.toml",
                "experiment": "name = \"stampede\"\n", "arguments": [], "settings": {}, "binaries": []
            })
            .to_string(),
        )
        .unwrap();
        std::fs::create_dir_all(base.join("empty")).unwrap();
        let broken = base.join("20261201-050000");
        std::fs::create_dir_all(&broken).unwrap();
        std::fs::write(
            broken.join("summary.json"),
            r#"{"schema": "loadgen.summary/1"}"#,
        )
        .unwrap();
        std::os::unix::fs::symlink("20261201-060000", base.join("latest")).unwrap();
        let path = write_index(&base).unwrap();
        let html = std::fs::read_to_string(path).unwrap();
        assert!(
            html.contains("href=\"20261201-053311-mercurius/summary.txt\""),
            "{html}"
        );
        assert!(
            html.contains(">mercurius <span class=\"badge quiet\">script</span>"),
            "{html}"
        );
        assert!(html.contains("<code>1cd8084a67</code> (dirty)"), "{html}");
        assert!(
            html.contains("Verdict: passed (bounded)") && html.contains("1 warning(s) printed"),
            "{html}"
        );
        assert!(
            html.contains("href=\"20261201-060000/INCOMPLETE\""),
            "{html}"
        );
        assert!(
            html.contains(">stampede <span class=\"badge quiet\">incomplete</span>"),
            "{html}"
        );
        assert!(html.contains("stopped by SIGTERM in round 1"), "{html}");
        assert!(
            !html.contains(">latest<") && !html.contains(">empty<"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"badge error\">unreadable</span>")
                && html.contains("is not a loadgen summary"),
            "{html}"
        );
        // Newest first.
        assert!(html.find("20261201-060000").unwrap() < html.find("20261201-053311").unwrap());
        std::fs::remove_dir_all(&base).ok();
    }
}
