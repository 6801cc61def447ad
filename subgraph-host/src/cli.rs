//! The command line every subgraph accepts, and the parsers of its values.
//!
//! Each parser refuses a bad value with a message that clap prefixes with the flag
//! (`invalid value '…' for '--drain-timeout <DURATION>': …`), so a mistyped experiment
//! stops at start-up rather than measuring something else.

use std::net::SocketAddr;
use std::time::Duration;

use crate::faults::{Delay, FaultPlan, Outage};

/// The document cache's default bound: 8 MiB, a few thousand subgraph documents.
pub const DEFAULT_DOCUMENT_CACHE_BYTES: u64 = 8 << 20;

/// Command-line options every subgraph accepts.
#[derive(Debug, Clone, clap::Args)]
pub struct HostArgs {
    /// Address to listen on (the default depends on the service; port 0 picks a free
    /// one, printed on standard error).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Hold every GraphQL response this many milliseconds, simulating a slow backend
    /// (the mean, with --delay-jitter-ms or --delay-distribution exponential).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub delay_ms: u64,
    /// Spread each response's delay uniformly over --delay-ms ± this many milliseconds
    /// (at most --delay-ms).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub delay_jitter_ms: u64,
    /// How delays are drawn: "fixed" (--delay-ms, or uniform with --delay-jitter-ms) or
    /// "exponential" (mean --delay-ms: mostly fast, with a long tail).
    #[arg(long, value_name = "KIND", default_value = "fixed")]
    pub delay_distribution: Distribution,
    /// Answer this share of requests (0 to 1) with a GraphQL error instead of executing
    /// them.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = rate)]
    pub error_rate: f64,
    /// Never answer this share of requests (0 to 1): they hang until the client gives up
    /// or the drain ends them.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = rate)]
    pub hang_rate: f64,
    /// Fail every request, at once with HTTP 503 and a GraphQL error, from START to END
    /// of every PERIOD since the service started (e.g. 2s..4s/10s). May be repeated.
    #[arg(long, value_name = "START..END/PERIOD")]
    pub outage: Vec<Outage>,
    /// The seed that decides which requests get an error, hang, and which delay each
    /// gets: the same seed gives the n-th request the same fate on every run.
    #[arg(long, value_name = "SEED", default_value_t = 1)]
    pub fault_seed: u64,
    /// Bound of the parsed-document cache, in estimated bytes (0 turns it off). Each
    /// distinct query text is parsed once; answers are the same either way.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_DOCUMENT_CACHE_BYTES)]
    pub document_cache_bytes: u64,
    /// On SIGTERM or SIGINT, stop accepting and let requests in progress finish for at
    /// most this long (e.g. 5s, 500ms), then close what remains and exit 0.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub drain_timeout: Duration,
    /// The Cache-Control header of every answer without errors: "schema" (what the
    /// schema's cache hints give, e.g. max-age=60 or max-age=10, private), "none" (no
    /// header), or a value sent as it is (e.g. "no-store", "max-age=1, s-maxage=30").
    #[arg(long, value_name = "schema|none|VALUE", default_value = "schema", value_parser = cache_control)]
    pub cache_control: CacheControl,
}

/// Where an answer's `Cache-Control` comes from (`--cache-control`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CacheControl {
    /// The schema's cache hints (async-graphql's `cache_control`), as async-graphql
    /// merges them over the fields an answer holds.
    #[default]
    Schema,
    /// No header.
    Off,
    /// This value on every answer without errors.
    Fixed(axum::http::HeaderValue),
}

/// `schema`, `none`, or a header value.
pub fn cache_control(text: &str) -> Result<CacheControl, String> {
    match text {
        "schema" => Ok(CacheControl::Schema),
        "none" => Ok(CacheControl::Off),
        "" => Err("an empty Cache-Control: write none for no header".into()),
        value => axum::http::HeaderValue::from_str(value)
            .map(CacheControl::Fixed)
            .map_err(|_| format!("{value:?} is not a header value")),
    }
}

/// How `--delay-distribution` draws delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Distribution {
    Fixed,
    Exponential,
}

impl HostArgs {
    /// The faults and delays these flags ask for, or a message naming the flags that
    /// do not fit together.
    pub fn fault_plan(&self) -> Result<FaultPlan, String> {
        let mean = Duration::from_millis(self.delay_ms);
        let jitter = Duration::from_millis(self.delay_jitter_ms);
        let delay = match (self.delay_distribution, self.delay_jitter_ms) {
            (Distribution::Fixed, 0) => Delay::Fixed(mean),
            (Distribution::Fixed, _) if jitter > mean => {
                return Err(format!(
                    "--delay-jitter-ms {} is more than --delay-ms {}: delays would go below zero",
                    self.delay_jitter_ms, self.delay_ms
                ))
            }
            (Distribution::Fixed, _) => Delay::Uniform { mean, jitter },
            (Distribution::Exponential, 0) if self.delay_ms == 0 => {
                return Err("--delay-distribution exponential needs a mean: --delay-ms".into())
            }
            (Distribution::Exponential, 0) => Delay::Exponential { mean },
            (Distribution::Exponential, _) => {
                return Err(
                    "--delay-jitter-ms does not apply to --delay-distribution exponential".into(),
                )
            }
        };
        Ok(FaultPlan {
            delay,
            error_rate: self.error_rate,
            hang_rate: self.hang_rate,
            outages: self.outage.clone(),
            seed: self.fault_seed,
        })
    }
}

/// A share from 0 to 1.
pub fn rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{text:?} is not a share from 0 to 1")),
    }
}

/// A duration written with its unit: `250ms`, `2s`, `1.5s`, `1m`.
pub fn duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{text:?} has no unit (write e.g. 500ms, 2s or 1m)"))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use ms, s or m)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_shares() {
        assert_eq!(rate("0"), Ok(0.0));
        assert_eq!(rate("0.25"), Ok(0.25));
        assert_eq!(rate("1"), Ok(1.0));
        for bad in ["-0.1", "1.01", "NaN", "inf", "", "half"] {
            assert!(rate(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cache_control_is_schema_none_or_a_value() {
        assert_eq!(cache_control("schema"), Ok(CacheControl::Schema));
        assert_eq!(cache_control("none"), Ok(CacheControl::Off));
        assert_eq!(
            cache_control("no-store"),
            Ok(CacheControl::Fixed(axum::http::HeaderValue::from_static(
                "no-store"
            )))
        );
        assert!(cache_control("").is_err());
        assert!(cache_control("max-age=1\n").is_err());
    }

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "5", "s", "5h", "-1s", "1..2s", "ms"] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
    }
}
