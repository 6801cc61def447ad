//! How far a run has come, and about how long it has left: the tail of the line the
//! runner prints after each window (`[3/12, about 1m 40s left]`), and the overall
//! bar's message ([`super::progress`]).
//!
//! The time left is the mean time per window so far (processes started, checked,
//! warmed up, measured and stopped) times the windows still to run. The first window
//! also pays for what every run does once, so the estimate starts high and settles.

use std::time::{Duration, Instant};

/// Windows done out of all, since the first started.
pub struct Eta {
    started: Instant,
    done: usize,
    total: usize,
}

impl Eta {
    /// A run of `total` windows (configurations × rounds), starting now.
    pub fn start(total: usize) -> Eta {
        Eta {
            started: Instant::now(),
            done: 0,
            total,
        }
    }

    /// Count one more window done; the progress to print.
    pub fn window_done(&mut self) -> String {
        self.done += 1;
        describe(self.done, self.total, self.started.elapsed())
    }

    /// `about 1m 48s left`, or what is known before the first window ends.
    pub fn left(&self) -> String {
        match self.done {
            0 => "the time left is known after the first window".into(),
            d if d >= self.total => "done".into(),
            d => {
                let per_window = self.started.elapsed().as_secs_f64() / d as f64;
                format!(
                    "about {} left",
                    minutes(per_window * (self.total - d) as f64)
                )
            }
        }
    }
}

/// `[done/total, about T left]` after `elapsed` (nothing left: `[total/total]`).
fn describe(done: usize, total: usize, elapsed: Duration) -> String {
    if done >= total || done == 0 {
        return format!("[{done}/{total}]");
    }
    let per_window = elapsed.as_secs_f64() / done as f64;
    let left = per_window * (total - done) as f64;
    format!("[{done}/{total}, about {} left]", minutes(left))
}

/// `1h 02m`, `4m 05s` or `40s`.
fn minutes(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, _) => format!("{h}h {m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_is_the_mean_window_times_the_windows_left() {
        assert_eq!(
            describe(3, 12, Duration::from_secs(36)),
            "[3/12, about 1m 48s left]"
        );
        assert_eq!(
            describe(1, 2, Duration::from_secs(40)),
            "[1/2, about 40s left]"
        );
        assert_eq!(
            describe(1, 400, Duration::from_secs(12)),
            "[1/400, about 1h 19m left]"
        );
    }

    #[test]
    fn a_finished_run_says_only_its_count() {
        assert_eq!(describe(12, 12, Duration::from_secs(99)), "[12/12]");
        assert_eq!(describe(0, 0, Duration::ZERO), "[0/0]");
    }
}
