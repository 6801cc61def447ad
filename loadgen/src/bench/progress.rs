//! The live progress line on stderr: phase, a bar, live req/s and errors so far.
//!
//! A monitor thread redraws the line a few times a second from the shared counters
//! (which cost the workers one relaxed atomic add per request). It draws nothing when
//! stderr is not a terminal, so logs and `--json` output stay clean.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::bench::client::Control;
use crate::bench::engine::StopRule;

/// How often the line is redrawn.
const REDRAW_EVERY: Duration = Duration::from_millis(250);
/// Width of the bar, in characters.
const BAR_WIDTH: usize = 30;

/// A running monitor; [`Progress::finish`] stops it and clears the line.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Start drawing, unless stderr is not a terminal.
    pub fn start(control: Arc<Control>, rule: StopRule) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Progress { stop, thread: None };
        }
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
                    let line = render(&control, rule, now, rate, failed);
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{line}");
                    let _ = err.flush();
                }
                let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
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

fn bar(fraction: f64) -> String {
    let filled = ((fraction.clamp(0.0, 1.0)) * BAR_WIDTH as f64).round() as usize;
    format!("[{}{}]", "#".repeat(filled), " ".repeat(BAR_WIDTH - filled))
}

/// One progress line for the given moment.
fn render(control: &Control, rule: StopRule, now: Instant, rate: f64, failed: u64) -> String {
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
    format!(
        "{phase:>9} {} {:>5.1}s  {rate:>9.0} req/s  {failed} errors",
        bar(fraction),
        (now - control.start).as_secs_f64()
    )
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
        let warm = render(&control, rule, start + Duration::from_secs(1), 1234.0, 0);
        assert!(
            warm.contains("warm-up") && warm.contains("1234 req/s"),
            "{warm}"
        );
        let half = render(&control, rule, start + Duration::from_secs(7), 10.0, 3);
        assert!(
            half.contains("measuring")
                && half.contains(&format!("[{}{}]", "#".repeat(15), " ".repeat(15))),
            "{half}"
        );
        assert!(half.contains("3 errors"), "{half}");
        let late = render(&control, rule, start + Duration::from_secs(13), 0.0, 0);
        assert!(late.contains("finishing"), "{late}");
    }
}
