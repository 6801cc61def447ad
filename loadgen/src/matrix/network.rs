//! A configuration's network: which services sit behind a `loadgen netproxy`, and the
//! proxy processes themselves.
//!
//! In an experiment file, `[config.network]` (or `network = { … }` inline) gives a
//! round-trip time per service, and optionally a jitter per service and a seed:
//!
//! ```toml
//! [config.network]
//! rtt = { redis = "2ms", post_service = "0.5ms" }
//! jitter = { redis = "100us" }
//! seed = 1
//! ```
//!
//! For every service named, the runner starts `loadgen netproxy` (this very executable)
//! on a free port in front of it, after the service and before the gateways, and gives
//! the gateways the proxy's address instead of the service's: `{redis}` becomes the
//! proxy's URL, `--subgraph post=…` points at the proxy. The runner's own traffic
//! (health checks, `/metrics`, Redis `INFO`) still goes straight to the service, so
//! only the gateway's traffic crosses the "network". The proxies are measured like the
//! other processes (CPU per client request, summed as `netproxy`) and stopped by PID.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::services::ServiceProcess;
use crate::cli::parse_duration_or_zero;

/// The service names a network may proxy, as the file names them.
pub const REDIS: &str = "redis";
pub const USER_SERVICE: &str = "user_service";
pub const POST_SERVICE: &str = "post_service";
/// The process name of the proxy in front of `service` (`netproxy-redis`); every one
/// starts with `netproxy`, which sums them in the CPU figures.
pub const PROXY_PREFIX: &str = "netproxy";
/// How long a proxy may take to say it listens.
const READY_DEADLINE: Duration = Duration::from_secs(10);
const READY_POLL: Duration = Duration::from_millis(20);

/// `[config.network]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkFile {
    #[serde(default)]
    rtt: BTreeMap<String, String>,
    #[serde(default)]
    jitter: BTreeMap<String, String>,
    #[serde(default)]
    seed: Option<u64>,
}

/// One proxied service.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// `redis`, `user_service` or `post_service`.
    pub service: String,
    #[serde(serialize_with = "micros")]
    pub rtt: Duration,
    #[serde(serialize_with = "micros")]
    pub jitter: Duration,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{}us", d.as_micros()))
}

/// A configuration's network: the proxied services (none: everything on loopback).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NetworkSpec {
    pub links: Vec<Link>,
    pub seed: u64,
}

impl NetworkSpec {
    /// Validate `[config.network]`; `at` names the configuration in messages, `redis`
    /// says whether it has a redis-server to proxy, and `subgraphs` names the subgraphs
    /// the runner starts, as a network names them (`user_service`, `post_service`, or
    /// `[[services.subgraph]]` names).
    pub fn resolve(
        file: NetworkFile,
        at: &str,
        redis: bool,
        subgraphs: &[String],
    ) -> Result<NetworkSpec, String> {
        let services: Vec<&str> = std::iter::once(REDIS)
            .chain(subgraphs.iter().map(String::as_str))
            .collect();
        for (key, table) in [("rtt", &file.rtt), ("jitter", &file.jitter)] {
            if let Some(unknown) = table.keys().find(|k| !services.contains(&k.as_str())) {
                return Err(format!(
                    "{at}: network.{key}.{unknown}: not a service; use {}",
                    services.join(", ")
                ));
            }
        }
        if let Some(lonely) = file.jitter.keys().find(|k| !file.rtt.contains_key(*k)) {
            return Err(format!(
                "{at}: network.jitter.{lonely} without network.rtt.{lonely}"
            ));
        }
        if file.rtt.contains_key(REDIS) && !redis {
            return Err(format!(
                "{at}: network.rtt.redis needs redis = true (a redis-server to put behind the proxy)"
            ));
        }
        let duration = |key: &str, service: &str, text: &str| {
            parse_duration_or_zero(text).map_err(|e| format!("{at}: network.{key}.{service}: {e}"))
        };
        let mut links = Vec::new();
        for (service, rtt) in &file.rtt {
            links.push(Link {
                service: service.clone(),
                rtt: duration("rtt", service, rtt)?,
                jitter: match file.jitter.get(service) {
                    Some(j) => duration("jitter", service, j)?,
                    None => Duration::ZERO,
                },
            });
        }
        Ok(NetworkSpec {
            links,
            seed: file.seed.unwrap_or(0),
        })
    }

