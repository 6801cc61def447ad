//! Runs one benchmark: threads, connections, the warm-up and measured window, and the
//! load generator's own CPU accounting.
//!
//! Like wrk, each of the `--threads` OS threads runs its own single-threaded tokio
//! runtime with its share of the connections, so no request crosses a thread. The main
//! thread only samples CPU at the edges of the measured window and joins the workers;
//! an optional monitor thread draws the progress line.

use std::cell::{Cell, RefCell};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use crate::bench::client::{self, Control, OneRequest, Schedule, Traffic};
use crate::bench::progress::Progress;
use crate::bench::recorder::Recorder;
use crate::bench::request_template::RequestTemplate;
use crate::proc_usage;
use crate::workload::mix::Role;
use crate::workload::oracle::Oracle;
use crate::workload::recorder::FreshnessByUrl;
use crate::workload::traffic::WorkloadTraffic;
use crate::workload::Workload;

/// A worker thread whose CPU time reaches this fraction of the window was (nearly)
/// saturated, so the load generator may have capped the result.
pub const SATURATED_THREAD_FRACTION: f64 = 0.9;
/// The machine counts as saturated when its busy cores reach this fraction of all cores.
pub const SATURATED_MACHINE_FRACTION: f64 = 0.9;

/// When the measured window ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopRule {
    /// After this long (`--duration`).
    After(Duration),
    /// After this many requests (`--requests`).
    Requests(u64),
}

/// Everything a benchmark needs, validated.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// One request per URL (`--url` repeated), at least one. Connection `i` of the run
    /// sends to `templates[i % templates.len()]`: round robin over the URLs.
    pub templates: Vec<RequestTemplate>,
    pub connections: usize,
    pub threads: usize,
    pub stop: StopRule,
    pub warmup: Duration,
    pub timeout: Duration,
    /// Open loop: total requests per second over all connections.
    pub rate: Option<f64>,
    /// Draw the live progress line on stderr.
    pub progress: bool,
    /// Draw it under this run's bars (a matrix run's) instead of alone.
    pub progress_bars: Option<indicatif::MultiProgress>,
    /// Send this workload instead of the templates' one request: the templates then
    /// give only each connection's address, path and base headers.
    pub workload: Option<Arc<Workload>>,
}

impl BenchPlan {
    /// Threads actually used: never more than connections.
    pub fn effective_threads(&self) -> usize {
        self.threads.clamp(1, self.connections.max(1))
    }

    /// The request the `index`-th connection of the run sends (round robin over the URLs).
    pub fn template_for(&self, index: usize) -> &RequestTemplate {
        &self.templates[index % self.templates.len()]
    }
}

/// The load generator's CPU use over the measured window.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadgenCpu {
    /// CPU time of the whole loadgen process / wall time, in cores.
    pub process_cores: f64,
    /// The busiest worker thread's CPU time / wall time (1.0 = one core all the time).
    pub busiest_thread: f64,
    /// Busy cores of the whole machine (every process) in the same window.
    pub machine_busy_cores: Option<f64>,
    /// Cores this machine has.
    pub machine_cores: usize,
    /// True when a worker thread (or loadgen as a whole) was saturated.
    pub may_be_bottleneck: bool,
    /// Human-readable warnings: loadgen saturation, and a saturated machine.
    pub warnings: Vec<String>,
}

/// What a benchmark measured, merged over all threads.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// The mix's connections (all of them, unless a workload's writes have a rate of
    /// their own).
    pub recorder: Recorder,
    /// A workload's writer connections (open loop at `write_rate`), when it has them.
    pub writes: Option<Recorder>,
    /// A workload's freshness and per-operation record, per target URL (merge them with
    /// [`FreshnessByUrl::total`] for the run's).
    pub freshness: Option<FreshnessByUrl>,
    /// Length of the measured window.
    pub elapsed: Duration,
    /// Open loop: requests scheduled in the window that neither got a response nor
    /// failed before the drain deadline.
    pub missed: u64,
    pub cpu: LoadgenCpu,
}

