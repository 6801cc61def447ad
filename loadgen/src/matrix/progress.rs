//! The run's progress on stderr. On a terminal: an indicatif bar over every window of
//! the run (configurations × rounds) with the round and configuration now running and
//! about how long is left ([`super::eta`]), above it one line per finished window, and
//! below it the running window's own bar with its live req/s and errors (the bench's
//! [`crate::bench::progress`], joined to the same [`MultiProgress`]). Elsewhere (CI, a
//! pipe, a file): no bars, and each finished window's line ends with its plain
//! `[3/12, about 1m 48s left]`.

use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::eta::Eta;

/// How far the run has come, drawn or printed.
pub struct RunProgress {
    eta: Eta,
    /// The bars, when stderr is a terminal.
    bars: Option<(MultiProgress, ProgressBar)>,
}

impl RunProgress {
    /// A run of `total` windows, starting now.
    pub fn start(total: usize) -> RunProgress {
        let target = std::io::stderr()
            .is_terminal()
            .then(ProgressDrawTarget::stderr);
        RunProgress::with_target(total, target)
    }

    fn with_target(total: usize, target: Option<ProgressDrawTarget>) -> RunProgress {
        let bars = target.map(|target| {
            let multi = MultiProgress::with_draw_target(target);
            let overall = multi.add(ProgressBar::new(total as u64));
            overall.set_style(
                ProgressStyle::with_template("{prefix:>9} [{bar:30}] {pos}/{len} windows  {msg}")
                    .expect("a valid template")
                    .progress_chars("=>-"),
            );
            overall.set_prefix("run");
            (multi, overall)
        });
        RunProgress {
            eta: Eta::start(total),
            bars,
        }
    }

    /// The bars a window's live line joins.
    pub fn bars(&self) -> Option<MultiProgress> {
        self.bars.as_ref().map(|(m, _)| m.clone())
    }

    /// Say which window runs now.
    pub fn window_started(&self, round: u32, rounds: u32, config: &str) {
        if let Some((_, overall)) = &self.bars {
            overall.set_message(format!(
                "round {round}/{rounds}: {config}  {}",
                self.eta.left()
            ));
        }
    }

    /// A window finished: print its line, with the run's progress when there are no
    /// bars to show it.
    pub fn window_done(&mut self, line: &str) {
        let plain = self.eta.window_done();
        match &self.bars {
            Some((multi, overall)) => {
                overall.inc(1);
                overall.set_message(self.eta.left());
                if multi.println(line).is_err() {
                    eprintln!("{line}");
                }
            }
            None => eprintln!("{line}  {plain}"),
        }
    }

    /// Clear the bars (the lines stay).
    pub fn finish(self) {
        if let Some((multi, overall)) = self.bars {
            overall.finish_and_clear();
            let _ = multi.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overall_bar_counts_windows_and_says_what_runs() {
        let mut p = RunProgress::with_target(4, Some(ProgressDrawTarget::hidden()));
        assert!(p.bars().is_some());
        p.window_started(1, 2, "ttl-0");
        let overall = p.bars.as_ref().unwrap().1.clone();
        assert!(
            overall.message().starts_with("round 1/2: ttl-0"),
            "{}",
            overall.message()
        );
        p.window_done("  round 1/2 ttl-0 ...");
        p.window_done("  round 1/2 no-cache ...");
        assert_eq!((overall.position(), overall.length()), (2, Some(4)));
        assert!(
            overall.message().starts_with("about "),
            "{}",
            overall.message()
        );
        p.finish();
        assert!(overall.is_finished());
    }

    #[test]
    fn without_a_terminal_there_are_no_bars() {
        let p = RunProgress::with_target(4, None);
        assert!(p.bars().is_none());
        p.window_started(1, 1, "a");
        p.finish();
    }
}
