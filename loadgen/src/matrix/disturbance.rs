//! What disturbed a run: the facts a reader must see before any figure, read from the
//! summary — the rest of the machine busier than [`CONTENDED_CORES`], an open-loop rate
//! not held, requests without a usable answer, wrong answers, loadgen as a possible
//! bottleneck, a cache store that failed. The run page puts them in a warning at its
//! top, the results index marks the run, and `loadgen compare` names them for both
//! runs.

use crate::matrix::summary::{ConfigSummary, Summary};

/// Above this many busy cores outside the run's own processes, a configuration's
/// figures are flagged as taken on a contended machine.
pub const CONTENDED_CORES: f64 = 0.3;

/// How bad a disturbance is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The figures may be off (shared machine, rate not held, errors).
    Warning,
    /// An answer could not be right: the run's figures do not stand.
    Error,
}

/// One kind of disturbance and the configurations it touched.
#[derive(Debug, Clone, PartialEq)]
pub struct Disturbance {
    pub severity: Severity,
    /// A few words for an index (`machine busy`).
    pub short: &'static str,
    /// A sentence saying what it means.
    pub what: String,
    /// Per configuration: its name and the figures.
    pub configs: Vec<(String, String)>,
}

/// Every disturbance of the run, errors first.
pub fn of(summary: &Summary) -> Vec<Disturbance> {
    let mut found = vec![
        wrong_answers(summary),
        busy_machine(summary),
        rate_not_held(summary),
        failed_requests(summary),
        loadgen_bottleneck(summary),
        storage_errors(summary),
    ];
    found.retain(|d| !d.configs.is_empty());
    found.sort_by_key(|d| std::cmp::Reverse(d.severity));
    found
}

fn per_config(
    summary: &Summary,
    detail: impl Fn(&ConfigSummary) -> Option<String>,
) -> Vec<(String, String)> {
    summary
        .configs
        .iter()
        .filter_map(|c| detail(c).map(|d| (c.name.clone(), d)))
        .collect()
}

fn wrong_answers(summary: &Summary) -> Disturbance {
    Disturbance {
        severity: Severity::Error,
        short: "wrong answers",
        what: "answers that could not be right (another caller's data, another entity's): \
               the figures of these configurations do not stand"
            .into(),
        configs: per_config(summary, |c| {
            c.median
                .wrong_answers
                .filter(|n| *n > 0)
                .map(|n| format!("{n} wrong answer(s) over the rounds"))
        }),
    }
}

/// The rest of the machine in one round, in cores.
fn other_cores(m: &crate::matrix::summary::Measurement) -> Option<f64> {
    let ours: f64 = m.cpu.iter().filter_map(|p| p.cores).sum();
    m.machine_busy_cores.map(|busy| (busy - ours).max(0.0))
}

fn busy_machine(summary: &Summary) -> Disturbance {
    Disturbance {
        severity: Severity::Warning,
        short: "machine busy",
        what: format!(
            "the rest of the machine (other work, perf, redis-server) held more than \
             {CONTENDED_CORES} cores: these configurations shared the CPU, so their req/s and \
             ratios are not the lab's alone (CPU per request moves less)"
        ),
        configs: per_config(summary, |c| {
            let median = c.median.other_cores.filter(|r| *r > CONTENDED_CORES)?;
            let busy = c
                .rounds
                .iter()
                .filter(|m| other_cores(m).is_some_and(|r| r > CONTENDED_CORES))
                .count();
            Some(format!(
                "{median:.2} cores (median); {busy} of {} round(s) above {CONTENDED_CORES}",
                c.rounds.len()
            ))
        }),
    }
}

fn rate_not_held(summary: &Summary) -> Disturbance {
    Disturbance {
        severity: Severity::Warning,
        short: "rate not held",
        what: "open loop: loadgen did not send at the rate asked for, so the load offered \
               was less than the configuration says"
            .into(),
        configs: per_config(summary, |c| {
            let rounds: Vec<String> = c
                .rounds
                .iter()
                .filter_map(|m| {
                    let o = m.open_loop.as_ref().filter(|o| !o.rate_held)?;
                    Some(format!(
                        "round {}: sent {:.0}/s of {:.0}/s, {} never sent",
                        m.round, o.sent_rate, o.target_rate, o.missed
                    ))
                })
                .collect();
            (!rounds.is_empty()).then(|| rounds.join("; "))
        }),
    }
}

