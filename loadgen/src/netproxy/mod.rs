//! `loadgen netproxy`: a TCP proxy that puts a network's round trip between two
//! processes on one machine, where the kernel has no `netem` to do it.
//!
//! Every chunk of bytes read from one side is written to the other half the RTT after
//! it arrived (plus a seeded jitter sample, [`delay`]), in order: latency is added to
//! every byte, not to the first of a connection, so a pipelined protocol (Redis,
//! HTTP/1.1 keep-alive) pays it per message as on a real link. The TCP handshake itself
//! is not delayed: the lab's clients keep their connections.
//!
//! # Design
//!
//! - One thread accepts; **one thread per connection** runs both directions
//!   ([`connection`]): it reads whatever arrives, queues it with its release time, and
//!   writes what is due. Release times are met by the thread that writes, with no
//!   hand-off between threads, so no cross-thread wake-up sits between a deadline and
//!   the write.
//! - **Timing.** tokio's timer counts whole milliseconds (a `sleep(250µs)` sleeps about
//!   1 ms), which cannot make a 0.25 ms one-way delay. The connection thread sleeps in
//!   `ppoll` (nanosecond timeout, timer slack 1 ns, [`socket`]) until a little before
//!   the next release (about how late `ppoll` has been waking it), then spins the rest
//!   (checking its sockets without sleeping). Delays are measured from the kernel's arrival stamp of
//!   the data (`SO_TIMESTAMPNS`), so a thread that was busy or descheduled when the
//!   data came does not lengthen its delay.
//! - **Bounded:** a direction holds at most [`connection::MAX_QUEUED`] bytes before it
//!   stops reading (backpressure through TCP); connections past `--max-connections`
//!   are refused.
//! - Threads, not tasks: the lab proxies a handful of connections (a Redis client's
//!   one multiplexed connection, an HTTP client's pool), each of them busy; a thread
//!   each costs a stack and nothing more, and keeps timing out of a shared scheduler.
//!
//! On SIGTERM or SIGINT the proxy prints what it forwarded (connections, chunks, bytes,
//! resets) and exits 0.
//!
//! Accuracy and CPU per chunk are measured by `loadgen netproxy-accuracy`
//! ([`accuracy`]), run and recorded by `scripts/netproxy-accuracy.sh`
//! (`docs/netproxy-accuracy.md` quotes the run).

pub mod accuracy;
pub mod connection;
pub mod delay;
pub mod socket;

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};

use self::connection::Counters;
use self::delay::DelayModel;
use crate::cli::NetproxyArgs;

/// How long connecting to `--to` may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Stack of a connection thread: the loop keeps its 64 KiB read buffer on the heap.
const CONNECTION_STACK: usize = 256 * 1024;

/// Resolve `--to` to one address.
fn resolve(to: &str) -> anyhow::Result<SocketAddr> {
    to.to_socket_addrs()
        .map_err(|e| anyhow!("--to {to:?}: {e}"))?
        .next()
        .ok_or_else(|| anyhow!("--to {to:?}: resolves to no address"))
}

/// Block SIGTERM and SIGINT in this thread (and the threads it starts), so that the
/// main thread takes them with `sigwait`.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before use; pthread_sigmask only
    // changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// `loadgen netproxy`: listen, forward with the delay, until SIGTERM or SIGINT.
pub fn run(args: &NetproxyArgs) -> anyhow::Result<()> {
    let to = resolve(&args.to)?;
    let model = DelayModel::from_rtt(args.rtt, args.jitter, args.seed);
    let signals = block_stop_signals();
    let listener =
        TcpListener::bind(args.listen).map_err(|e| anyhow!("--listen {}: {e}", args.listen))?;
    let local = listener.local_addr()?;
    println!(
        "netproxy listening on {local} → {to}, rtt {:?} ({:?} each way), jitter {:?}, seed {}",
        args.rtt, model.one_way, args.jitter, args.seed
    );
    let counters = Arc::new(Counters::default());
    let accept_counters = Arc::clone(&counters);
    let max_connections = usize::try_from(args.max_connections)?;
    std::thread::Builder::new()
        .name("netproxy-accept".into())
        .spawn(move || accept_loop(listener, to, model, max_connections, accept_counters))
        .context("starting the accept thread")?;
    let mut signal = 0;
    // SAFETY: `signals` was filled by block_stop_signals; sigwait writes `signal`.
    unsafe { libc::sigwait(&signals, &mut signal) };
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    println!(
        "netproxy stopped by signal {signal}: {} connections, {} chunks, {} bytes forwarded, {} resets",
        load(&counters.connections),
        load(&counters.chunks),
        load(&counters.bytes),
        load(&counters.resets)
    );
    Ok(())
}

fn accept_loop(
    listener: TcpListener,
    to: SocketAddr,
    model: DelayModel,
    max_connections: usize,
    counters: Arc<Counters>,
) {
    let active = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut index = 0u64;
    for client in listener.incoming() {
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                eprintln!("netproxy: accept: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if active.load(Ordering::Relaxed) >= max_connections {
            eprintln!(
                "netproxy: refusing a connection: --max-connections {max_connections} are open"
            );
            let _ = socket::reset_on_close(&client);
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        counters.connections.fetch_add(1, Ordering::Relaxed);
        let (held, counters) = (Arc::clone(&active), Arc::clone(&counters));
        let this = index;
        index += 1;
        let spawned = std::thread::Builder::new()
            .name(format!("netproxy-{this}"))
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                match TcpStream::connect_timeout(&to, CONNECT_TIMEOUT) {
                    Ok(upstream) => connection::run(client, upstream, this, &model, &counters),
                    Err(e) => {
                        eprintln!("netproxy: connection {this}: connecting to {to}: {e}");
                        let _ = socket::reset_on_close(&client);
                    }
                }
                held.fetch_sub(1, Ordering::Relaxed);
            });
        if let Err(e) = spawned {
            active.fetch_sub(1, Ordering::Relaxed);
            eprintln!("netproxy: connection {this}: no thread: {e}");
        }
    }
}
