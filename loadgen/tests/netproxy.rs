//! `loadgen netproxy` as a process, against servers in this test on 127.0.0.1: the
//! delay it adds is there (no round trip through it is shorter than the setting) and
//! not absurdly more, over 8 concurrent connections; numbered messages pipelined
//! through it with jitter come back complete and in order; a large transfer in both
//! directions arrives intact, in order and delayed to its last byte; half-close both
//! ways, a reset passed on, the counters printed on SIGTERM, and bad flags named.
//! `loadgen netproxy-accuracy` reports every setting and round.
//!
//! How close the added RTT is to the setting is a benchmark, not a test (a busy
//! machine moves it): `scripts/netproxy-accuracy.sh` measures it and commits the run.
//!
//! Every loop is bounded in count, every read has a timeout, and the proxy is stopped
//! by PID (SIGTERM, then SIGKILL) also when a test fails.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use loadgen::netproxy::accuracy::{
    connect, echo_server, median, ping_pong, ProxyProcess, IO_TIMEOUT, PING,
};

/// Concurrent connections of the delay and order tests.
const CONNECTIONS: usize = 8;
/// How far above the setting the median added RTT may be before the proxy is taken
/// to be broken rather than slowed by a busy machine: a sanity bound, not accuracy.
const SLACK: Duration = Duration::from_millis(50);

/// The timing tests take turns with each other (and with the stream test), so that
/// they do not slow one another down.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn loadgen() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_loadgen"))
}

/// A `loadgen netproxy` in front of `to` with these flags.
fn proxy(to: SocketAddr, extra: &[&str]) -> ProxyProcess {
    ProxyProcess::start(loadgen(), to, extra).expect("starting loadgen netproxy")
}

/// Serve `handle` for every connection to a fresh port, each on its own thread.
fn serve(handle: fn(TcpStream)) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
                stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
                let _ = stream.set_nodelay(true);
                handle(stream)
            });
        }
    });
    addr
}

#[test]
fn every_round_trip_through_the_proxy_takes_at_least_its_rtt_under_concurrent_connections() {
    let _turn = turn();
    let server = echo_server().unwrap();
    let rtt = Duration::from_millis(2);
    let pings = 50;
    let mut proxy = proxy(server, &["--rtt", "2ms"]);
    let direct = ping_pong(server, CONNECTIONS, pings, Duration::from_millis(1)).unwrap();
    // Every echo came back unchanged (ping_pong checks each), none was lost.
    let proxied = ping_pong(proxy.addr, CONNECTIONS, pings, Duration::from_millis(1)).unwrap();
    assert_eq!(proxied.len(), CONNECTIONS * pings);
    // Delays run from the kernel's arrival stamp, which comes after the send: no round
    // trip through the proxy can be shorter than the setting, however busy the machine.
    let fastest = *proxied.iter().min().unwrap();
    assert!(
        fastest >= rtt,
        "a round trip took {fastest:?} through --rtt 2ms"
    );
    let added = median(proxied).saturating_sub(median(direct));
    assert!(
        added < rtt + SLACK,
        "the proxy added {added:?} at the median for --rtt 2ms"
    );
    let (status, stats) = proxy.stop();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(stats.contains("netproxy stopped by signal 15"), "{stats}");
    // Counted at accept, before any byte: no race with the last writes. (The byte
    // count is checked where the client waits for the proxy's EOF, which follows it.)
    assert!(
        stats.contains(&format!("{CONNECTIONS} connections")),
        "{stats}"
    );
}

#[test]
fn messages_pipelined_through_jitter_come_back_complete_and_in_order() {
    let _turn = turn();
    let server = echo_server().unwrap();
    let messages = 200u64;
    let mut proxy = proxy(server, &["--rtt", "2ms", "--jitter", "1ms", "--seed", "5"]);
    let connections: Vec<_> = (0..CONNECTIONS as u64)
        .map(|c| {
            let addr = proxy.addr;
            std::thread::spawn(move || {
                let s = connect(addr).unwrap();
                let mut reader = s.try_clone().unwrap();
                let writer = std::thread::spawn(move || {
                    let mut s = s;
                    // One write per message: each may become a chunk with its own
                    // jitter sample, none may overtake the one before it.
                    for n in 0..messages {
                        let mut msg = [0u8; PING];
                        msg[..8].copy_from_slice(&c.to_le_bytes());
                        msg[8..16].copy_from_slice(&n.to_le_bytes());
                        s.write_all(&msg).unwrap();
                    }
                });
                let mut back = vec![0u8; PING * messages as usize];
                reader.read_exact(&mut back).unwrap();
                writer.join().unwrap();
                // Half-close: the echo answers BYE and closes; the proxy counts every
                // byte before it passes that EOF on, so the count below is complete.
                reader.shutdown(Shutdown::Write).unwrap();
                let mut last = Vec::new();
                reader.read_to_end(&mut last).unwrap();
                assert_eq!(last, b"BYE", "nothing after the messages but the BYE");
                for (n, msg) in back.chunks(PING).enumerate() {
                    let of =
                        |r: std::ops::Range<usize>| u64::from_le_bytes(msg[r].try_into().unwrap());
                    assert_eq!(
                        (of(0..8), of(8..16)),
                        (c, n as u64),
                        "message {n} of connection {c}"
                    );
                }
            })
        })
        .collect();
    for c in connections {
        c.join().expect("every message came back, in order");
    }
    let (status, stats) = proxy.stop();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let bytes = CONNECTIONS * (2 * messages as usize * PING + 3);
    assert!(stats.contains(&format!("{bytes} bytes")), "{stats}");
}