fn failed_requests(summary: &Summary) -> Disturbance {
    Disturbance {
        severity: Severity::Warning,
        short: "failed requests",
        what: "requests without a usable answer (transport errors, timeouts, non-2xx, GraphQL \
               errors in 2xx answers), summed over the rounds — expected where the experiment \
               injects faults or sheds load, a defect anywhere else"
            .into(),
        configs: per_config(summary, |c| {
            let (n, share, classes) = crate::matrix::error_budget::over_rounds(c)?;
            Some(format!(
                "{n} request(s), {} of those made: {classes}",
                crate::matrix::error_budget::percent(share)
            ))
        }),
    }
}

fn loadgen_bottleneck(summary: &Summary) -> Disturbance {
    Disturbance {
        severity: Severity::Warning,
        short: "loadgen saturated",
        what: "a loadgen worker thread was busy nearly all the window: the load generator \
               may have limited the req/s"
            .into(),
        configs: per_config(summary, |c| {
            let n = c
                .rounds
                .iter()
                .filter(|m| m.loadgen_may_be_bottleneck)
                .count();
            (n > 0).then(|| format!("{n} of {} round(s)", c.rounds.len()))
        }),
    }
}

fn storage_errors(summary: &Summary) -> Disturbance {
    Disturbance {
        severity: Severity::Warning,
        short: "storage errors",
        what: "the cache's storage failed in the measured windows \
               (gateway_*storage_errors_total)"
            .into(),
        configs: per_config(summary, |c| {
            let n: f64 = c.rounds.iter().filter_map(|m| m.storage_errors).sum();
            (n > 0.0).then(|| format!("{n:.0} failure(s)"))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::sampling::ProcessCpu;
    use crate::matrix::summary::fixtures::{self, measurement};
    use crate::matrix::summary::OpenLoopFigures;

    /// A round on a machine whose busy cores were not read.
    fn calm(config: &str) -> crate::matrix::summary::Measurement {
        let mut m = measurement(1, config, 1000.0, 10.0);
        m.machine_busy_cores = None;
        m
    }

    #[test]
    fn a_quiet_run_has_no_disturbance() {
        let s = fixtures::summary("seed", "a", vec![calm("a")]);
        assert_eq!(of(&s), vec![]);
    }

    #[test]
    fn each_disturbance_names_its_configurations_and_wrong_answers_come_first() {
        let quiet = calm("quiet");
        let mut busy = measurement(1, "busy", 1000.0, 10.0);
        busy.machine_busy_cores = Some(1.9);
        busy.cpu = vec![ProcessCpu {
            name: "gateway".into(),
            cpu_seconds: Some(10.0),
            cores: Some(1.0),
            us_per_request: Some(100.0),
        }];
        let mut open = calm("open");
        open.open_loop = Some(OpenLoopFigures {
            target_rate: 5000.0,
            sent_rate: 4200.0,
            missed: 8000,
            rate_held: false,
        });
        open.errors.non_2xx = 30;
        open.errors.shed = 30;
        let mut wrong = calm("wrong");
        wrong.loadgen_may_be_bottleneck = true;
        wrong.storage_errors = Some(2.0);
        let mut s = fixtures::summary("e", "quiet", vec![quiet, busy, open, wrong]);
        s.configs[3].median.wrong_answers = Some(3);
        let found = of(&s);
        let shorts: Vec<&str> = found.iter().map(|d| d.short).collect();
        assert_eq!(
            shorts,
            [
                "wrong answers",
                "machine busy",
                "rate not held",
                "failed requests",
                "loadgen saturated",
                "storage errors"
            ]
        );
        assert_eq!(found[0].severity, Severity::Error);
        assert_eq!(
            found[1].configs,
            [(
                "busy".to_string(),
                "0.90 cores (median); 1 of 1 round(s) above 0.3".to_string()
            )]
        );
        assert_eq!(
            found[2].configs[0].1,
            "round 1: sent 4200/s of 5000/s, 8000 never sent"
        );
        assert_eq!(
            found[3].configs[0],
            (
                "open".to_string(),
                "30 request(s), 0.3% of those made: shed (503) 30".to_string()
            )
        );
        assert!(found.iter().all(|d| d.configs.len() == 1), "{found:?}");
    }
}