/// How many connections each thread runs: as even as possible.
fn split_connections(connections: usize, threads: usize) -> Vec<usize> {
    (0..threads)
        .map(|t| connections / threads + usize::from(t < connections % threads))
        .collect()
}

/// Run a benchmark to the end. Blocks the calling thread.
pub fn run(plan: &BenchPlan) -> anyhow::Result<BenchResult> {
    if plan.connections == 0 {
        return Err(anyhow!("--connections must be at least 1"));
    }
    if plan.templates.is_empty() {
        return Err(anyhow!("--url is required"));
    }
    let threads = plan.effective_threads();
    let open_loop = plan.rate.is_some();
    let start = Instant::now();
    let measure_start = start + plan.warmup;
    let measure_end = match (plan.stop, plan.rate) {
        (StopRule::After(d), _) => Some(measure_start + d),
        (StopRule::Requests(n), Some(rate)) => {
            Some(measure_start + Duration::from_secs_f64(n as f64 / rate))
        }
        (StopRule::Requests(_), None) => None,
    };
    let budget = match (plan.stop, plan.rate) {
        (StopRule::Requests(n), None) => Some(AtomicU64::new(n)),
        _ => None,
    };
    let control = Arc::new(Control {
        start,
        measure_start,
        measure_end,
        budget,
        finished: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        // Numbers start at 1: the matrix checks a numbered query's answer with 0.
        sequence: AtomicU64::new(1),
    });
    // Open loop: connection k sends at first_k + i * interval, with the connections
    // staggered by 1/rate so that the whole run sends evenly at `rate`.
    let schedules: Vec<Schedule> = match (plan.rate, measure_end) {
        (Some(rate), Some(end)) => (0..plan.connections)
            .map(|k| Schedule {
                first: start + Duration::from_secs_f64(k as f64 / rate),
                interval: Duration::from_secs_f64(plan.connections as f64 / rate),
                end,
            })
            .collect(),
        _ => Vec::new(),
    };
    // Closed loop stops at the window's end; open loop lets late requests finish for up
    // to one timeout after it.
    let deadline = measure_end.map(|end| if open_loop { end + plan.timeout } else { end });

    // A workload's writes with a rate of their own go out on writer connections, open
    // loop, beside the mix's connections.
    let oracle = plan
        .workload
        .as_ref()
        .map(|w| Arc::new(Oracle::new(w.types.len())));
    let writer_schedules: Vec<Schedule> = match (&plan.workload, measure_end) {
        (Some(w), Some(end)) => match w.write_rate {
            Some(rate) => (0..w.writers)
                .map(|k| Schedule {
                    first: start + Duration::from_secs_f64(k as f64 / rate),
                    interval: Duration::from_secs_f64(w.writers as f64 / rate),
                    end,
                })
                .collect(),
            None => Vec::new(),
        },
        (Some(w), None) if w.separate_writes() => {
            return Err(anyhow!(
                "workload.write_rate needs a measured window of fixed length (--duration, not --requests)"
            ))
        }
        _ => Vec::new(),
    };

    let progress = plan
        .progress
        .then(|| Progress::start(Arc::clone(&control), plan.stop, plan.progress_bars.as_ref()));
    let mut workers = Vec::with_capacity(threads);
    let mut first_connection = 0;
    for (t, count) in split_connections(plan.connections, threads)
        .into_iter()
        .enumerate()
    {
        let control = Arc::clone(&control);
        // Connection c of this thread is connection `first + c` of the run.
        let first = first_connection;
        let templates: Vec<RequestTemplate> = (0..count.min(plan.templates.len()))
            .map(|c| plan.template_for(first + c).clone())
            .collect();
        let timeout = plan.timeout;
        let my_schedules: Vec<Schedule> = schedules
            .get(first..first + count)
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        // Writer k runs on thread k % threads and goes to URL k % URLs.
        let my_writers: Vec<(u64, Schedule, RequestTemplate)> = writer_schedules
            .iter()
            .enumerate()
            .filter(|(k, _)| k % threads == t)
            .map(|(k, s)| (k as u64, *s, plan.template_for(k).clone()))
            .collect();
        let workload = plan.workload.clone();
        let oracle = oracle.clone();
        let urls = plan.templates.len();
        first_connection += count;
        let handle = std::thread::Builder::new()
            .name(format!("loadgen-{t}"))
            .spawn(move || -> anyhow::Result<ThreadRecord> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("building a worker runtime")?;
                let recorder = RefCell::new(Recorder::new(open_loop).timed_from(measure_start));
                let writes = RefCell::new(Recorder::new(true));
                // The answers' buffers, shared by this thread's connections.
                let buffers = http1_wire::Buffers::new();
                // One record per URL: connection `first + c` (writer k) answers to URL
                // (first + c) % urls (k % urls), so its stale reads are that gateway's.
                let freshness: Option<Vec<RefCell<_>>> = workload.as_deref().map(|w| {
                    FreshnessByUrl::new(w, urls)
                        .urls
                        .into_iter()
                        .map(RefCell::new)
                        .collect()
                });
                let window_start = Cell::new(None);
                runtime.block_on(async {
                    let (control, recorder, writes, buffers) =
                        (&*control, &recorder, &writes, &buffers);
                    let (workload, oracle, freshness) =
                        (workload.as_deref(), oracle.as_deref(), freshness.as_deref());
                    let connections = futures::future::join_all((0..count).map(|c| {
                        let template = &templates[c % templates.len()];
                        let schedule = my_schedules.get(c).copied();
                        let index = (first + c) as u64;
                        async move {
                            match (workload, oracle, freshness) {
                                (Some(w), Some(o), Some(per_url)) => {
                                    let f = &per_url[(first + c) % urls];
                                    let role = if w.separate_writes() {
                                        Role::Reads
                                    } else {
                                        Role::All
                                    };
                                    let mut traffic =
                                        WorkloadTraffic::new(w, o, template, role, index, f);
                                    drive(
                                        control,
                                        &mut traffic,
                                        timeout,
                                        schedule,
                                        recorder,
                                        buffers,
                                    )
                                    .await
                                }
                                _ => {
                                    let mut traffic = OneRequest { template };
                                    drive(
                                        control,
                                        &mut traffic,
                                        timeout,
                                        schedule,
                                        recorder,
                                        buffers,
                                    )
                                    .await
                                }
                            }
                        }
                    }));
                    let writers = futures::future::join_all(my_writers.iter().map(
                        |(k, schedule, template)| async move {
                            if let (Some(w), Some(o), Some(per_url)) = (workload, oracle, freshness)
                            {
                                let f = &per_url[*k as usize % urls];
                                let mut traffic =
                                    WorkloadTraffic::new(w, o, template, Role::Writes, *k, f);
                                client::open_loop(
                                    control,
                                    &mut traffic,
                                    timeout,
                                    *schedule,
                                    writes,
                                    buffers,
                                )
                                .await
                            }
                        },
                    ));
                    let connections = async {
                        let all = futures::future::join(connections, writers);
                        match deadline {
                            Some(at) => {
                                let _ = tokio::time::timeout_at(at.into(), all).await;
                            }
                            None => {
                                all.await;
                            }
                        }
                    };
                    // This thread's CPU clock at the start of the window, read on this thread.
                    let sampler = async {
                        tokio::time::sleep_until(control.measure_start.into()).await;
                        window_start.set(Some((
                            Instant::now(),
                            proc_usage::current_thread_cpu_time(),
                        )));
                    };
                    futures::join!(connections, sampler);
                });
                let end = (Instant::now(), proc_usage::current_thread_cpu_time());
                Ok(ThreadRecord {
                    recorder: recorder.into_inner(),
                    writes: writes.into_inner(),
                    freshness: freshness.map(|f| FreshnessByUrl {
                        urls: f.into_iter().map(RefCell::into_inner).collect(),
                    }),
                    cpu: ThreadCpu {
                        window_start: window_start.get(),
                        end,
                    },
                })
            })
            .context("spawning a worker thread")?;
        workers.push(handle);
    }

    // Process CPU at the start of the window…
    let now = Instant::now();
    if measure_start > now {
        std::thread::sleep(measure_start - now);
    }
    let sample = || {
        (
            Instant::now(),
            proc_usage::own_cpu_time(),
            proc_usage::machine_ticks(),
        )
    };
    let before = sample();

    let mut merged = Recorder::new(open_loop);
    let mut writes = Recorder::new(true);
    let mut freshness: Option<FreshnessByUrl> = None;
    let mut thread_cpu = Vec::with_capacity(threads);
    let mut failure = None;
    for worker in workers {
        match worker.join() {
            Ok(Ok(record)) => {
                merged.merge(&record.recorder);
                writes.merge(&record.writes);
                match (&mut freshness, record.freshness) {
                    (Some(all), Some(f)) => all.merge(&f),
                    (None, f) => freshness = f,
                    (Some(_), None) => {}
                }
                thread_cpu.push(record.cpu);
            }
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some(anyhow!("a worker thread panicked")),
        }
    }
    // …and at its end.
    let after = sample();
    if let Some(p) = progress {
        p.finish();
    }
    if let Some(e) = failure {
        return Err(e);
    }

    let elapsed = match (plan.stop, open_loop) {
        (StopRule::After(d), false) => d,
        (StopRule::Requests(_), false) => merged
            .last_completion
            .map(|t| t.saturating_duration_since(measure_start))
            .unwrap_or_default(),
        (_, true) => {
            let window = measure_end
                .map(|end| end - measure_start)
                .unwrap_or_default();
            let drained = merged
                .last_completion
                .map(|t| t.saturating_duration_since(measure_start))
                .unwrap_or_default();
            window.max(drained)
        }
    };
    let missed = if open_loop {
        let scheduled: u64 = schedules.iter().map(|s| s.count_from(measure_start)).sum();
        if let Some(s) = &mut merged.schedule {
            s.scheduled = scheduled;
        }
        let accounted = merged.responses + merged.errors.transport + merged.errors.timeouts;
        scheduled.saturating_sub(accounted)
    } else {
        0
    };

    let cpu = loadgen_cpu(before, after, &thread_cpu, threads);
    Ok(BenchResult {
        recorder: merged,
        writes: (!writer_schedules.is_empty()).then_some(writes),
        freshness,
        elapsed,
        missed,
        cpu,
    })
}

