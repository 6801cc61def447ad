//! The manifest section of a run's page: what traces the run back to its code,
//! toolchain, machine and inputs — commit, the command, rounds and windows, CPU, kernel,
//! rustc, the binaries, and the experiment file as it was.

use std::fmt::Write as _;

use super::page::{badge, escape, shell_word};
use crate::matrix::manifest::Manifest;

/// `2026-12-01T05:35:50Z` as `2026-12-01 05:35:50 UTC`.
pub fn date_of(timestamp: &str) -> String {
    match timestamp.strip_suffix('Z') {
        Some(t) => format!("{} UTC", t.replacen('T', " ", 1)),
        None => timestamp.to_string(),
    }
}

/// The manifest as a table, or a sentence saying the folder has none.
pub fn table_of(manifest: Option<&Manifest>) -> String {
    let Some(m) = manifest else {
        return "<p>No manifest.json in this folder: its commit, machine and command are not recorded.</p>".into();
    };
    let commit = match (&m.git.commit, m.git.dirty) {
        (Some(c), Some(true)) => format!(
            "<code>{}</code> {}",
            escape(c),
            badge("warning", "dirty tree")
        ),
        (Some(c), _) => format!("<code>{}</code>", escape(c)),
        (None, _) => "not in a git repository".into(),
    };
    let command: Vec<String> = m.arguments.iter().map(|a| shell_word(a)).collect();
    let settings = &m.settings;
    let setting = |key: &str| match settings.get(key) {
        Some(serde_json::Value::Number(n)) => n.as_f64().map_or(n.to_string(), |f| f.to_string()),
        Some(v) => v.to_string(),
        None => "–".to_string(),
    };
    let mut rows = vec![
        ("run", escape(&m.run_id)),
        ("started", escape(&date_of(&m.timestamp))),
        ("commit", commit),
        (
            "command",
            format!("<code>{}</code>", escape(&command.join(" "))),
        ),
        (
            "experiment file",
            format!(
                "<code>{}</code>",
                escape(&m.experiment_file.display().to_string())
            ),
        ),
        (
            "rounds, window, warm-up",
            escape(&format!(
                "{} round(s), {} s measured after {} s warm-up{}",
                setting("rounds"),
                setting("duration_s"),
                setting("warmup_s"),
                if settings.get("quick").and_then(|q| q.as_bool()) == Some(true) {
                    " (--quick)"
                } else {
                    ""
                }
            )),
        ),
        (
            "machine",
            escape(&format!(
                "{} ({} cores)",
                m.cpu_model.as_deref().unwrap_or("unknown CPU"),
                m.cores
            )),
        ),
        ("kernel", escape(m.kernel.as_deref().unwrap_or("unknown"))),
        ("rustc", escape(&m.rustc)),
        ("loadgen", escape(&m.loadgen_version)),
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
            format!(
                "{} <code>{}</code> <small>{size}, built {}</small>",
                escape(&b.name),
                escape(&b.path.display().to_string()),
                escape(&modified)
            ),
        ));
    }
    let mut out = String::from("<div class=\"table\"><table><tbody>");
    for (k, v) in rows {
        let _ = write!(out, "<tr><th>{}</th><td>{v}</td></tr>", escape(k));
    }
    out.push_str("</tbody></table></div>");
    let _ = write!(
        out,
        "<details><summary>The experiment file as it was ({})</summary><pre>{}</pre></details>",
        escape(&m.experiment_file.display().to_string()),
        escape(&m.experiment)
    );
    out
}