    /// The link in front of `service`, if it is proxied.
    pub fn link(&self, service: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.service == service)
    }

    /// `redis: 2 ms, post_service: 0.5 ms` (jitter in brackets), for summaries.
    pub fn describe(&self) -> String {
        self.links
            .iter()
            .map(|l| {
                let ms = |d: Duration| format!("{} ms", d.as_secs_f64() * 1e3);
                if l.jitter.is_zero() {
                    format!("{}: {}", l.service, ms(l.rtt))
                } else {
                    format!("{}: {} (jitter {})", l.service, ms(l.rtt), ms(l.jitter))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The arguments of `loadgen netproxy` for `link` from `listen` to `to`.
pub fn proxy_arguments(link: &Link, seed: u64, listen: SocketAddr, to: SocketAddr) -> Vec<String> {
    let mut args = vec![
        "netproxy".to_string(),
        "--listen".into(),
        listen.to_string(),
        "--to".into(),
        to.to_string(),
        "--rtt".into(),
        format!("{}ns", link.rtt.as_nanos()),
    ];
    if !link.jitter.is_zero() {
        args.extend([
            "--jitter".into(),
            format!("{}ns", link.jitter.as_nanos()),
            "--seed".into(),
            seed.to_string(),
        ]);
    }
    args
}

/// Start `loadgen netproxy` (`loadgen`: the runner passes its own executable) on
/// `port` in front of `to`, and wait until it says it listens.
pub fn start_proxy(
    loadgen: &Path,
    link: &Link,
    seed: u64,
    port: u16,
    to: SocketAddr,
    log: &Path,
) -> anyhow::Result<(ServiceProcess, Duration)> {
    let listen = SocketAddr::from(([127, 0, 0, 1], port));
    let mut proxy = ServiceProcess::spawn(
        &format!("{PROXY_PREFIX}-{}", link.service),
        loadgen,
        &proxy_arguments(link, seed, listen, to),
        listen,
        log,
    )?;
    let started = Instant::now();
    loop {
        if let Some(status) = proxy.exited() {
            bail!(
                "{} exited ({status}) before it listened; `{}`; last log lines:\n{}",
                proxy.name,
                proxy.command_line.join(" "),
                proxy.log_tail(20)
            );
        }
        if std::fs::read_to_string(log).is_ok_and(|t| t.contains("netproxy listening on")) {
            return Ok((proxy, started.elapsed()));
        }
        if started.elapsed() >= READY_DEADLINE {
            bail!(
                "{} did not listen within {READY_DEADLINE:?}; last log lines:\n{}",
                proxy.name,
                proxy.log_tail(20)
            );
        }
        std::thread::sleep(READY_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> NetworkFile {
        toml::from_str(text).unwrap()
    }

    fn lab() -> Vec<String> {
        vec![USER_SERVICE.to_string(), POST_SERVICE.to_string()]
    }

    #[test]
    fn links_are_read_per_service() {
        let spec = NetworkSpec::resolve(
            file("rtt = { redis = \"2ms\", post_service = \"500us\" }\njitter = { redis = \"0.1ms\" }\nseed = 3"),
            "config #1",
            true,
            &lab(),
        )
        .unwrap();
        assert_eq!(spec.seed, 3);
        let redis = spec.link(REDIS).unwrap();
        assert_eq!(
            (redis.rtt, redis.jitter),
            (Duration::from_millis(2), Duration::from_micros(100))
        );
        assert_eq!(
            spec.link(POST_SERVICE).unwrap().rtt,
            Duration::from_micros(500)
        );
        assert!(spec.link(USER_SERVICE).is_none());
        assert_eq!(
            spec.describe(),
            "post_service: 0.5 ms, redis: 2 ms (jitter 0.1 ms)"
        );
        let args = proxy_arguments(
            redis,
            3,
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        );
        assert_eq!(
            args,
            [
                "netproxy",
                "--listen",
                "127.0.0.1:1",
                "--to",
                "127.0.0.1:2",
                "--rtt",
                "2000000ns",
                "--jitter",
                "100000ns",
                "--seed",
                "3"
            ]
        );
        // What the runner passes, the proxy's own parser reads back.
        assert_eq!(
            crate::cli::parse_duration_or_zero("2000000ns"),
            Ok(Duration::from_millis(2))
        );
    }

    #[test]
    fn the_redis_network_experiment_puts_redis_half_a_millisecond_and_two_away() {
        use crate::matrix::experiment::Experiment;
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/redis-network.toml");
        let e = Experiment::load(&path).unwrap();
        assert_eq!(e.configs.len(), 16);
        for c in &e.configs {
            let rtt = c.network.link(REDIS).map(|l| l.rtt);
            let expected = if c.name.ends_with("-0.5ms") {
                Some(Duration::from_micros(500))
            } else if c.name.ends_with("-2ms") {
                Some(Duration::from_millis(2))
            } else {
                None
            };
            assert_eq!(rtt, expected, "{}", c.name);
            assert_eq!(c.redis, !c.name.ends_with("-memory"), "{}", c.name);
            // The seed configurations bring the seed query; the others send the workload.
            assert_eq!(c.own_query, c.name.starts_with("seed-"), "{}", c.name);
            assert_eq!(
                c.workload.is_some(),
                c.name.starts_with("posts15-"),
                "{}",
                c.name
            );
            let autopipeline_off = c
                .gateway_args
                .ends_with(&["--redis-autopipeline".into(), "false".into()]);
            assert_eq!(autopipeline_off, c.name.contains("-noap-"), "{}", c.name);
        }
        let posts15 = e
            .configs
            .iter()
            .find(|c| c.name == "posts15-redis-2ms")
            .unwrap();
        let workload = posts15.workload.as_ref().unwrap();
        assert_eq!(
            workload.keys.len(),
            15,
            "a key set per field: 15 draws per request"
        );
        assert_eq!(workload.operations[0].reads.len(), 15);
        assert_eq!(posts15.baseline.as_deref(), Some("posts15-memory"));
    }

    #[test]
    fn bad_networks_are_named() {
        let err = |text: &str, redis: bool| {
            NetworkSpec::resolve(file(text), "config #2 (\"x\")", redis, &lab()).unwrap_err()
        };
        assert_eq!(
            err("rtt = { mysql = \"1ms\" }", true),
            "config #2 (\"x\"): network.rtt.mysql: not a service; use redis, user_service, post_service"
        );
        assert!(err("rtt = { redis = \"soon\" }", true).contains("network.rtt.redis"));
        assert!(err("rtt = { redis = \"1ms\" }", false).contains("needs redis = true"));
        assert!(err(
            "rtt = { redis = \"1ms\" }\njitter = { post_service = \"1ms\" }",
            true
        )
        .contains("network.jitter.post_service without network.rtt.post_service"));
        assert!(toml::from_str::<NetworkFile>("delay = 1").is_err());
    }
}
