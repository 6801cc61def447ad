//! Injected faults and latency: what happens to each request before (or instead of)
//! its answer.
//!
//! Every GraphQL request except the gateway's schema read (`_service`, asked once at
//! start, so that a gateway can always compose) gets a sequence number `k` as it
//! arrives, and its fate is a pure function of `k`, the `--fault-seed` and the time
//! since the service started:
//!
//! 1. **outage** (`--outage START..END/PERIOD`): inside the window of every period the
//!    request is answered at once with HTTP 503 and a GraphQL error;
//! 2. **hang** (`--hang-rate P`): with probability `P` it is never answered (until the
//!    client gives up, or the drain's `--drain-timeout` ends it);
//! 3. **error** (`--error-rate P`): with probability `P` it is answered with a GraphQL
//!    error (`data: null`) instead of being executed, so a mutation has no effect;
//! 4. otherwise it is executed.
//!
//! Every answer (errors included) is then held for the delay drawn for `k`
//! (`--delay-ms`, with `--delay-jitter-ms` or `--delay-distribution`). Each fault draws
//! from its own stream (`random::draw(seed ^ stream, k)`), so raising the error rate
//! does not move which requests hang, and the `n`-th request meets the same fate on
//! every run, whatever the concurrency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::random;

/// How long each answer is held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delay {
    /// The same for every request (`--delay-ms D`).
    Fixed(Duration),
    /// Uniform in `[mean − jitter, mean + jitter]` (`--delay-ms D --delay-jitter-ms J`).
    Uniform { mean: Duration, jitter: Duration },
    /// Exponential with this mean (`--delay-ms D --delay-distribution exponential`): most
    /// answers fast, a long tail of slow ones.
    Exponential { mean: Duration },
}

impl Delay {
    /// The delay for a request whose draw is `u` in `[0, 1)`.
    fn at(self, u: f64) -> Duration {
        match self {
            Delay::Fixed(d) => d,
            Delay::Uniform { mean, jitter } => {
                (mean.saturating_sub(jitter)).saturating_add(jitter.mul_f64(2.0 * u))
            }
            // Inverse of the CDF; 1 − u is in (0, 1], so the logarithm is finite.
            Delay::Exponential { mean } => mean.mul_f64(-(1.0 - u).ln()),
        }
    }
}

/// A window of every period in which requests fail: `START..END/PERIOD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    pub start: Duration,
    pub end: Duration,
    pub period: Duration,
}

impl Outage {
    /// Is `elapsed` (since the service started) inside the window?
    pub fn covers(&self, elapsed: Duration) -> bool {
        let phase = Duration::from_nanos((elapsed.as_nanos() % self.period.as_nanos()) as u64);
        self.start <= phase && phase < self.end
    }
}

impl std::str::FromStr for Outage {
    type Err = String;

    /// `2s..4s/10s`: fail from 2 s to 4 s of every 10 s.
    fn from_str(text: &str) -> Result<Outage, String> {
        let shape = || format!("{text:?} is not START..END/PERIOD (e.g. 2s..4s/10s)");
        let (window, period) = text.split_once('/').ok_or_else(shape)?;
        let (start, end) = window.split_once("..").ok_or_else(shape)?;
        let [start, end, period] = [start, end, period].map(crate::cli::duration);
        let outage = Outage {
            start: start?,
            end: end?,
            period: period?,
        };
        if outage.start >= outage.end {
            return Err(format!("{text:?}: the window must end after it starts"));
        }
        if outage.end > outage.period {
            return Err(format!("{text:?}: the window must fit in the period"));
        }
        Ok(outage)
    }
}

/// What to inject, as the command line says.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    pub delay: Delay,
    pub error_rate: f64,
    pub hang_rate: f64,
    pub outages: Vec<Outage>,
    pub seed: u64,
}

impl Default for FaultPlan {
    /// Nothing injected, no delay.
    fn default() -> Self {
        FaultPlan {
            delay: Delay::Fixed(Duration::ZERO),
            error_rate: 0.0,
            hang_rate: 0.0,
            outages: Vec::new(),
            seed: 1,
        }
    }
}

/// The fate of one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fate {
    /// Answer 503 with a GraphQL error, at once.
    Outage,
    /// Never answer.
    Hang,
    /// Answer a GraphQL error, after the delay.
    Error(Duration),
    /// Execute, and answer after the delay.
    Answer(Duration),
}