#[test]
fn netproxy_accuracy_measures_every_setting_in_every_round_in_rotating_order() {
    let _turn = turn();
    let file = std::env::temp_dir().join(format!("netproxy-accuracy-{}.json", std::process::id()));
    let out = Command::new(loadgen())
        .args([
            "netproxy-accuracy",
            "--rtt",
            "1ms",
            "--rtt",
            "3ms",
            "--rounds",
            "2",
        ])
        .args(["--pings", "10", "--connections", "2", "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("| 1 ms |") && table.contains("| 3 ms |"),
        "{table}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let _ = std::fs::remove_file(&file);
    let rows = report["measurements"].as_array().unwrap();
    let order: Vec<(u64, f64)> = rows
        .iter()
        .map(|m| (m["round"].as_u64().unwrap(), m["rtt_ms"].as_f64().unwrap()))
        .collect();
    assert_eq!(order, [(1, 1.0), (1, 3.0), (2, 3.0), (2, 1.0)]);
    for m in rows {
        assert_eq!(m["samples"], 20, "{m}");
        assert!(
            m["proxied_min_ms"].as_f64().unwrap() >= m["rtt_ms"].as_f64().unwrap(),
            "{m}"
        );
        assert!(m["cpu_us_per_chunk"].as_f64().unwrap() >= 0.0, "{m}");
    }
    let refused = Command::new(loadgen())
        .args(["netproxy-accuracy", "--rtt", "0s"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--rtt"));
}

/// A pattern without short periods: byte i of a xorshift stream.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_large_transfer_arrives_intact_in_order_and_delayed_to_the_last_byte_with_half_close() {
    let _turn = turn();
    let server = echo_server().unwrap();
    let rtt = Duration::from_millis(20);
    let mut proxy = proxy(server, &["--rtt", "20ms", "--jitter", "2ms", "--seed", "7"]);
    let data = pattern(16 << 20);
    let s = connect(proxy.addr).unwrap();
    let mut reader = s.try_clone().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || {
        let mut s = s;
        s.write_all(&sent).unwrap();
        let done = Instant::now();
        // Half-close: the echo server sees EOF only after every byte, then answers BYE.
        s.shutdown(Shutdown::Write).unwrap();
        done
    });
    let mut got = Vec::with_capacity(data.len() + 3);
    let mut buf = vec![0u8; 256 * 1024];
    let mut last_byte_at = Instant::now();
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                last_byte_at = Instant::now();
                assert!(got.len() <= data.len() + 3, "more bytes than were sent");
            }
            Err(e) => panic!("reading the echo after {} bytes: {e}", got.len()),
        }
    }
    let write_done = writer.join().unwrap();
    assert_eq!(
        got.len(),
        data.len() + 3,
        "every byte and the BYE came back"
    );
    assert!(
        got[..data.len()] == data[..],
        "the bytes came back changed or out of order"
    );
    assert_eq!(
        &got[data.len()..],
        b"BYE",
        "the server answered after the half-close"
    );
    // The last bytes crossed the proxy twice after the client had handed them over.
    assert!(
        last_byte_at - write_done >= rtt,
        "the last byte came back {:?} after it was written, less than the RTT",
        last_byte_at - write_done
    );
    let (status, stats) = proxy.stop();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(
        stats.contains(&format!("{} bytes", 2 * data.len() + 3)),
        "{stats}"
    );
}

/// Read one byte, then reset the connection (close with `SO_LINGER` 0).
fn reset_after_a_byte(mut stream: TcpStream) {
    let mut one = [0u8; 1];
    let _ = stream.read_exact(&mut one);
    let _ = stream.write_all(b"x");
    // SAFETY: setsockopt on our own socket with a linger struct of the size passed.
    unsafe {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&stream),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(stream);
}

#[test]
fn a_reset_is_passed_on_after_the_data_before_it() {
    let server = serve(reset_after_a_byte);
    let mut proxy = proxy(server, &["--rtt", "2ms"]);
    let mut s = connect(proxy.addr).unwrap();
    s.write_all(b"?").unwrap();
    let mut one = [0u8; 1];
    s.read_exact(&mut one).unwrap();
    assert_eq!(&one, b"x", "the byte sent before the reset arrives first");
    let mut rest = [0u8; 16];
    let err = s
        .read(&mut rest)
        .expect_err("the upstream's reset reaches the client as a reset, not an EOF");
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
    let (status, stats) = proxy.stop();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(stats.contains("1 resets"), "{stats}");
}

#[test]
fn an_upstream_that_is_down_resets_the_client() {
    // A port nobody listens on.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = proxy(dead, &["--rtt", "1ms"]);
    let mut s = connect(proxy.addr).unwrap();
    let _ = s.write_all(b"hello");
    let mut buf = [0u8; 8];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("{n} bytes from a proxy whose upstream is down"),
    }
}

#[test]
fn bad_flags_are_named() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .arg("netproxy")
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&["--listen", "nowhere", "--to", "127.0.0.1:1", "--rtt", "1ms"]);
    assert!(err.contains("--listen"), "{err}");
    let err = run(&[
        "--listen",
        "127.0.0.1:0",
        "--to",
        "127.0.0.1:1",
        "--rtt",
        "soon",
    ]);
    assert!(err.contains("--rtt"), "{err}");
    let err = run(&["--listen", "127.0.0.1:0", "--to", "no-port", "--rtt", "1ms"]);
    assert!(err.contains("--to"), "{err}");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let err = run(&[
        "--listen",
        &taken.local_addr().unwrap().to_string(),
        "--to",
        "127.0.0.1:1",
        "--rtt",
        "1ms",
    ]);
    assert!(err.contains("--listen"), "{err}");
}