/// Run one connection: open loop along its schedule, or closed loop without one.
async fn drive<T: Traffic>(
    control: &Control,
    traffic: &mut T,
    timeout: Duration,
    schedule: Option<Schedule>,
    recorder: &RefCell<Recorder>,
    buffers: &http1_wire::Buffers,
) {
    match schedule {
        Some(s) => client::open_loop(control, traffic, timeout, s, recorder, buffers).await,
        None => client::closed_loop(control, traffic, timeout, recorder, buffers).await,
    }
}

/// What one worker thread hands back.
struct ThreadRecord {
    recorder: Recorder,
    /// The writer connections' own record (open loop), if the thread had any.
    writes: Recorder,
    freshness: Option<FreshnessByUrl>,
    cpu: ThreadCpu,
}

/// CPU clock readings of one worker thread: (wall, CPU) at the window's start and end.
#[derive(Debug, Clone, Copy)]
struct ThreadCpu {
    window_start: Option<(Instant, Duration)>,
    end: (Instant, Duration),
}

impl ThreadCpu {
    /// Fraction of one core this thread used over the window.
    fn busy(&self) -> Option<f64> {
        let (wall_start, cpu_start) = self.window_start?;
        let wall = self.end.0.checked_duration_since(wall_start)?.as_secs_f64();
        (wall > 0.0).then(|| self.end.1.saturating_sub(cpu_start).as_secs_f64() / wall)
    }
}

