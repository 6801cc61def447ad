//! The live progress line on stderr: phase, a bar, live req/s and errors so far.
//!
//! A monitor thread updates an indicatif bar a few times a second from the shared
//! counters (which cost the workers one relaxed atomic add per request); indicatif
//! draws it. Alone (`loadgen bench`) the bar has stderr to itself; under a matrix run
//! it joins the run's [`MultiProgress`], below the run's overall bar. Nothing is drawn
//! when stderr is not a terminal, so logs and `--json` output stay clean.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::bench::client::Control;
use crate::bench::engine::StopRule;

/// How often the line is redrawn.
const REDRAW_EVERY: Duration = Duration::from_millis(250);
/// The bar's length in steps (its width on screen is the template's).
const STEPS: u64 = 1000;

/// A running monitor; [`Progress::finish`] stops it and clears the line.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Start drawing: under `multi` when given (and drawn), else alone unless stderr
    /// is not a terminal.
    pub fn start(control: Arc<Control>, rule: StopRule, multi: Option<&MultiProgress>) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let bar = match multi {
            Some(m) if !m.is_hidden() => m.add(ProgressBar::new(STEPS)),
            None if std::io::stderr().is_terminal() => ProgressBar::new(STEPS),
            _ => return Progress { stop, thread: None },
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix:>9} [{bar:30}] {msg}")
                .expect("a valid template")
                .progress_chars("#>-"),
        );
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("loadgen-progress".into())
            .spawn(move || {
                let mut last = (Instant::now(), 0u64);
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(REDRAW_EVERY);
                    let now = Instant::now();
                    let finished = control.finished.load(Ordering::Relaxed);
                    let failed = control.failed.load(Ordering::Relaxed);
                    let rate =
                        (finished - last.1) as f64 / (now - last.0).as_secs_f64().max(f64::EPSILON);
                    last = (now, finished);
                    let state = state(&control, rule, now, rate, failed);
                    bar.set_prefix(state.phase);
                    bar.set_position((state.fraction * STEPS as f64).round() as u64);
                    bar.set_message(state.message);
                }
                bar.finish_and_clear();
            })
            .ok();
        Progress { stop, thread }
    }

    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the line shows at one moment.
#[derive(Debug, PartialEq)]
struct State {
    phase: &'static str,
    /// How far the current phase is, 0 to 1.
    fraction: f64,
    /// Time since the start, live req/s and errors.
    message: String,
}

fn state(control: &Control, rule: StopRule, now: Instant, rate: f64, failed: u64) -> State {
    let warming = now < control.measure_start;
    let phase = match control.measure_end {
        _ if warming => "warm-up",
        Some(end) if now >= end => "finishing",
        _ => "measuring",
    };
    let fraction = if warming {
        let total = (control.measure_start - control.start)
            .as_secs_f64()
            .max(f64::EPSILON);
        (now - control.start).as_secs_f64() / total
    } else {
        match (rule, control.measure_end) {
            (StopRule::Requests(n), None) => {
                let left = control
                    .budget
                    .as_ref()
                    .map(|b| b.load(Ordering::Relaxed))
                    .unwrap_or(0);
                (n - left.min(n)) as f64 / n.max(1) as f64
            }
            (_, Some(end)) => {
                let total = (end - control.measure_start)
                    .as_secs_f64()
                    .max(f64::EPSILON);
                (now - control.measure_start).as_secs_f64() / total
            }
            _ => 0.0,
        }
    };
    State {
        phase,
        fraction: fraction.clamp(0.0, 1.0),
        message: format!(
            "{:>5.1}s  {rate:>9.0} req/s  {failed} errors",
            (now - control.start).as_secs_f64()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn line_shows_phase_and_rate() {
        let start = Instant::now();
        let control = Control {
            start,
            measure_start: start + Duration::from_secs(2),
            measure_end: Some(start + Duration::from_secs(12)),
            budget: None,
            finished: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            sequence: AtomicU64::new(1),
        };
        let rule = StopRule::After(Duration::from_secs(10));
        let warm = state(&control, rule, start + Duration::from_secs(1), 1234.0, 0);
        assert_eq!((warm.phase, warm.fraction), ("warm-up", 0.5));
        assert!(warm.message.contains("1234 req/s"), "{warm:?}");
        let half = state(&control, rule, start + Duration::from_secs(7), 10.0, 3);
        assert_eq!((half.phase, half.fraction), ("measuring", 0.5));
        assert!(half.message.contains("3 errors"), "{half:?}");
        let late = state(&control, rule, start + Duration::from_secs(13), 0.0, 0);
        assert_eq!((late.phase, late.fraction), ("finishing", 1.0));
    }
}
