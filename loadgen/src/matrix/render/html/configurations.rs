//! The configurations' table of a run's page: per configuration what it runs (its
//! description, each process's arguments, gateways, Redis, network), its headline
//! figures with their rounds' range, how busy the rest of the machine was, its failed
//! requests, and its flamegraph one click away (or why it has none).

use std::fmt::Write as _;

use super::page::{badge, escape, link, shell_word, table};
use super::run::RunFiles;
use crate::matrix::disturbance::CONTENDED_CORES;
use crate::matrix::summary::{ConfigSummary, Spread};

fn spread(s: Option<Spread>, rounds: u32, digits: usize) -> String {
    match s {
        Some(s) if rounds > 1 => format!(
            "{:.digits$} <small>({:.digits$}–{:.digits$})</small>",
            s.median, s.min, s.max
        ),
        Some(s) => format!("{:.digits$}", s.median),
        None => "–".into(),
    }
}

/// The configurations: what each runs, its figures, its flamegraph.
pub fn table_of(run: &RunFiles) -> String {
    let s = &run.summary;
    let rows: Vec<Vec<String>> = s.configs.iter().map(|c| row(run, c)).collect();
    let baseline = format!("vs {}", s.baseline);
    table(
        &[
            "config",
            "what it runs",
            "req/s",
            &baseline,
            "p99 (ms)",
            "gateway CPU µs/req",
            "rest of the machine (cores)",
            "failed requests",
            "flamegraph",
        ],
        &[false, false, true, true, true, true, true, true, false],
        &rows,
    )
}

fn row(run: &RunFiles, c: &ConfigSummary) -> Vec<String> {
    let s = &run.summary;
    let mut what = String::new();
    if let Some(d) = &c.description {
        let _ = write!(what, "{}<br>", escape(d));
    }
    let mut processes: Vec<(&str, &Vec<String>)> = vec![
        ("gateway", &c.gateway_args),
        ("user-service", &c.user_service_args),
        ("post-service", &c.post_service_args),
    ];
    processes.extend(c.subgraph_args.iter().map(|(n, a)| (n.as_str(), a)));
    for (who, args) in processes {
        if !args.is_empty() || who == "gateway" {
            let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
            let _ = write!(
                what,
                "<code>{} {}</code><br>",
                escape(who),
                escape(&words.join(" "))
            );
        }
    }
    let mut extras = Vec::new();
    if c.gateways > 1 {
        extras.push(format!("{} gateways", c.gateways));
    }
    if c.redis {
        extras.push("own redis-server".into());
    }
    if !c.network.is_empty() {
        extras.push(format!("network: {}", c.network));
    }
    if let Some(b) = &c.baseline {
        extras.push(format!("baseline {b}"));
    }
    if !extras.is_empty() {
        let _ = write!(what, "<small>{}</small>", escape(&extras.join("; ")));
    }
    let ratio = match c.ratio {
        Some(r) if s.rounds > 1 => format!(
            "{:.2}x <small>({:.2}–{:.2})</small>",
            r.median, r.min, r.max
        ),
        Some(r) => format!("{:.2}x", r.median),
        None => "–".into(),
    };
    let cpu = c
        .median
        .cpu_us_per_request
        .get("gateway")
        .map_or("–".into(), |us| format!("{us:.1}"));
    let rest = match c.median.other_cores {
        Some(r) if r > CONTENDED_CORES => {
            format!("<strong>{r:.2}</strong> {}", badge("warning", "busy"))
        }
        Some(r) => format!("{r:.2}"),
        None => "–".into(),
    };
    let errors = match crate::matrix::error_budget::over_rounds(c) {
        Some((total, rate, classes)) => format!(
            "<strong>{total}</strong> <small>({}: {})</small>",
            crate::matrix::error_budget::percent(rate),
            escape(&classes)
        ),
        None => "0".into(),
    };
    let flame = match &c.flamegraph {
        Some(f) if run.flamegraphs.contains(f) => {
            let coverage = c.median.profile_coverage.map_or(String::new(), |x| {
                format!(" <small>({:.0}% of CPU)</small>", x * 100.0)
            });
            format!("{}{coverage}", link(f, f))
        }
        Some(f) => format!("{} (file missing)", escape(f)),
        None => format!(
            "<small>{}</small>",
            escape(c.flamegraph_note.as_deref().unwrap_or("none"))
        ),
    };
    vec![
        format!("<strong>{}</strong>", escape(&c.name)),
        what,
        spread(c.requests_per_sec, s.rounds, 0),
        ratio,
        spread(c.p99_ms, s.rounds, 1),
        cpu,
        rest,
        errors,
        flame,
    ]
}