// The streams each fault draws from, so that they are independent.
const HANG: u64 = 0x6861_6e67;
const ERROR: u64 = 0x6572_726f;
const DELAY: u64 = 0x6465_6c61;

/// A [`FaultPlan`] in force: the clock it started on and the requests numbered so far.
#[derive(Debug)]
pub struct Faults {
    plan: FaultPlan,
    started: Instant,
    next: AtomicU64,
}

impl Faults {
    pub fn new(plan: FaultPlan) -> Faults {
        Faults {
            plan,
            started: Instant::now(),
            next: AtomicU64::new(0),
        }
    }

    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// Number the next request and decide its fate.
    pub fn next_fate(&self) -> Fate {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        self.fate(k, self.started.elapsed())
    }

    /// The fate of request `k` arriving `elapsed` after the start.
    pub fn fate(&self, k: u64, elapsed: Duration) -> Fate {
        let p = &self.plan;
        let u = |stream: u64| random::unit(random::draw(p.seed ^ stream, k));
        if p.outages.iter().any(|o| o.covers(elapsed)) {
            return Fate::Outage;
        }
        if p.hang_rate > 0.0 && u(HANG) < p.hang_rate {
            return Fate::Hang;
        }
        let delay = p.delay.at(u(DELAY));
        if p.error_rate > 0.0 && u(ERROR) < p.error_rate {
            return Fate::Error(delay);
        }
        Fate::Answer(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn outages_parse_and_cover_their_window_of_every_period() {
        let o: Outage = "2s..4s/10s".parse().unwrap();
        assert_eq!((o.start, o.end, o.period), (ms(2000), ms(4000), ms(10_000)));
        for (t, inside) in [
            (0, false),
            (1999, false),
            (2000, true),
            (3999, true),
            (4000, false),
            (12_500, true),
            (19_000, false),
        ] {
            assert_eq!(o.covers(ms(t)), inside, "{t} ms");
        }
        for bad in [
            "2s..4s",
            "2s-4s/10s",
            "4s..2s/10s",
            "2s..2s/10s",
            "2s..11s/10s",
            "2..4s/10s",
            "a..b/c",
        ] {
            assert!(bad.parse::<Outage>().is_err(), "{bad}");
        }
    }

    #[test]
    fn fates_are_a_function_of_the_seed_and_the_number() {
        let plan = FaultPlan {
            error_rate: 0.2,
            hang_rate: 0.1,
            delay: Delay::Uniform {
                mean: ms(10),
                jitter: ms(5),
            },
            ..FaultPlan::default()
        };
        let a = Faults::new(plan.clone());
        let b = Faults::new(plan.clone());
        let c = Faults::new(FaultPlan { seed: 2, ..plan });
        let fates = |f: &Faults| {
            (0..2000)
                .map(|k| f.fate(k, Duration::ZERO))
                .collect::<Vec<_>>()
        };
        assert_eq!(fates(&a), fates(&b));
        assert_ne!(fates(&a), fates(&c));
        let all = fates(&a);
        let hung = all.iter().filter(|f| **f == Fate::Hang).count();
        let errors = all.iter().filter(|f| matches!(f, Fate::Error(_))).count();
        assert!((150..250).contains(&hung), "{hung} hung of 2000 at 0.1");
        assert!(
            (300..420).contains(&errors),
            "{errors} errors of the 1800 left at 0.2"
        );
        for f in all {
            if let Fate::Answer(d) | Fate::Error(d) = f {
                assert!(d >= ms(5) && d <= ms(15), "{d:?}");
            }
        }
    }

    #[test]
    fn exponential_delays_have_their_mean_and_a_tail() {
        let f = Faults::new(FaultPlan {
            delay: Delay::Exponential { mean: ms(10) },
            ..FaultPlan::default()
        });
        let delays: Vec<f64> = (0..20_000)
            .map(|k| match f.fate(k, Duration::ZERO) {
                Fate::Answer(d) => d.as_secs_f64() * 1000.0,
                other => panic!("{other:?}"),
            })
            .collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!((9.5..10.5).contains(&mean), "mean {mean} ms");
        // P(X > 3 mean) = e^-3 ≈ 5%.
        let tail = delays.iter().filter(|&&d| d > 30.0).count() as f64 / delays.len() as f64;
        assert!((0.04..0.06).contains(&tail), "tail {tail}");
    }
}
