//! A private redis-server per configuration and round (`redis = true` in `[[config]]`):
//! find the binary on `PATH`, start it on a free port without persistence, wait until it
//! answers `PING`, read its command counter, stop it by PID.
//!
//! Redis is spoken raw over TCP (RESP: `*1\r\n$4\r\nPING\r\n`), so neither redis-cli nor
//! a client crate is needed. The process is a [`ServiceProcess`], stopped by PID with
//! SIGTERM (then SIGKILL) like the lab's services, also when dropped on an error.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::matrix::services::ServiceProcess;

/// The binary's file name, looked up on `PATH`.
pub const REDIS_SERVER: &str = "redis-server";
/// The name the runner gives the process (logs, records).
pub const REDIS_NAME: &str = "redis";
/// How often a starting redis-server is pinged.
const PING_POLL: Duration = Duration::from_millis(50);
/// Deadline of one command's answer.
const COMMAND_DEADLINE: Duration = Duration::from_secs(2);

/// `redis-server` on `PATH`, if there is one.
pub fn find_on_path() -> Option<PathBuf> {
    find_binary(REDIS_SERVER)
}

/// The executable `name` on `PATH`, if there is one.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a file this process may execute.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The message of a run that needs redis-server on a machine without it.
pub fn missing_message(experiment: &str, config: &str) -> String {
    format!(
        "experiment \"{experiment}\" config \"{config}\" needs redis-server; install the Debian \
         package redis-server (apt-get install redis-server)"
    )
}

/// The arguments of a private, non-persistent redis-server on `127.0.0.1:port` (as the
/// cluster's nodes have, see `local-redis-cluster`).
pub fn arguments(port: u16) -> Vec<String> {
    local_redis_cluster::server_arguments(port)
}

/// The URL the gateway is given for `{redis}`.
pub fn url(addr: SocketAddr) -> String {
    format!("redis://{addr}")
}

/// Start `binary` on `127.0.0.1:port`, output to `log`. Wait with [`wait_ready`].
pub fn start(binary: &Path, port: u16, log: &Path) -> anyhow::Result<ServiceProcess> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    ServiceProcess::spawn(REDIS_NAME, binary, &arguments(port), addr, log)
}

/// Ping until redis answers `+PONG`, the process exits, or `deadline` passes.
pub async fn wait_ready(
    redis: &mut ServiceProcess,
    deadline: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        if let Some(status) = redis.exited() {
            bail!(
                "redis-server exited ({status}) before it answered PING; `{}`; last log lines:\n{}",
                redis.command_line.join(" "),
                redis.log_tail(20)
            );
        }
        if ping(redis.addr).await.is_ok() {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= deadline {
            bail!(
                "redis-server at {} did not answer PING within {deadline:?}; last log lines:\n{}",
                redis.addr,
                redis.log_tail(20)
            );
        }
        tokio::time::sleep(PING_POLL).await;
    }
}

/// Send one RESP command and read its whole answer (a simple string or a bulk string).
async fn command(addr: SocketAddr, args: &[&str]) -> anyhow::Result<String> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        let mut request = format!("*{}\r\n", args.len());
        for a in args {
            request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                bail!("redis closed the connection");
            }
            answer.extend_from_slice(&buf[..n]);
            if let Some(text) = complete_reply(&answer)? {
                return Ok(text);
            }
        }
    };
    match tokio::time::timeout(COMMAND_DEADLINE, exchange).await {
        Ok(result) => result,
        Err(_) => bail!("redis at {addr} did not answer within {COMMAND_DEADLINE:?}"),
    }
}

