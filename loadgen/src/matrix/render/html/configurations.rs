//! The configurations' table of a run's page: per configuration what it runs (its
//! description, each process's arguments, gateways, Redis, network), its headline
//! figures with their rounds' range and their ratios' 95% intervals against the
//! baseline, how busy the rest of the machine was, its failed
//! requests, and its flamegraph one click away (or why it has none).

use maud::{html, Markup};

use super::page::{badge, link, shell_word, table};
use super::run::RunFiles;
use crate::matrix::disturbance::CONTENDED_CORES;
use crate::matrix::summary::{ConfigSummary, Spread};

fn spread(s: Option<Spread>, rounds: u32, digits: usize) -> Markup {
    match s {
        Some(s) if rounds > 1 => html! {
            (format!("{:.digits$}", s.median)) " "
            small { (format!("({:.digits$}–{:.digits$})", s.min, s.max)) }
        },
        Some(s) => html! { (format!("{:.digits$}", s.median)) },
        None => html! { "–" },
    }
}

/// The configurations: what each runs, its figures, its flamegraph.
pub fn table_of(run: &RunFiles) -> Markup {
    let s = &run.summary;
    let rows: Vec<Vec<Markup>> = s.configs.iter().map(|c| row(run, c)).collect();
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

fn row(run: &RunFiles, c: &ConfigSummary) -> Vec<Markup> {
    let s = &run.summary;
    let mut processes: Vec<(&str, &Vec<String>)> = vec![
        ("gateway", &c.gateway_args),
        ("user-service", &c.user_service_args),
        ("post-service", &c.post_service_args),
    ];
    processes.extend(c.subgraph_args.iter().map(|(n, a)| (n.as_str(), a)));
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
    let what = html! {
        @if let Some(d) = &c.description {
            (d) br;
        }
        @if let Some(peer) = &c.peer {
            "peer: " code { (peer.describe()) } br;
            small { (peer.settings) } br;
        }
        @for (who, args) in processes {
            @if !args.is_empty() || (who == "gateway" && c.peer.is_none()) {
                @let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
                code { (who) " " (words.join(" ")) } br;
            }
        }
        @if !extras.is_empty() {
            small { (extras.join("; ")) }
        }
    };
    let against = c.against_baseline.as_ref();
    let interval = |i: Option<&crate::matrix::confidence::Interval>| match i {
        Some(i) => html! {
            (format!("{:.2}x", i.estimate)) " "
            small title="95% interval over the rounds, paired with the baseline's" {
                (format!("[{:.2}–{:.2}]", i.low, i.high))
            }
        },
        None => html! { "–" },
    };
    let cpu_ratio = against.and_then(|a| a.gateway_cpu_per_request.as_ref());
    let ratio = match (against.and_then(|a| a.requests_per_sec.as_ref()), c.ratio) {
        (Some(i), _) => interval(Some(i)),
        (None, r) => match r {
            Some(r) if s.rounds > 1 => html! {
                (format!("{:.2}x", r.median)) " "
                small { (format!("({:.2}–{:.2})", r.min, r.max)) }
            },
            Some(r) => html! { (format!("{:.2}x", r.median)) },
            None => html! { "–" },
        },
    };
    let cpu = c
        .median
        .cpu_us_per_request
        .get("gateway")
        .map_or("–".into(), |us| format!("{us:.1}"));
    let rest = match c.median.other_cores {
        Some(r) if r > CONTENDED_CORES => {
            html! { strong { (format!("{r:.2}")) } " " (badge("warning", "busy")) }
        }
        Some(r) => html! { (format!("{r:.2}")) },
        None => html! { "–" },
    };
    let errors = match crate::matrix::error_budget::over_rounds(c) {
        Some((total, rate, classes)) => html! {
            strong { (total) } " "
            small { "(" (crate::matrix::error_budget::percent(rate)) ": " (classes) ")" }
        },
        None => html! { "0" },
    };
    let flame = match &c.flamegraph {
        Some(f) if run.flamegraphs.contains(f) => html! {
            (link(f, f))
            @if let Some(x) = c.median.profile_coverage {
                " " small { (format!("({:.0}% of CPU)", x * 100.0)) }
            }
            @if let Some(d) = c.flamegraph_diff.as_ref().filter(|d| run.flamegraphs.contains(*d)) {
                br; (link(d, "against the baseline")) " " small { "(per request)" }
            }
        },
        Some(f) => html! { (f) " (file missing)" },
        None => html! { small { (c.flamegraph_note.as_deref().unwrap_or("none")) } },
    };
    vec![
        html! { strong { (c.name) } },
        what,
        spread(c.requests_per_sec, s.rounds, 0),
        ratio,
        spread(c.p99_ms, s.rounds, 1),
        html! {
            (cpu)
            @if cpu_ratio.is_some() {
                br; small { "vs baseline " } (interval(cpu_ratio))
            }
        },
        rest,
        errors,
        flame,
    ]
}

#[cfg(test)]
mod tests {
    use crate::matrix::render::html::run::RunFiles;
    use crate::matrix::summary::fixtures::run_of;

    #[test]
    fn ratios_carry_their_intervals_and_the_differential_flamegraph_is_linked() {
        let mut s = run_of(
            "r",
            &[
                ("no-cache", &[1000.0, 1100.0, 900.0]),
                ("ttl-0", &[4000.0, 4500.0, 3500.0]),
            ],
        );
        for c in &mut s.configs {
            c.flamegraph = Some(format!("flame-{}.svg", c.name));
        }
        s.configs[1].flamegraph_diff = Some("flame-diff-ttl-0.svg".into());
        let run = RunFiles {
            summary: s,
            manifest: None,
            charts: vec![],
            reports: vec![],
            files: vec![],
            flamegraphs: [
                "flame-no-cache.svg",
                "flame-ttl-0.svg",
                "flame-diff-ttl-0.svg",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            index: None,
        };
        let html = super::table_of(&run).into_string();
        // req/s 3.99x [3.75–4.25] against no-cache; CPU per request its inverse.
        assert!(html.contains("3.99x <small title=\"95% interval"), "{html}");
        assert!(html.contains("[3.75–4.25]</small>"), "{html}");
        assert!(html.contains("vs baseline </small>0.25x"), "{html}");
        assert!(
            html.contains("<a href=\"flame-diff-ttl-0.svg\">against the baseline</a>"),
            "{html}"
        );
    }
}
