//! The bench report: the JSON object `--json` prints, and the text a person reads.
//!
//! The JSON schema is documented in `loadgen/README.md`; [`BenchReport`] is its source
//! of truth, and the matrix runner stores the same object for every measured run.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::bench::engine::{BenchPlan, BenchResult, LoadgenCpu, StopRule};
use crate::bench::recorder::{ErrorCounts, LatencySummary};
use crate::bench::timeline::Second;
use crate::workload::WorkloadReport;

/// Version tag of the JSON object, bumped on incompatible changes.
pub const SCHEMA: &str = "loadgen.bench/1";
/// Open loop: the rate counts as held when the window's send rate reaches this fraction
/// of the target and no scheduled request was missed.
pub const RATE_HELD_FRACTION: f64 = 0.95;

/// One benchmark's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub schema: String,
    /// The first URL loaded (the only one, unless `--url` was repeated).
    pub url: String,
    /// Every URL loaded; connection `i` went to `urls[i % urls.len()]`.
    #[serde(default)]
    pub urls: Vec<String>,
    pub method: String,
    /// `--unique-literals`: every request's `{{n}}` was a number unique in the run.
    #[serde(default)]
    pub unique_literals: bool,
    /// `"closed"` or `"open"`.
    pub mode: String,
    pub connections: usize,
    pub threads: usize,
    pub warmup_s: f64,
    /// Length of the measured window in seconds.
    pub duration_s: f64,
    /// Responses received in the window (any status; errors without a response excluded).
    pub requests: u64,
    pub requests_per_sec: f64,
    /// The bytes of one request as sent (head and body) when every request is the same
    /// (no workload, no numbered literals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    /// Response body bytes received in the window.
    pub bytes: u64,
    pub bytes_per_sec: f64,
    /// Latency of the responses; in open loop, from the intended send time.
    pub latency_ms: LatencySummary,
    pub errors: ErrorCounts,
    /// 2xx responses without GraphQL errors in the window, per second.
    #[serde(default)]
    pub goodput_per_sec: f64,
    /// Latency of those responses alone (in open loop, from the intended send time):
    /// what the requests a server admitted and served met.
    #[serde(default)]
    pub ok_latency_ms: LatencySummary,
    /// Answers with GraphQL errors, counted per place of an error in the answer
    /// (`me.topPosts`, `topPosts[].author.name`, `(no path)`).
    #[serde(default)]
    pub error_paths: std::collections::BTreeMap<String, u64>,
    /// Per place of `error_paths`, the message of the first error seen there.
    #[serde(default)]
    pub error_examples: std::collections::BTreeMap<String, String>,
    /// Present in open-loop runs (`--rate`).
    pub open_loop: Option<OpenLoopReport>,
    pub loadgen_cpu: LoadgenCpu,
    /// With a workload: per operation, and the freshness of every checked read.
    #[serde(default)]
    pub workload: Option<WorkloadReport>,
    /// The window second by second (whole seconds of a window of fixed length).
    #[serde(default)]
    pub timeline: Vec<Second>,
}

/// Open-loop figures: the schedule and the uncorrected view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenLoopReport {
    /// Requested rate, requests per second.
    pub target_rate: f64,
    /// Requests whose intended send time fell in the window.
    pub scheduled: u64,
    /// Requests actually sent in the window, per second.
    pub sent_rate: f64,
    /// Scheduled requests with neither a response nor an error by the drain deadline.
    pub missed: u64,
    /// Whether the schedule was kept (see [`RATE_HELD_FRACTION`]).
    pub rate_held: bool,
    /// Latency from the actual send, as a closed-loop tool would have measured it.
    pub uncorrected_latency_ms: LatencySummary,
    /// How late sends were against their intended time.
    pub send_lag_ms: LatencySummary,
}