/// The reply in `bytes` once it is complete: `+…` and `$len` bulk strings; `-…` errors.
fn complete_reply(bytes: &[u8]) -> anyhow::Result<Option<String>> {
    let Some(line_end) = bytes.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = String::from_utf8_lossy(&bytes[1..line_end]).into_owned();
    match bytes.first() {
        Some(b'+') | Some(b':') => Ok(Some(line)),
        Some(b'-') => bail!("redis answered an error: {line}"),
        Some(b'$') => {
            let len: usize = line.parse().context("a bulk string length")?;
            let start = line_end + 2;
            if bytes.len() < start + len {
                return Ok(None);
            }
            Ok(Some(
                String::from_utf8_lossy(&bytes[start..start + len]).into_owned(),
            ))
        }
        _ => bail!(
            "unexpected redis reply {:?}",
            String::from_utf8_lossy(bytes)
        ),
    }
}

/// `PING`, expecting `PONG`.
pub async fn ping(addr: SocketAddr) -> anyhow::Result<()> {
    let answer = command(addr, &["PING"]).await?;
    if answer != "PONG" {
        bail!("redis answered PING with {answer:?}");
    }
    Ok(())
}

/// `total_commands_processed` of `INFO stats`: every command the server ran so far
/// (the runner's own PING and INFO included).
pub async fn commands_processed(addr: SocketAddr) -> anyhow::Result<u64> {
    let info = command(addr, &["INFO", "stats"]).await?;
    parse_commands_processed(&info)
        .with_context(|| format!("no total_commands_processed in redis INFO stats at {addr}"))
}

/// `total_commands_processed:N` out of an `INFO` text.
pub fn parse_commands_processed(info: &str) -> Option<u64> {
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_when_complete() {
        assert_eq!(complete_reply(b"+PONG\r\n").unwrap(), Some("PONG".into()));
        assert_eq!(complete_reply(b"+PO").unwrap(), None);
        assert_eq!(complete_reply(b"$5\r\nhel").unwrap(), None);
        assert_eq!(
            complete_reply(b"$5\r\nhello\r\n").unwrap(),
            Some("hello".into())
        );
        assert!(complete_reply(b"-ERR unknown\r\n")
            .unwrap_err()
            .to_string()
            .contains("ERR unknown"));
        assert_eq!(
            parse_commands_processed(
                "# Stats\r\ntotal_connections_received:3\r\ntotal_commands_processed:42\r\n"
            ),
            Some(42)
        );
        assert_eq!(parse_commands_processed("# Stats\r\n"), None);
    }

    #[test]
    fn the_missing_binary_message_says_what_to_install() {
        assert_eq!(
            missing_message("redis", "layered"),
            "experiment \"redis\" config \"layered\" needs redis-server; install the Debian package \
             redis-server (apt-get install redis-server)"
        );
        let args = arguments(7000);
        assert_eq!(
            args,
            [
                "--port",
                "7000",
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no"
            ]
        );
    }

    /// Starts a real redis-server. It does not skip: without the binary it fails and
    /// says what to install.
    #[test]
    fn redis_server_starts_answers_and_stops_by_pid() {
        let binary = find_on_path().unwrap_or_else(|| {
            panic!(
                "redis-server is not on PATH, so this test cannot run (it does not skip): \
                 install the Debian package redis-server (apt-get install redis-server)"
            )
        });
        let dir = std::env::temp_dir().join(format!("loadgen-redis-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = crate::matrix::services::free_ports(1).unwrap()[0];
        let mut redis = start(&binary, port, &dir.join("redis.log")).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ready = runtime
            .block_on(wait_ready(&mut redis, Duration::from_secs(20)))
            .unwrap();
        assert!(ready < Duration::from_secs(20));
        let before = runtime.block_on(commands_processed(redis.addr)).unwrap();
        runtime.block_on(ping(redis.addr)).unwrap();
        let after = runtime.block_on(commands_processed(redis.addr)).unwrap();
        // Between the two answers: the PING and exactly one of the two INFOs (whichever
        // way INFO counts itself), which is what the runner subtracts.
        assert_eq!(after, before + 2);
        let pid = redis.pid();
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        let how = redis.stop(Duration::from_secs(10));
        assert!(how.starts_with("stopped by SIGTERM"), "{how}");
        assert!(redis.exited().is_some());
        assert!(
            runtime.block_on(ping(redis.addr)).is_err(),
            "redis still answers after it was stopped"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
