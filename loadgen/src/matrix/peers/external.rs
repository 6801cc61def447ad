//! A gateway the runner does not start: `url = "http://HOST:PORT/PATH"` in a
//! `[[config]]`, such as someone's own deployment. The runner starts nothing for such a
//! configuration (no subgraphs, no Redis): it sends the load to that address and path,
//! checks the answers before and after every window, and counts stale reads of a
//! workload, as for every gateway. What it cannot see it does not report: the process's
//! CPU and memory, its cache counters, the subgraphs' requests.

use std::net::{SocketAddr, ToSocketAddrs};

use super::install::PeerRecord;

/// What the report says of how such a gateway runs.
const SETTINGS: &str = "not started by the runner: its req/s, latency, answers and stale reads are measured; its CPU, memory, cache and subgraph requests are not";

/// A configuration's `url`, checked and resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalGateway {
    /// As the file gave it.
    pub url: String,
    /// Where it is reached (the host resolved once, when the file is read).
    pub addr: SocketAddr,
    /// The GraphQL endpoint's path, with its query string: where every request goes.
    pub path: String,
}

impl ExternalGateway {
    /// Check `url = ...` of the configuration at `at`: plain `http` (the load generator
    /// speaks no TLS), a host that resolves, a port (80 when none is given).
    pub fn parse(at: &str, url: &str) -> Result<ExternalGateway, String> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| format!("{at}: url = {url:?} is not a URL ({e})"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(format!(
                    "{at}: url = {url:?}: the load generator speaks plain http, not {other}"
                ))
            }
            None => {
                return Err(format!(
                    "{at}: url = {url:?}: give it as http://HOST:PORT/PATH"
                ))
            }
        }
        let host = uri
            .host()
            .ok_or_else(|| format!("{at}: url = {url:?} names no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        let addr = (host.trim_start_matches('[').trim_end_matches(']'), port)
            .to_socket_addrs()
            .map_err(|e| format!("{at}: url = {url:?}: {host} does not resolve ({e})"))?
            .next()
            .ok_or_else(|| format!("{at}: url = {url:?}: {host} resolves to no address"))?;
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/")
            .to_string();
        Ok(ExternalGateway {
            url: url.to_string(),
            addr,
            path,
        })
    }

    /// How the report names the configuration's gateway.
    pub fn record(&self, config: &str) -> PeerRecord {
        PeerRecord {
            config: config.to_string(),
            peer: "url".to_string(),
            label: format!("the gateway at {}", self.url),
            cache: Default::default(),
            versions: Vec::new(),
            settings: SETTINGS.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_gives_an_address_and_a_path() {
        let g = ExternalGateway::parse("config \"u\"", "http://127.0.0.1:4000/graphql").unwrap();
        assert_eq!(g.addr, "127.0.0.1:4000".parse().unwrap());
        assert_eq!(g.path, "/graphql");
        let g = ExternalGateway::parse("config \"u\"", "http://localhost/api?x=1").unwrap();
        assert_eq!(g.addr.port(), 80);
        assert_eq!(g.path, "/api?x=1");
        assert_eq!(
            g.record("u").label,
            "the gateway at http://localhost/api?x=1"
        );
    }

    #[test]
    fn what_it_cannot_reach_is_refused_naming_the_key() {
        for (url, says) in [
            ("https://127.0.0.1:4000/graphql", "plain http, not https"),
            ("127.0.0.1:4000", "http://HOST:PORT/PATH"),
            ("http://no-such-host.invalid:4000/", "does not resolve"),
            ("http://exa mple/", "is not a URL"),
        ] {
            let e = ExternalGateway::parse("config \"u\"", url).unwrap_err();
            assert!(
                e.contains("config \"u\": url = ") && e.contains(says),
                "{url}: {e}"
            );
        }
    }
}