impl BenchReport {
    pub fn new(plan: &BenchPlan, result: &BenchResult) -> BenchReport {
        let r = &result.recorder;
        let seconds = result.elapsed.as_secs_f64();
        let per_second = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        let open_loop = match (plan.rate, &r.schedule) {
            (Some(target_rate), Some(s)) => {
                let window = match plan.stop {
                    StopRule::After(d) => d.as_secs_f64(),
                    StopRule::Requests(n) => n as f64 / target_rate,
                };
                let sent_rate = if window > 0.0 {
                    s.sent_in_window as f64 / window
                } else {
                    0.0
                };
                Some(OpenLoopReport {
                    target_rate,
                    scheduled: s.scheduled,
                    sent_rate,
                    missed: result.missed,
                    rate_held: result.missed == 0 && sent_rate >= RATE_HELD_FRACTION * target_rate,
                    uncorrected_latency_ms: LatencySummary::from_histogram(&s.uncorrected),
                    send_lag_ms: LatencySummary::from_histogram(&s.send_lag),
                })
            }
            _ => None,
        };
        let urls: Vec<String> = plan.templates.iter().map(|t| t.url.clone()).collect();
        BenchReport {
            schema: SCHEMA.to_string(),
            url: plan.templates[0].url.clone(),
            method: plan.templates[0].method.to_string(),
            unique_literals: plan.templates[0].numbered.is_some(),
            mode: if plan.rate.is_some() {
                "open"
            } else {
                "closed"
            }
            .to_string(),
            connections: plan.connections,
            threads: plan.effective_threads(),
            warmup_s: plan.warmup.as_secs_f64(),
            duration_s: seconds,
            requests: r.responses,
            requests_per_sec: per_second(r.responses),
            request_bytes: (plan.workload.is_none() && plan.templates[0].numbered.is_none()).then(
                || {
                    let one = plan.templates[0].build();
                    (one.head.len() + one.body.len()) as u64
                },
            ),
            bytes: r.body_bytes,
            bytes_per_sec: per_second(r.body_bytes),
            latency_ms: LatencySummary::from_histogram(&r.latency),
            errors: r.errors,
            goodput_per_sec: per_second(r.ok),
            ok_latency_ms: LatencySummary::from_histogram(&r.ok_latency),
            error_paths: r.error_paths.clone(),
            error_examples: r.error_examples.clone(),
            open_loop,
            loadgen_cpu: result.cpu.clone(),
            workload: match (&plan.workload, &result.freshness) {
                (Some(w), Some(f)) => Some(f.report(w, seconds, &urls)),
                _ => None,
            },
            urls,
            timeline: match (&r.timeline, plan.stop) {
                (Some(t), StopRule::After(d)) => t.seconds(d.as_secs() as usize),
                _ => Vec::new(),
            },
        }
    }

    /// Every warning a reader must see: loadgen saturation and an unheld rate.
    pub fn warnings(&self) -> Vec<String> {
        let mut all = self.loadgen_cpu.warnings.clone();
        if let Some(o) = &self.open_loop {
            if !o.rate_held {
                all.push(format!(
                    "could not hold the rate: {:.1} of {:.1} req/s sent in the window, {} scheduled \
                     request(s) missed; latency is corrected for the backlog",
                    o.sent_rate, o.target_rate, o.missed
                ));
            }
        }
        if self.requests == 0 {
            all.push("no response was received in the measured window".to_string());
        }
        if let Some(w) = self.workload.as_ref().filter(|w| w.wrong_answers > 0) {
            all.push(format!(
                "WRONG ANSWERS: {} answer(s) could not be right, e.g. {}",
                w.wrong_answers,
                w.wrong_answer_examples.first().map_or("", String::as_str)
            ));
        }
        all
    }

    /// The report as text, for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let plural = |n: usize, word: &str| {
            if n == 1 {
                format!("1 {word}")
            } else {
                format!("{n} {word}s")
            }
        };
        let threads = plural(self.threads, "thread");
        let connections = plural(self.connections, "connection");
        if self.urls.len() > 1 {
            let _ = writeln!(
                out,
                "Target       {} {} (connections round robin over {} URLs)",
                self.method,
                self.urls.join(", "),
                self.urls.len()
            );
        } else {
            let _ = writeln!(out, "Target       {} {}", self.method, self.url);
        }
        if self.unique_literals {
            let _ = writeln!(
                out,
                "Body         {{{{n}}}} numbered per request (--unique-literals): no two requests alike"
            );
        }
        let _ = writeln!(
            out,
            "Load         {} loop, {connections} on {threads}, {:.2} s measured after {:.2} s warm-up",
            self.mode, self.duration_s, self.warmup_s
        );
        let _ = writeln!(
            out,
            "Requests     {} in {:.2} s: {:.1} req/s, {}/s",
            self.requests,
            self.duration_s,
            self.requests_per_sec,
            human_bytes(self.bytes_per_sec)
        );
        if let Some(o) = &self.open_loop {
            let _ =
                writeln!(
                out,
                "Rate         target {:.1} req/s, sent {:.1} req/s in the window, {} missed: {}",
                o.target_rate,
                o.sent_rate,
                o.missed,
                if o.rate_held { "rate held" } else { "RATE NOT HELD" }
            );
            latency_lines(
                &mut out,
                "Latency      (corrected, from intended send)",
                &self.latency_ms,
            );
            latency_lines(
                &mut out,
                "Latency      (uncorrected, from actual send)",
                &o.uncorrected_latency_ms,
            );
            let l = &o.send_lag_ms;
            let _ = writeln!(
                out,
                "Send lag     p50 {}  p99 {}  max {}",
                ms(l.p50),
                ms(l.p99),
                ms(l.max)
            );
        } else {
            latency_lines(&mut out, "Latency", &self.latency_ms);
        }
        let e = &self.errors;
        let _ = writeln!(
            out,
            "Errors       transport {}, timeouts {}, non-2xx {} ({} shed with 503), GraphQL errors in 2xx {}",
            e.transport, e.timeouts, e.non_2xx, e.shed, e.graphql
        );
        if e.total() > 0 {
            let l = &self.ok_latency_ms;
            let _ = writeln!(
                out,
                "Goodput      {:.1} req/s without errors; their latency p50 {}  p99 {}  max {}",
                self.goodput_per_sec,
                ms(l.p50),
                ms(l.p99),
                ms(l.max)
            );
        }
        for (place, n) in &self.error_paths {
            let _ = writeln!(out, "  errors at  {place}: {n} answer(s)");
        }
        if let Some(w) = &self.workload {
            workload_lines(&mut out, w);
        }
        let c = &self.loadgen_cpu;
        let machine = match c.machine_busy_cores {
            Some(b) => format!(", machine {b:.2} of {} cores busy", c.machine_cores),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "Loadgen CPU  {:.2} cores (busiest thread {:.0}%){machine}",
            c.process_cores,
            c.busiest_thread * 100.0
        );
        for w in self.warnings() {
            let _ = writeln!(out, "warning: {w}");
        }
        out
    }
}

