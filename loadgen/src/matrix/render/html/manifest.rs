//! The manifest section of a run's page: what traces the run back to its code,
//! toolchain, machine and inputs — commit, the command, rounds and windows, CPU, kernel,
//! rustc, the binaries, and the experiment file as it was.

use maud::{html, Markup};

use super::page::{badge, shell_word};
use crate::matrix::manifest::Manifest;

/// `2026-12-01T05:35:50Z` as `2026-12-01 05:35:50 UTC`.
pub fn date_of(timestamp: &str) -> String {
    match timestamp.strip_suffix('Z') {
        Some(t) => format!("{} UTC", t.replacen('T', " ", 1)),
        None => timestamp.to_string(),
    }
}

/// The manifest as a table, or a sentence saying the folder has none.
pub fn table_of(manifest: Option<&Manifest>) -> Markup {
    let Some(m) = manifest else {
        return html! {
            p { "No manifest.json in this folder: its commit, machine and command are not recorded." }
        };
    };
    let commit = match (&m.git.commit, m.git.dirty) {
        (Some(c), Some(true)) => html! { code { (c) } " " (badge("warning", "dirty tree")) },
        (Some(c), _) => html! { code { (c) } },
        (None, _) => html! { "not in a git repository" },
    };
    let command: Vec<String> = m.arguments.iter().map(|a| shell_word(a)).collect();
    let settings = &m.settings;
    let setting = |key: &str| match settings.get(key) {
        Some(serde_json::Value::Number(n)) => n.as_f64().map_or(n.to_string(), |f| f.to_string()),
        Some(v) => v.to_string(),
        None => "–".to_string(),
    };
    let experiment_file = m.experiment_file.display().to_string();
    let mut rows = vec![
        ("run", html! { (m.run_id) }),
        ("started", html! { (date_of(&m.timestamp)) }),
        ("commit", commit),
        ("command", html! { code { (command.join(" ")) } }),
        ("experiment file", html! { code { (experiment_file) } }),
        (
            "rounds, window, warm-up",
            html! {
                (setting("rounds")) " round(s), " (setting("duration_s")) " s measured after "
                (setting("warmup_s")) " s warm-up"
                @if settings.get("quick").and_then(|q| q.as_bool()) == Some(true) {
                    " (--quick)"
                }
            },
        ),
        (
            "machine",
            html! {
                (m.cpu_model.as_deref().unwrap_or("unknown CPU")) " (" (m.cores) " cores)"
            },
        ),
        (
            "kernel",
            html! { (m.kernel.as_deref().unwrap_or("unknown")) },
        ),
        ("rustc", html! { (m.rustc) }),
        ("loadgen", html! { (m.loadgen_version) }),
    ];
    for b in &m.binaries {
        let size = b
            .size_bytes
            .map_or("–".into(), |s| format!("{:.1} MiB", s as f64 / 1048576.0));
        let modified = b.modified_unix_s.map_or("–".into(), |t| {
            date_of(
                &crate::matrix::manifest::utc_stamps(
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(t),
                )
                .0,
            )
        });
        rows.push((
            "binary",
            html! {
                (b.name) " " code { (b.path.display().to_string()) } " "
                small { (size) ", built " (modified) }
            },
        ));
    }
    html! {
        div class="table" {
            table { tbody { @for (k, v) in rows { tr { th { (k) } td { (v) } } } } }
        }
        details {
            summary { "The experiment file as it was (" (experiment_file) ")" }
            pre { (m.experiment) }
        }
    }
}