type ProcessSample = (Instant, Duration, Option<proc_usage::MachineTicks>);

fn loadgen_cpu(
    before: ProcessSample,
    after: ProcessSample,
    threads_cpu: &[ThreadCpu],
    threads: usize,
) -> LoadgenCpu {
    let wall = after.0.saturating_duration_since(before.0);
    let wall_s = wall.as_secs_f64().max(f64::EPSILON);
    let process_cores = after.1.saturating_sub(before.1).as_secs_f64() / wall_s;
    let busiest_thread = threads_cpu
        .iter()
        .filter_map(ThreadCpu::busy)
        .fold(0.0, f64::max);
    let (machine_before, machine_after) = (before.2, after.2);
    let machine_cores = proc_usage::available_cores();
    let machine_busy_cores = match (machine_before, machine_after) {
        (Some(b), Some(a)) => proc_usage::machine_busy_cores(b, a, wall),
        _ => None,
    };
    let mut warnings = Vec::new();
    let may_be_bottleneck = busiest_thread >= SATURATED_THREAD_FRACTION
        || process_cores >= SATURATED_THREAD_FRACTION * threads as f64;
    if busiest_thread >= SATURATED_THREAD_FRACTION {
        warnings.push(format!(
            "a loadgen worker thread was busy {:.0}% of the window: loadgen may be the bottleneck \
             (try more --threads, if the machine has idle cores)",
            busiest_thread * 100.0
        ));
    } else if process_cores >= SATURATED_THREAD_FRACTION * threads as f64 {
        warnings.push(format!(
            "loadgen used {process_cores:.2} cores for {threads} worker thread(s): it may be the bottleneck"
        ));
    }
    if let Some(busy) = machine_busy_cores {
        if busy >= SATURATED_MACHINE_FRACTION * machine_cores as f64 {
            warnings.push(format!(
                "the machine was saturated ({busy:.2} of {machine_cores} cores busy): loadgen and the \
                 target compete for CPU, so neither figure is the target's alone"
            ));
        }
    }
    LoadgenCpu {
        process_cores,
        busiest_thread,
        machine_busy_cores,
        machine_cores,
        may_be_bottleneck,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_split_evenly() {
        assert_eq!(split_connections(100, 3), vec![34, 33, 33]);
        assert_eq!(split_connections(2, 2), vec![1, 1]);
        assert_eq!(split_connections(7, 1), vec![7]);
    }

    #[test]
    fn a_busy_thread_raises_the_bottleneck_warning() {
        let t0 = Instant::now();
        let t10 = t0 + Duration::from_secs(10);
        let s = Duration::from_secs;
        let busy = ThreadCpu {
            window_start: Some((t0, s(1))),
            end: (t10, s(11)),
        };
        let cpu = loadgen_cpu((t0, s(1), None), (t10, s(11), None), &[busy], 1);
        assert!(cpu.may_be_bottleneck);
        assert!(cpu.warnings[0].contains("bottleneck"), "{:?}", cpu.warnings);
        let calm = ThreadCpu {
            window_start: Some((t0, s(1))),
            end: (t10, s(3)),
        };
        let idle = loadgen_cpu((t0, s(1), None), (t10, s(3), None), &[calm], 1);
        assert!(!idle.may_be_bottleneck, "{idle:?}");
        assert!((idle.process_cores - 0.2).abs() < 1e-9);
        assert!((idle.busiest_thread - 0.2).abs() < 1e-9);
    }
}
