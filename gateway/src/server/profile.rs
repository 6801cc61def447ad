//! On-demand CPU sampling of the gateway, for the matrix runner's flamegraphs.
//!
//! Enabled with `--profiling`: `GET /debug/profile?seconds=N&hz=H` samples every thread
//! of the process with pprof (SIGPROF) for N seconds and answers collapsed stacks, one
//! `thread;root;…;leaf COUNT` line per distinct stack, ready for inferno. Only one
//! profile runs at a time (the sampler is process-wide); a second request gets 409.
//! The busy flag is held by a guard, so a profile request whose client goes away (its
//! handler is dropped mid-sample) frees it, and stops the sampler, at once.
//! The kernel tick caps sampling near 250 Hz here, so `hz` is clamped to 1..=250.
//! Frame names are shortened to their paths without generic arguments
//! ([`short_name`]): async code's types run to kilobytes per frame otherwise.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::IntoResponse;

static RUNNING: AtomicBool = AtomicBool::new(false);

/// The one profile in progress: clears [`RUNNING`] when dropped, answered or not.
struct Busy;

impl Busy {
    fn take() -> Option<Busy> {
        (!RUNNING.swap(true, Ordering::SeqCst)).then_some(Busy)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::SeqCst);
    }
}

pub async fn handler(Query(params): Query<HashMap<String, String>>) -> impl IntoResponse {
    let seconds: f64 = match params.get("seconds").map(|s| s.parse::<f64>()) {
        None => 10.0,
        Some(Ok(s)) if s > 0.0 && s <= 300.0 => s,
        Some(_) => {
            return (
                StatusCode::BAD_REQUEST,
                "seconds must be a number in (0, 300]".to_string(),
            )
        }
    };
    let hz: i32 = match params.get("hz").map(|s| s.parse::<i32>()) {
        None => 199,
        Some(Ok(h)) if h > 0 => h.min(250),
        Some(_) => {
            return (
                StatusCode::BAD_REQUEST,
                "hz must be a positive integer".to_string(),
            )
        }
    };
    let Some(busy) = Busy::take() else {
        return (
            StatusCode::CONFLICT,
            "a profile is already being taken".to_string(),
        );
    };
    let result = sample(Duration::from_secs_f64(seconds), hz).await;
    drop(busy);
    match result {
        Ok(folded) => (StatusCode::OK, folded),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("profiling failed: {e}"),
        ),
    }
}

async fn sample(duration: Duration, hz: i32) -> Result<String, pprof::Error> {
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(hz)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()?;
    tokio::time::sleep(duration).await;
    let report = guard.report().build()?;
    let mut out = String::new();
    for (frames, count) in &report.data {
        out.push_str(&frames.thread_name);
        // pprof lists the leaf first; collapsed stacks go root first.
        for frame in frames.frames.iter().rev() {
            for symbol in frame.iter().rev() {
                out.push(';');
                out.push_str(&short_name(&symbol.name()));
            }
        }
        let _ = writeln!(out, " {count}");
    }
    Ok(out)
}

/// `<alloc::boxed::Box<dyn Fn()> as core::ops::FnOnce<()>>::call_once` →
/// `alloc::boxed::Box<dyn Fn()>::call_once`: a frame's path with each generic argument
/// list cut to its first argument's path (enough to tell `poll_future<hyper_util::client…>`
/// from `poll_future<gateway::http…>`), without `as Trait` qualifications, hash suffix
/// or `;` (the collapsed-stack separator).
pub fn short_name(name: &str) -> String {
    let name = match name.rfind("::h") {
        Some(i) if name.len() - i == 19 && name[i + 3..].bytes().all(|b| b.is_ascii_hexdigit()) => {
            &name[..i]
        }
        _ => name,
    };
    let bytes = name.as_bytes();
    let mut out = String::with_capacity(name.len().min(160));
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => {
                let end = matching(bytes, i);
                let inner = &name[i + 1..end.min(name.len())];
                if i == 0 {
                    // `<Self as Trait>::f`: keep `Self`.
                    out.push_str(&short_name(inner.split(" as ").next().unwrap_or(inner)));
                } else {
                    // Generic arguments: keep the first one's path, drop the rest.
                    let cut = inner.bytes().enumerate().position(|(j, b)| {
                        matches!(b, b'<' | b',')
                            || (b == b'>' && (j == 0 || inner.as_bytes()[j - 1] != b'-'))
                    });
                    let first = cut.map_or(inner, |j| &inner[..j]);
                    out.push('<');
                    out.push_str(first.trim());
                    out.push('>');
                }
                i = end + 1;
            }
            b';' => {
                out.push(':');
                i += 1;
            }
            b => {
                out.push(b as char);
                i += 1;
            }
        }
    }
    out
}

/// The index of the `>` closing the `<` at `open` (or the end).
fn matching(bytes: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'<' => depth += 1,
            b'>' if j > 0 && bytes[j - 1] == b'-' => {} // `->` in a fn type
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::short_name;

    #[test]
    fn frame_names_keep_one_path_per_generic_list() {
        assert_eq!(
            short_name("<alloc::boxed::Box<dyn core::ops::function::FnOnce<(), Output = ()> + core::marker::Send> as core::ops::function::FnOnce<()>>::call_once"),
            "alloc::boxed::Box<dyn core::ops::function::FnOnce>::call_once"
        );
        assert_eq!(
            short_name("tokio::runtime::task::harness::poll_future<hyper_util::client::legacy::Pool<u8>, S>"),
            "tokio::runtime::task::harness::poll_future<hyper_util::client::legacy::Pool>"
        );
        assert_eq!(
            short_name("core::ptr::drop_in_place::h0123456789abcdef"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(short_name("f<fn() -> u8, X>;g"), "f<fn() -> u8>:g");
    }
}
