//! `loadgen netproxy` as a process, against servers in this test on 127.0.0.1: the RTT
//! it adds (ping-pong over 8 concurrent connections, through the proxy against direct,
//! within 10% of the setting at 0.5, 1 and 5 ms: the issue asks for that accuracy, so
//! this test measures it), a large transfer in both directions arriving intact, in
//! order and delayed to its last byte, half-close both ways, a reset passed on, the
//! counters printed on SIGTERM, and bad flags named.
//!
//! Every loop is bounded in count, every read has a timeout, and the proxy is stopped
//! by PID (SIGTERM, then SIGKILL) also when a test fails.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest any single read or write of a test waits.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent connections of the accuracy test.
const CONNECTIONS: usize = 8;
/// Bytes of one ping.
const PING: usize = 64;

/// The proxy accuracy runs time ping-pongs; they take turns with each other (and with
/// the stream test) so that they do not measure one another.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A `loadgen netproxy` process, stopped by PID when dropped.
struct Proxy {
    child: Child,
    stdout: BufReader<ChildStdout>,
    addr: SocketAddr,
}

impl Proxy {
    fn start(to: SocketAddr, extra: &[&str]) -> Proxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .args([
                "netproxy",
                "--listen",
                "127.0.0.1:0",
                "--to",
                &to.to_string(),
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting loadgen netproxy");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // "netproxy listening on 127.0.0.1:P → …"
        let addr = line
            .strip_prefix("netproxy listening on ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Proxy {
            child,
            stdout,
            addr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, wait up to 5 s (then SIGKILL); the lines printed after the first.
    fn stop(&mut self) -> (Option<std::process::ExitStatus>, String) {
        // SAFETY: kill(2) on our own child's PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut rest = String::new();
                let _ = self.stdout.read_to_string(&mut rest);
                return (Some(status), rest);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        (None, String::new())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
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

/// Send back everything; at EOF, send `BYE` and close (so a half-closed client still
/// hears the server's last words).
fn echo(mut stream: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => {
                let _ = stream.write_all(b"BYE");
                let _ = stream.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Round trips of `pings` pings on each of [`CONNECTIONS`] concurrent connections to
/// `addr` (after 10 unmeasured ones each), with `pause` between a connection's pings.
fn ping_pong(addr: SocketAddr, pings: usize, pause: Duration) -> Vec<Duration> {
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = connect(addr);
                let mut msg = [c as u8; PING];
                let mut back = [0u8; PING];
                let mut rtts = Vec::with_capacity(pings);
                for i in 0..pings + 10 {
                    msg[1] = i as u8;
                    let sent = Instant::now();
                    s.write_all(&msg).unwrap();
                    s.read_exact(&mut back).unwrap();
                    let rtt = sent.elapsed();
                    assert_eq!(back, msg, "the echo came back changed");
                    if i >= 10 {
                        rtts.push(rtt);
                    }
                    std::thread::sleep(pause);
                }
                rtts
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn cpu_of(pid: u32) -> Duration {
    loadgen::proc_usage::process_cpu_time(pid).expect("the proxy's /proc/<pid>/stat")
}

#[test]
fn the_added_rtt_is_within_ten_percent_of_the_setting_under_concurrent_connections() {
    let _turn = turn();
    let server = serve(echo);
    let pause = Duration::from_millis(1);
    for (rtt, flag, pings) in [
        (Duration::from_micros(500), "500us", 250),
        (Duration::from_millis(1), "1ms", 250),
        (Duration::from_millis(5), "5ms", 100),
    ] {
        let mut proxy = Proxy::start(server, &["--rtt", flag]);
        // Interleaved halves, so that drift on a shared machine hits both alike.
        let mut direct = ping_pong(server, pings / 2, pause);
        let cpu_before = cpu_of(proxy.pid());
        let mut proxied = ping_pong(proxy.addr, pings / 2, pause);
        let mut cpu = cpu_of(proxy.pid()) - cpu_before;
        direct.extend(ping_pong(server, pings / 2, pause));
        let cpu_before = cpu_of(proxy.pid());
        proxied.extend(ping_pong(proxy.addr, pings / 2, pause));
        cpu += cpu_of(proxy.pid()) - cpu_before;
        let (direct, proxied) = (median(direct), median(proxied));
        let added = proxied.saturating_sub(direct);
        // Two chunks per ping (there and back); the warm-up pings are counted too.
        let chunks = (CONNECTIONS * 2 * (pings + 20)) as f64;
        eprintln!(
            "rtt {flag}: direct median {direct:?}, through the proxy {proxied:?}, added {added:?} \
             ({:+.1}%); proxy CPU {cpu:?} = {:.1} µs per chunk",
            (added.as_secs_f64() / rtt.as_secs_f64() - 1.0) * 100.0,
            cpu.as_secs_f64() * 1e6 / chunks
        );
        let error = (added.as_secs_f64() - rtt.as_secs_f64()).abs();
        assert!(
            error <= rtt.as_secs_f64() * 0.10,
            "--rtt {flag}: added {added:?} (direct {direct:?}, proxied {proxied:?}) is not within 10%"
        );
        let (status, stats) = proxy.stop();
        assert!(status.is_some_and(|s| s.success()), "{status:?}");
        assert!(stats.contains("netproxy stopped by signal 15"), "{stats}");
        assert!(
            stats.contains(&format!("{} connections", 2 * CONNECTIONS)),
            "{stats}"
        );
    }
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
    let server = serve(echo);
    let rtt = Duration::from_millis(20);
    let mut proxy = Proxy::start(server, &["--rtt", "20ms", "--jitter", "2ms", "--seed", "7"]);
    let data = pattern(16 << 20);
    let s = connect(proxy.addr);
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
    let mut proxy = Proxy::start(server, &["--rtt", "2ms"]);
    let mut s = connect(proxy.addr);
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
    let proxy = Proxy::start(dead, &["--rtt", "1ms"]);
    let mut s = connect(proxy.addr);
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
