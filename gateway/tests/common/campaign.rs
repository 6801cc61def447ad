//! How long a fuzzing campaign runs, from the environment: a bounded number of cases
//! from a fixed seed for the test suite, or a stretch of wall time (scripts/fuzz.sh)
//! from a seed taken from the clock. `PREFIX_CASES=N` and `PREFIX_SEED=S` bound and
//! replay a run; `PREFIX_SECONDS=N` runs for N seconds instead.

use std::time::{Duration, Instant};

pub struct Campaign {
    pub seed: u64,
    cases: usize,
    until: Option<Instant>,
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a whole number")),
    )
}

impl Campaign {
    /// The campaign `PREFIX_CASES`, `PREFIX_SEED` and `PREFIX_SECONDS` ask for;
    /// `default_cases` cases from seed 1 when none is set.
    pub fn from_env(prefix: &str, default_cases: usize) -> Campaign {
        let seconds = env_number(&format!("{prefix}_SECONDS"));
        let cases = env_number(&format!("{prefix}_CASES")).map_or(default_cases, |n| n as usize);
        let seed = env_number(&format!("{prefix}_SEED")).unwrap_or_else(|| match seconds {
            Some(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(1),
            None => 1,
        });
        Campaign {
            seed,
            cases,
            until: seconds.map(|s| Instant::now() + Duration::from_secs(s)),
        }
    }

    /// Whether case `n` (counted from 0) is still to run.
    pub fn goes_on(&self, n: usize) -> bool {
        match self.until {
            Some(t) => Instant::now() < t,
            None => n < self.cases,
        }
    }

    /// The number of cases a bounded run does.
    pub fn cases(&self) -> usize {
        self.cases
    }
}
