//! Scraping `/metrics`: Prometheus text exposition, parsed generically (every sample
//! is a name, its labels and a value, so counters the services add later need no
//! change here), and the window's differences.
//!
//! The runner scrapes every service at the start and the end of a measured window and
//! works with the difference ([`Scrape::delta`], [`WindowMetrics`]); it also reads the
//! subgraphs' request counters once a second through the window
//! ([`upstream_every_second`]) for the run's timeline.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::http_probe;
/// How long a service may take to answer `/metrics`: a loaded Node peer answers it
/// behind the requests it holds.
const SCRAPE_DEADLINE: Duration = Duration::from_secs(30);

/// Scrape one service's `/metrics`.
pub async fn scrape(addr: SocketAddr) -> anyhow::Result<Scrape> {
    let answer = http_probe::get(addr, "/metrics", SCRAPE_DEADLINE).await?;
    if answer.status != 200 {
        bail!("{addr}/metrics answered {}", answer.status);
    }
    Ok(Scrape::parse(&answer.text()))
}

/// Scrape every named service, all at once: a loaded service that is slow to answer
/// (a Node peer's event loop queues `/metrics` behind its requests) must not move the
/// instant at which the others are read.
pub async fn scrape_all(
    services: &[(String, SocketAddr)],
) -> anyhow::Result<BTreeMap<String, Scrape>> {
    let scraped = futures::future::join_all(services.iter().map(|(_, addr)| scrape(*addr))).await;
    let mut all = BTreeMap::new();
    for ((name, _), scraped) in services.iter().zip(scraped) {
        let scraped = scraped.map_err(|e| e.context(format!("scraping {name}")))?;
        all.insert(name.to_string(), scraped);
    }
    Ok(all)
}

/// Where the subgraphs' requests are counted: each subgraph's own
/// `subgraph_requests_total` when the runner started them all, else the gateways'
/// `gateway_upstream_requests_total` (someone else's subgraphs may count nothing).
#[derive(Debug, Clone)]
pub struct UpstreamCounter {
    /// The services whose counter is summed, by name.
    pub services: Vec<(String, SocketAddr)>,
    pub metric: &'static str,
}

impl UpstreamCounter {
    pub const SUBGRAPHS: &'static str = "subgraph_requests_total";
    pub const GATEWAYS: &'static str = "gateway_upstream_requests_total";

    /// The counter summed over one scrape of every service; `None` when no service
    /// counts (a gateway the runner did not start, and no subgraphs of its own).
    pub fn total(&self, scrapes: &BTreeMap<String, Scrape>) -> Option<f64> {
        if self.services.is_empty() {
            return None;
        }
        self.services
            .iter()
            .map(|(name, _)| scrapes.get(name).and_then(|s| s.sum(self.metric)))
            .sum()
    }
}

/// The subgraphs' requests in each whole second of a window of `seconds` seconds that
/// starts at `start`: the counter summed, read at every second's edge after the first
/// (`first`: the window's own starting scrape), differenced. A second whose edge could
/// not be read is `None`.
pub async fn upstream_every_second(
    counter: UpstreamCounter,
    start: Instant,
    seconds: u64,
    first: Option<f64>,
) -> Vec<Option<f64>> {
    let mut readings = Vec::with_capacity(seconds as usize + 1);
    readings.push(first);
    for k in 1..=seconds {
        tokio::time::sleep_until((start + Duration::from_secs(k)).into()).await;
        let mut total = Some(0.0);
        for (_, addr) in &counter.services {
            let count = scrape(*addr).await.ok().and_then(|s| s.sum(counter.metric));
            total = total.zip(count).map(|(a, b)| a + b);
        }
        readings.push(total);
    }
    readings
        .windows(2)
        .map(|edge| match (edge[0], edge[1]) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        })
        .collect()
}

/// Every service's metric differences over the window.
#[derive(Debug, Clone)]
pub struct WindowMetrics {
    pub delta: BTreeMap<String, Scrape>,
    /// The gateway instances' names, in start order.
    pub gateways: Vec<String>,
    /// The subgraphs whose own counters give the requests they received, when the
    /// runner started and counts every subgraph (else the gateways' counters do).
    pub subgraphs: Option<Vec<String>>,
}

