//! The gateway's own profiler: `GET /debug/profile?seconds=N&hz=H` on a gateway started
//! with `--profiling` (pprof in-process) answers with collapsed stacks.
//!
//! The fallback where perf is missing. pprof drops every sample taken inside libc,
//! libgcc, pthread or the vdso (its blocklist), so malloc, memcpy and every syscall with
//! the kernel time behind it are missing: such profiles hold about half of the
//! gateway's CPU, and the summary's coverage says so. A gateway without the endpoint
//! answers 404; that becomes a note in the summary, not an error.

use std::net::SocketAddr;
use std::time::Duration;

use super::flamegraph::collapsed_counts;
use super::ProfileOutcome;
use crate::matrix::http_probe;

/// Note used when the gateway has no profiling endpoint.
pub const NO_PROFILING_NOTE: &str = "no flamegraph (gateway built without profiling?)";
/// Extra time allowed past the sampling window for the profile to arrive.
const PROFILE_SLACK: Duration = Duration::from_secs(15);

/// Ask the gateway to sample itself for `seconds` at `hz` and wait for the stacks.
pub async fn fetch_profile(gateway: SocketAddr, seconds: u64, hz: u32) -> ProfileOutcome {
    let path = format!("/debug/profile?seconds={seconds}&hz={hz}");
    let deadline = Duration::from_secs(seconds) + PROFILE_SLACK;
    let asked = std::time::Instant::now();
    match http_probe::get(gateway, &path, deadline).await {
        Ok(answer) if answer.status == 200 => {
            let text = answer.text();
            if collapsed_counts(&text).is_empty() {
                let mut start = text.trim().to_string();
                start.truncate(120);
                ProfileOutcome::Unavailable(format!(
                    "no flamegraph: the profile had no samples ({} bytes after {:.1} s{})",
                    text.len(),
                    asked.elapsed().as_secs_f64(),
                    if start.is_empty() {
                        String::new()
                    } else {
                        format!(": {start:?}")
                    }
                ))
            } else {
                ProfileOutcome::Stacks(text)
            }
        }
        Ok(answer) if answer.status == 404 => ProfileOutcome::Unavailable(NO_PROFILING_NOTE.into()),
        Ok(answer) => {
            let mut body = answer.text();
            body.truncate(200);
            ProfileOutcome::Unavailable(format!(
                "no flamegraph: {path} answered {}: {body}",
                answer.status
            ))
        }
        Err(e) => ProfileOutcome::Unavailable(format!("no flamegraph: {e:#}")),
    }
}