fn workload_lines(out: &mut String, w: &WorkloadReport) {
    let _ = writeln!(out, "Workload     seed {}", w.seed);
    for o in &w.operations {
        let _ = writeln!(
            out,
            "  {:<14} {:>9} req ({:>5.1}%) {:>9.1} req/s  p50 {}  p99 {}  errors {}  stale reads {}{}",
            o.name,
            o.requests,
            o.share.unwrap_or(0.0) * 100.0,
            o.requests_per_sec,
            ms(o.p50_ms),
            ms(o.p99_ms),
            o.errors,
            o.stale_reads,
            if o.write { "  (write)" } else { "" }
        );
    }
    let stale = w
        .stale_fraction
        .map_or("–".into(), |f| format!("{:.3}%", f * 100.0));
    let _ = writeln!(
        out,
        "Freshness    {} entity reads checked, {} stale ({stale}); writes acknowledged {}, failed {}",
        w.reads_checked, w.stale_reads, w.writes_acked, w.writes_failed
    );
    if w.stale_reads > 0 {
        let (a, d) = (&w.stale_age_ms, &w.out_of_date_ms);
        let _ = writeln!(
            out,
            "Stale age    p50 {}  p99 {}  max {}  (out of date since the first missed write: p99 {}, max {})",
            ms(a.p50),
            ms(a.p99),
            ms(a.max),
            ms(d.p99),
            ms(d.max)
        );
    }
    if w.per_url.len() > 1 {
        for u in &w.per_url {
            let r = &u.report;
            let _ = writeln!(
                out,
                "  {:<30} {:>9} req  {} reads checked, {} stale ({}){}",
                u.url,
                r.requests(),
                r.reads_checked,
                r.stale_reads,
                r.stale_fraction
                    .map_or("–".into(), |f| format!("{:.3}%", f * 100.0)),
                if r.stale_reads > 0 {
                    format!(
                        "  age p99 {} max {}",
                        ms(r.stale_age_ms.p99),
                        ms(r.stale_age_ms.max)
                    )
                } else {
                    String::new()
                }
            );
        }
    }
    let _ = writeln!(out, "Wrong answers {}", w.wrong_answers);
    for e in &w.wrong_answer_examples {
        let _ = writeln!(out, "  {e}");
    }
}

fn latency_lines(out: &mut String, title: &str, l: &LatencySummary) {
    let _ = writeln!(out, "{title}");
    let _ = writeln!(
        out,
        "             mean {}  stdev {}  min {}",
        ms(l.mean),
        ms(l.stdev),
        ms(l.min)
    );
    let _ = writeln!(
        out,
        "             p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        ms(l.p50),
        ms(l.p90),
        ms(l.p99),
        ms(l.p99_9),
        ms(l.max)
    );
}

/// Milliseconds with a precision that suits the magnitude.
pub fn ms(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0} ms")
    } else if value >= 10.0 {
        format!("{value:.1} ms")
    } else {
        format!("{value:.2} ms")
    }
}

fn human_bytes(per_second: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = per_second;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_well() {
        assert_eq!(ms(123.4), "123 ms");
        assert_eq!(ms(12.34), "12.3 ms");
        assert_eq!(ms(1.234), "1.23 ms");
        assert_eq!(human_bytes(2048.0), "2.00 KiB");
        assert_eq!(human_bytes(10.0), "10.00 B");
    }
}