impl WindowMetrics {
    /// The differences between two scrapes of the same services.
    pub fn between(
        before: &BTreeMap<String, Scrape>,
        after: &BTreeMap<String, Scrape>,
        gateways: Vec<String>,
        subgraphs: Option<Vec<String>>,
    ) -> WindowMetrics {
        let delta = after
            .iter()
            .map(|(name, a)| {
                (
                    name.clone(),
                    a.delta(before.get(name).unwrap_or(&Scrape::default())),
                )
            })
            .collect();
        WindowMetrics {
            delta,
            gateways,
            subgraphs,
        }
    }

    /// A gateway counter summed over the instances; absent when no instance has it.
    pub fn gateway_sum(&self, metric: &str) -> Option<f64> {
        let present: Vec<f64> = self
            .gateways
            .iter()
            .filter_map(|n| self.delta.get(n).and_then(|d| d.sum(metric)))
            .collect();
        (!present.is_empty()).then(|| present.iter().sum())
    }

    /// One service's counter.
    pub fn of(&self, service: &str, metric: &str) -> Option<f64> {
        self.delta.get(service).and_then(|d| d.sum(metric))
    }

    /// One service's counter, only its series with `label="value"`.
    pub fn of_labelled(
        &self,
        service: &str,
        metric: &str,
        label: &str,
        value: &str,
    ) -> Option<f64> {
        let delta = self.delta.get(service)?;
        let mut series = delta
            .samples
            .iter()
            .filter(|s| s.name == metric && s.labels.get(label).is_some_and(|v| v == value))
            .peekable();
        series.peek()?;
        Some(series.map(|s| s.value).sum())
    }

    /// Requests the subgraphs received (their own counters; the gateways' upstream
    /// counters when a subgraph has none).
    pub fn upstream_requests(&self) -> Option<f64> {
        let own: Option<f64> = self.subgraphs.as_ref().and_then(|names| {
            if names.is_empty() {
                return None;
            }
            names
                .iter()
                .map(|n| self.of(n, UpstreamCounter::SUBGRAPHS))
                .sum()
        });
        own.or_else(|| self.gateway_sum(UpstreamCounter::GATEWAYS))
    }

    /// A gateway counter summed over the instances per value of its labels `labels`
    /// (joined with `/`): `gateway_cache_strategy_decisions_total` by strategy and
    /// decision, for instance.
    pub fn gateway_by(&self, metric: &str, labels: &[&str]) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for name in &self.gateways {
            let Some(delta) = self.delta.get(name) else {
                continue;
            };
            for sample in delta.samples.iter().filter(|s| s.name == metric) {
                let key: Vec<&str> = labels
                    .iter()
                    .map(|l| sample.labels.get(*l).map_or("", String::as_str))
                    .collect();
                *out.entry(key.join("/")).or_insert(0.0) += sample.value;
            }
        }
        out
    }

    /// Every series' difference, per service, for the record.
    pub fn to_maps(&self) -> BTreeMap<String, BTreeMap<String, f64>> {
        self.delta
            .iter()
            .map(|(k, v)| (k.clone(), v.to_map()))
            .collect()
    }
}

/// One sample: `name{label="value",...} 12.5`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// `name{a="1",b="2"}`: a stable key for the series.
    pub fn series(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }
}

