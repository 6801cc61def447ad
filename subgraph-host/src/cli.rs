//! The command line every subgraph accepts, and the parsers of its values.
//!
//! Each parser refuses a bad value with a message that clap prefixes with the flag
//! (`invalid value '…' for '--drain-timeout <DURATION>': …`), so a mistyped experiment
//! stops at start-up rather than measuring something else.

use std::net::SocketAddr;
use std::time::Duration;

/// The document cache's default bound: 8 MiB, a few thousand subgraph documents.
pub const DEFAULT_DOCUMENT_CACHE_BYTES: u64 = 8 << 20;

/// Command-line options every subgraph accepts.
#[derive(Debug, Clone, clap::Args)]
pub struct HostArgs {
    /// Address to listen on (the default depends on the service; port 0 picks a free
    /// one, printed on standard error).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Hold every GraphQL response this many milliseconds, simulating a slow backend.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub delay_ms: u64,
    /// Bound of the parsed-document cache, in estimated bytes (0 turns it off). Each
    /// distinct query text is parsed once; answers are the same either way.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_DOCUMENT_CACHE_BYTES)]
    pub document_cache_bytes: u64,
    /// On SIGTERM or SIGINT, stop accepting and let requests in progress finish for at
    /// most this long (e.g. 5s, 500ms), then close what remains and exit 0.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub drain_timeout: Duration,
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
    fn durations_need_a_unit() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "5", "s", "5h", "-1s", "1..2s", "ms"] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
    }
}
