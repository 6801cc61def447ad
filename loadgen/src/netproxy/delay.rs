//! When each chunk of one direction may leave the proxy: half the RTT after it arrived,
//! plus a seeded jitter sample, never before the chunk ahead of it.
//!
//! A [`DelayLine`] belongs to one direction of one connection. Its jitter comes from a
//! ChaCha8 generator seeded with `--seed` on a stream of its own (the connection's
//! accept index and the direction), so a run with the same seed gives every direction
//! of the n-th connection the same sequence of delays, whatever the timing.
//!
//! Jitter is the standard deviation of a normal sample added to each chunk's one-way
//! delay; a delay is never below zero. Order is kept as TCP keeps it: a chunk that drew
//! a short delay waits for the one ahead of it, so a long sample holds back the chunks
//! behind it (head-of-line blocking), and the mean delay with jitter is a little above
//! half the RTT.

use std::time::{Duration, Instant};

use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

/// The delay settings of one proxy, shared by every direction of every connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelayModel {
    /// Added to each direction: half the RTT.
    pub one_way: Duration,
    /// Standard deviation of the normal sample added to each chunk's delay.
    pub jitter: Duration,
    /// Seeds every direction's generator.
    pub seed: u64,
}

/// Which way the data goes through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the client that connected to `--listen` towards `--to`.
    Upstream,
    /// From `--to` back to the client.
    Downstream,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Direction::Upstream => "client→upstream",
            Direction::Downstream => "upstream→client",
        }
    }
}

impl DelayModel {
    /// The model for `--rtt` and `--jitter`: each direction gets half the RTT.
    pub fn from_rtt(rtt: Duration, jitter: Duration, seed: u64) -> DelayModel {
        DelayModel {
            one_way: rtt / 2,
            jitter,
            seed,
        }
    }

    /// The delay line of one direction of the `connection`-th accepted connection.
    pub fn line(&self, connection: u64, direction: Direction) -> DelayLine {
        let jitter = (!self.jitter.is_zero()).then(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            rng.set_stream(connection * 2 + u64::from(direction == Direction::Downstream));
            let normal = Normal::new(0.0, self.jitter.as_secs_f64())
                .expect("a finite, positive standard deviation");
            (normal, rng)
        });
        DelayLine {
            one_way: self.one_way,
            jitter,
            last: None,
        }
    }
}

/// Release times of one direction, in arrival order.
pub struct DelayLine {
    one_way: Duration,
    jitter: Option<(Normal<f64>, ChaCha8Rng)>,
    last: Option<Instant>,
}

impl DelayLine {
    /// The delay the next chunk draws, before the order rule.
    fn next_delay(&mut self) -> Duration {
        match &mut self.jitter {
            None => self.one_way,
            Some((normal, rng)) => {
                let seconds = self.one_way.as_secs_f64() + normal.sample(rng);
                Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::ZERO)
            }
        }
    }

    /// When a chunk that arrived at `arrived` may be written: `arrived` plus its
    /// delay, and not before the previous chunk of this direction.
    pub fn release(&mut self, arrived: Instant) -> Instant {
        let mut at = arrived + self.next_delay();
        if let Some(last) = self.last {
            at = at.max(last);
        }
        self.last = Some(at);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_jitter_every_chunk_waits_half_the_rtt() {
        let model = DelayModel::from_rtt(Duration::from_millis(2), Duration::ZERO, 1);
        let mut line = model.line(0, Direction::Upstream);
        let t0 = Instant::now();
        for i in 0..10 {
            let arrived = t0 + Duration::from_micros(100 * i);
            assert_eq!(line.release(arrived), arrived + Duration::from_millis(1));
        }
    }

    #[test]
    fn jitter_is_seeded_per_connection_and_direction_and_never_reorders() {
        let model = DelayModel::from_rtt(Duration::from_millis(2), Duration::from_micros(500), 42);
        let t0 = Instant::now();
        let releases = |connection, direction| {
            let mut line = model.line(connection, direction);
            (0..200)
                .map(|i| line.release(t0 + Duration::from_micros(10 * i)))
                .collect::<Vec<_>>()
        };
        let a = releases(3, Direction::Upstream);
        assert_eq!(
            a,
            releases(3, Direction::Upstream),
            "same seed, same delays"
        );
        assert_ne!(a, releases(3, Direction::Downstream));
        assert_ne!(a, releases(4, Direction::Upstream));
        let other_seed = DelayModel { seed: 43, ..model };
        let mut line = other_seed.line(3, Direction::Upstream);
        let b: Vec<_> = (0..200)
            .map(|i| line.release(t0 + Duration::from_micros(10 * i)))
            .collect();
        assert_ne!(a, b);
        assert!(
            a.windows(2).all(|w| w[0] <= w[1]),
            "release order = arrival order"
        );
        // The samples spread around half the RTT (a chunk alone: no order rule).
        let delays: Vec<f64> = (0..2000)
            .map(|i| {
                let mut line = model.line(i, Direction::Upstream);
                (line.release(t0) - t0).as_secs_f64()
            })
            .collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!((mean - 0.001).abs() < 0.000_05, "mean one-way delay {mean}");
        assert!(delays.iter().any(|&d| d < 0.0009) && delays.iter().any(|&d| d > 0.0011));
    }

    #[test]
    fn a_delay_is_never_negative() {
        let model = DelayModel::from_rtt(Duration::from_micros(100), Duration::from_millis(5), 7);
        let t0 = Instant::now();
        for i in 0..500 {
            let mut line = model.line(i, Direction::Downstream);
            assert!(line.release(t0) >= t0);
        }
    }
}