/// All samples of one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// Parse exposition text. Comment lines are skipped, and so are malformed lines: a
    /// service's odd line must not sink a whole run.
    pub fn parse(text: &str) -> Scrape {
        Scrape {
            samples: text.lines().filter_map(parse_line).collect(),
        }
    }

    /// Whether any sample has this name.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }

    /// Sum of all series of a metric; `None` when it is absent.
    pub fn sum(&self, name: &str) -> Option<f64> {
        self.has(name).then(|| {
            self.samples
                .iter()
                .filter(|s| s.name == name)
                .map(|s| s.value)
                .sum()
        })
    }

    /// Sum of the series of a metric whose label `key` equals `value`.
    pub fn sum_where(&self, name: &str, key: &str, value: &str) -> Option<f64> {
        let matching: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.name == name && s.labels.get(key).is_some_and(|v| v == value))
            .map(|s| s.value)
            .collect();
        (!matching.is_empty()).then(|| matching.iter().sum())
    }

    /// `self - earlier`, series by series (a series absent earlier counts from zero).
    pub fn delta(&self, earlier: &Scrape) -> Scrape {
        let before: BTreeMap<String, f64> = earlier
            .samples
            .iter()
            .map(|s| (s.series(), s.value))
            .collect();
        Scrape {
            samples: self
                .samples
                .iter()
                .map(|s| Sample {
                    value: s.value - before.get(&s.series()).copied().unwrap_or(0.0),
                    ..s.clone()
                })
                .collect(),
        }
    }

    /// Every series and its value, for the record.
    pub fn to_map(&self) -> BTreeMap<String, f64> {
        self.samples.iter().map(|s| (s.series(), s.value)).collect()
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let (labels, rest) = if line[name_end..].starts_with('{') {
        let (labels, consumed) = parse_labels(&line[name_end + 1..])?;
        (labels, &line[name_end + 1 + consumed..])
    } else {
        (BTreeMap::new(), &line[name_end..])
    };
    // The value, then an optional timestamp.
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parse `a="1",b="x\"y"}` and return the labels and the bytes consumed (through `}`).
fn parse_labels(text: &str) -> Option<(BTreeMap<String, String>, usize)> {
    let mut labels = BTreeMap::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    loop {
        while i < bytes.len() && (bytes[i] == b',' || bytes[i].is_ascii_whitespace()) {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'}' {
            return Some((labels, i + 1));
        }
        let eq = i + text[i..].find('=')?;
        let key = text[i..eq].trim().to_string();
        i = eq + 1;
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        i += 1;
        let mut value = String::new();
        loop {
            match bytes.get(i)? {
                b'\\' => {
                    match bytes.get(i + 1)? {
                        b'n' => value.push('\n'),
                        other => value.push(*other as char),
                    }
                    i += 2;
                }
                b'"' => {
                    i += 1;
                    break;
                }
                _ => {
                    // Copy one UTF-8 character.
                    let ch = text[i..].chars().next()?;
                    value.push(ch);
                    i += ch.len_utf8();
                }
            }
        }
        labels.insert(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
# HELP gateway_requests_total Requests.
# TYPE gateway_requests_total counter
gateway_requests_total 120
gateway_upstream_requests_total{subgraph="user"} 240
gateway_upstream_requests_total{subgraph="post"} 360 1700000000000
gateway_cache_hits_total{namespace="Query.me"} 7
gateway_cache_hits_total{namespace="Query.topPosts",odd="a \"quoted\" , } value"} 3
process_resident_memory_bytes 1.5e6
broken line without value
latency_bucket{le="+Inf"} +Inf
"#;

    #[test]
    fn parses_names_labels_and_values() {
        let s = Scrape::parse(TEXT);
        assert_eq!(s.samples.len(), 7);
        assert_eq!(s.sum("gateway_requests_total"), Some(120.0));
        assert_eq!(s.sum("gateway_upstream_requests_total"), Some(600.0));
        assert_eq!(
            s.sum_where("gateway_upstream_requests_total", "subgraph", "user"),
            Some(240.0)
        );
        assert_eq!(s.sum("gateway_cache_hits_total"), Some(10.0));
        assert_eq!(s.sum("process_resident_memory_bytes"), Some(1.5e6));
        assert_eq!(s.sum("gateway_cache_misses_total"), None);
        let odd = s
            .samples
            .iter()
            .find(|x| x.labels.contains_key("odd"))
            .unwrap();
        assert_eq!(odd.labels["odd"], r#"a "quoted" , } value"#);
        assert_eq!(odd.labels["namespace"], "Query.topPosts");
    }

    #[test]
    fn delta_subtracts_series_by_series() {
        let before = Scrape::parse("a{x=\"1\"} 10\na{x=\"2\"} 5\n");
        let after = Scrape::parse("a{x=\"1\"} 15\na{x=\"2\"} 5\na{x=\"3\"} 4\nb 2\n");
        let d = after.delta(&before);
        assert_eq!(d.sum_where("a", "x", "1"), Some(5.0));
        assert_eq!(d.sum_where("a", "x", "2"), Some(0.0));
        assert_eq!(d.sum_where("a", "x", "3"), Some(4.0));
        assert_eq!(d.sum("b"), Some(2.0));
        assert_eq!(d.to_map()["a{x=\"1\"}"], 5.0);
    }
}
