//! Per-subgraph limits on the way upstream: how long to wait for a connection and for
//! an answer, and when that subgraph's circuit breaker opens.
//!
//! Every flag takes `VALUE` (the default for every subgraph) or `NAME=VALUE` (that
//! subgraph only), and may be repeated: `--subgraph-timeout 2s --subgraph-timeout
//! post=500ms` gives post-service 500 ms and the others 2 s. Bare values apply first,
//! named ones over them, whatever their order on the command line. A name that is not
//! a `--subgraph` is refused, naming the flag.

use std::time::Duration;

use cache_core::breaker::{BreakerSettings, ErrorRatio};

/// How long to wait, and when to stop trying, for one subgraph.
#[derive(Debug, Clone, PartialEq)]
pub struct SubgraphLimits {
    /// Opening a TCP connection (the request timeout still bounds it, when shorter).
    pub connect_timeout: Duration,
    /// One request, from taking a connection to the last byte of the answer (a retry of
    /// a reset keep-alive connection included).
    pub request_timeout: Duration,
    pub breaker: BreakerSettings,
}

impl Default for SubgraphLimits {
    fn default() -> Self {
        SubgraphLimits {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(10),
            breaker: BreakerSettings {
                consecutive_failures: 5,
                error_ratio: Some(ErrorRatio {
                    ratio: 0.5,
                    window: Duration::from_secs(10),
                    min_calls: 20,
                }),
                open_for: Duration::from_secs(5),
                probes: 1,
            },
        }
    }
}

/// The limits of every subgraph, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpstreamSettings {
    /// For subgraphs without limits of their own.
    pub defaults: SubgraphLimits,
    pub per_subgraph: Vec<(String, SubgraphLimits)>,
}

impl UpstreamSettings {
    /// The same limits for every subgraph.
    pub fn uniform(limits: SubgraphLimits) -> UpstreamSettings {
        UpstreamSettings {
            defaults: limits,
            per_subgraph: Vec::new(),
        }
    }

    /// The limits of subgraph `name`.
    pub fn of(&self, name: &str) -> &SubgraphLimits {
        self.per_subgraph
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&self.defaults, |(_, l)| l)
    }
}

/// The command line's per-subgraph flags (flattened into the gateway's).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UpstreamArgs {
    /// Timeout of one subgraph request, from taking a connection to the answer's last
    /// byte: DURATION for every subgraph, NAME=DURATION for one (e.g. post=500ms).
    /// Repeatable. Default 10s (or --upstream-timeout-ms).
    #[arg(long, value_name = "[NAME=]DURATION")]
    pub subgraph_timeout: Vec<String>,
    /// Timeout of opening a connection to a subgraph ([NAME=]DURATION, repeatable;
    /// default 2s).
    #[arg(long, value_name = "[NAME=]DURATION")]
    pub subgraph_connect_timeout: Vec<String>,
    /// Open a subgraph's circuit breaker after this many failures in a row (timeouts,
    /// refused or reset connections, 5xx answers); 0 turns the rule off
    /// ([NAME=]N, repeatable; default 5).
    #[arg(long, value_name = "[NAME=]N")]
    pub breaker_failures: Vec<String>,
    /// Also open it when at least this share of a window's requests failed; 0 turns the
    /// rule off ([NAME=]RATIO, repeatable; default 0.5).
    #[arg(long, value_name = "[NAME=]RATIO")]
    pub breaker_error_ratio: Vec<String>,
    /// The window of --breaker-error-ratio ([NAME=]DURATION; default 10s).
    #[arg(long, value_name = "[NAME=]DURATION")]
    pub breaker_window: Vec<String>,
    /// Fewest requests in the window before the error ratio counts ([NAME=]N; default 20).
    #[arg(long, value_name = "[NAME=]N")]
    pub breaker_min_requests: Vec<String>,
    /// How long an open breaker fails that subgraph's fields at once before it lets
    /// probes through ([NAME=]DURATION; default 5s).
    #[arg(long, value_name = "[NAME=]DURATION")]
    pub breaker_open_for: Vec<String>,
    /// Requests let through at once by a half-open breaker; as many successes close it
    /// ([NAME=]N; default 1).
    #[arg(long, value_name = "[NAME=]N")]
    pub breaker_probes: Vec<String>,
}

/// One subgraph's limits while the flags are read. The error-ratio rule's window and
/// volume are kept apart from its ratio, so each flag applies whatever the order of
/// the flags and whether a ratio turns the rule off and another on again; `given`
/// keeps the flags that reached this subgraph, for the refusals.
#[derive(Debug, Clone)]
struct Draft {
    limits: SubgraphLimits,
    ratio: f64,
    window: Duration,
    min_calls: u32,
    /// (flag, value as given, whether it named this subgraph).
    given: Vec<(&'static str, String, bool)>,
}

impl Draft {
    fn new(limits: &SubgraphLimits) -> Draft {
        let rule = limits.breaker.error_ratio;
        Draft {
            limits: limits.clone(),
            ratio: rule.map_or(0.0, |r| r.ratio),
            window: rule.map_or(Duration::from_secs(10), |r| r.window),
            min_calls: rule.map_or(20, |r| r.min_calls),
            given: Vec::new(),
        }
    }

    fn finish(mut self) -> SubgraphLimits {
        self.limits.breaker.error_ratio = (self.ratio > 0.0).then_some(ErrorRatio {
            ratio: self.ratio,
            window: self.window,
            min_calls: self.min_calls,
        });
        self.limits
    }

    /// The first flag of `flags` that reached this subgraph, named (`named`) or bare.
    fn got(&self, flags: &[&str], named: bool) -> Option<String> {
        self.given
            .iter()
            .find(|(flag, _, n)| flags.contains(flag) && *n == named)
            .map(|(flag, value, _)| format!("{flag} {value}"))
    }

    fn ratio_off(&self) -> bool {
        self.ratio <= 0.0
    }

    /// Neither rule can open this subgraph's breaker.
    fn breaker_off(&self) -> bool {
        self.ratio_off() && self.limits.breaker.consecutive_failures == u32::MAX
    }
}

/// One flag's setter: parse the value and put it into a subgraph's draft.
type Setter = fn(&mut Draft, &str) -> Result<(), String>;

/// The flags that tune the error-ratio rule, and those that tune an open breaker.
const RATIO_TUNING: [&str; 2] = ["--breaker-window", "--breaker-min-requests"];
const OPEN_TUNING: [&str; 2] = ["--breaker-open-for", "--breaker-probes"];

impl UpstreamArgs {
    /// The settings these flags give, for subgraphs `names`, over `defaults`.
    pub fn settings(
        &self,
        names: &[&str],
        defaults: SubgraphLimits,
    ) -> Result<UpstreamSettings, String> {
        let flags: [(&'static str, &[String], Setter); 8] = [
            ("--subgraph-timeout", &self.subgraph_timeout, |d, v| {
                d.limits.request_timeout = positive_duration(v)?;
                Ok(())
            }),
            (
                "--subgraph-connect-timeout",
                &self.subgraph_connect_timeout,
                |d, v| {
                    d.limits.connect_timeout = positive_duration(v)?;
                    Ok(())
                },
            ),
            ("--breaker-failures", &self.breaker_failures, |d, v| {
                let n: u32 = count(v)?;
                d.limits.breaker.consecutive_failures = if n == 0 { u32::MAX } else { n };
                Ok(())
            }),
            (
                "--breaker-error-ratio",
                &self.breaker_error_ratio,
                |d, v| {
                    d.ratio = v
                        .parse()
                        .ok()
                        .filter(|r: &f64| (0.0..=1.0).contains(r))
                        .ok_or_else(|| format!("{v:?} is not a share from 0 to 1"))?;
                    Ok(())
                },
            ),
            ("--breaker-window", &self.breaker_window, |d, v| {
                d.window = positive_duration(v)?;
                Ok(())
            }),
            (
                "--breaker-min-requests",
                &self.breaker_min_requests,
                |d, v| {
                    d.min_calls = count(v)?;
                    Ok(())
                },
            ),
            ("--breaker-open-for", &self.breaker_open_for, |d, v| {
                d.limits.breaker.open_for = positive_duration(v)?;
                Ok(())
            }),
            ("--breaker-probes", &self.breaker_probes, |d, v| {
                d.limits.breaker.probes = count(v)?.max(1);
                Ok(())
            }),
        ];
        let mut shared = Draft::new(&defaults);
        for (flag, values, set) in &flags {
            for value in values.iter().filter(|v| split(v).0.is_none()) {
                set(&mut shared, value).map_err(|e| format!("{flag} {value}: {e}"))?;
                shared.given.push((flag, value.clone(), false));
            }
        }
        let mut drafts: Vec<(String, Draft)> = names
            .iter()
            .map(|n| (n.to_string(), shared.clone()))
            .collect();
        for (flag, values, set) in &flags {
            for value in values.iter() {
                let (Some(name), v) = split(value) else {
                    continue;
                };
                let draft = drafts
                    .iter_mut()
                    .find(|(n, _)| n == name)
                    .map(|(_, d)| d)
                    .ok_or_else(|| {
                        format!("{flag} {value}: no subgraph is named {name:?} (see --subgraph)")
                    })?;
                set(draft, v).map_err(|e| format!("{flag} {value}: {e}"))?;
                draft.given.push((flag, value.clone(), true));
            }
        }
        refuse_cancelled(&shared, &drafts)?;
        Ok(UpstreamSettings {
            defaults: shared.finish(),
            per_subgraph: drafts.into_iter().map(|(n, d)| (n, d.finish())).collect(),
        })
    }
}

/// Refuses a flag that another cancels: the error-ratio rule's window or volume where
/// the rule is off, an open breaker's settings where it never opens, and a connect
/// timeout the request timeout would end first. A bare value is refused only when it
/// would do nothing for every subgraph.
fn refuse_cancelled(shared: &Draft, drafts: &[(String, Draft)]) -> Result<(), String> {
    for (name, d) in drafts {
        if let Some(flag) = d.got(&RATIO_TUNING, true).filter(|_| d.ratio_off()) {
            return Err(format!(
                "{flag}: {name}'s error-ratio rule is off (--breaker-error-ratio 0), so this would do nothing; drop it, or give {name} a ratio above 0"
            ));
        }
        if let Some(flag) = d.got(&OPEN_TUNING, true).filter(|_| d.breaker_off()) {
            return Err(format!(
                "{flag}: {name}'s breaker never opens (--breaker-failures 0 and --breaker-error-ratio 0), so this would do nothing; drop it, or turn a rule on"
            ));
        }
        let connect = d
            .got(&["--subgraph-connect-timeout"], true)
            .or_else(|| d.got(&["--subgraph-connect-timeout"], false));
        if let Some(flag) = connect {
            if d.limits.connect_timeout > d.limits.request_timeout {
                return Err(format!(
                    "{flag}: longer than {name}'s request timeout ({:?}), which ends the connection attempt first; give a connect timeout no longer than the request timeout (--subgraph-timeout, --upstream-timeout-ms)",
                    d.limits.request_timeout
                ));
            }
        }
    }
    if let Some(flag) = shared.got(&RATIO_TUNING, false) {
        if drafts.iter().all(|(_, d)| d.ratio_off()) {
            return Err(format!(
                "{flag}: the error-ratio rule is off for every subgraph (--breaker-error-ratio 0), so this would do nothing"
            ));
        }
    }
    if let Some(flag) = shared.got(&OPEN_TUNING, false) {
        if drafts.iter().all(|(_, d)| d.breaker_off()) {
            return Err(format!(
                "{flag}: no subgraph's breaker ever opens (--breaker-failures 0 and --breaker-error-ratio 0), so this would do nothing"
            ));
        }
    }
    Ok(())
}

/// `NAME=VALUE` as (Some(NAME), VALUE); `VALUE` as (None, VALUE).
fn split(text: &str) -> (Option<&str>, &str) {
    match text.split_once('=') {
        Some((name, value)) => (Some(name), value),
        None => (None, text),
    }
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration like 500ms or 2s ({e})"))?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

fn count(text: &str) -> Result<u32, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a whole number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pairs: &[(&str, &str)]) -> UpstreamArgs {
        let mut a = UpstreamArgs::default();
        for (flag, value) in pairs {
            let list = match *flag {
                "timeout" => &mut a.subgraph_timeout,
                "connect" => &mut a.subgraph_connect_timeout,
                "failures" => &mut a.breaker_failures,
                "ratio" => &mut a.breaker_error_ratio,
                "window" => &mut a.breaker_window,
                "min" => &mut a.breaker_min_requests,
                "open" => &mut a.breaker_open_for,
                "probes" => &mut a.breaker_probes,
                _ => unreachable!(),
            };
            list.push(value.to_string());
        }
        a
    }

    #[test]
    fn named_values_override_the_default_whatever_the_order() {
        let s = args(&[
            ("timeout", "post=500ms"),
            ("timeout", "2s"),
            ("probes", "user=3"),
        ])
        .settings(&["user", "post"], SubgraphLimits::default())
        .unwrap();
        assert_eq!(s.of("post").request_timeout, Duration::from_millis(500));
        assert_eq!(s.of("user").request_timeout, Duration::from_secs(2));
        assert_eq!(s.of("user").breaker.probes, 3);
        assert_eq!(s.of("post").breaker.probes, 1);
    }

    #[test]
    fn rules_turn_off_with_zero() {
        let s = args(&[("failures", "0"), ("ratio", "post=0"), ("window", "30s")])
            .settings(&["user", "post"], SubgraphLimits::default())
            .unwrap();
        assert_eq!(s.of("user").breaker.consecutive_failures, u32::MAX);
        assert_eq!(s.of("post").breaker.error_ratio, None);
        assert_eq!(
            s.of("user").breaker.error_ratio.unwrap().window,
            Duration::from_secs(30)
        );
    }

    #[test]
    fn a_bare_window_reaches_a_subgraph_whose_ratio_a_named_flag_turns_on() {
        let s = args(&[("ratio", "0"), ("ratio", "post=0.2"), ("window", "30s")])
            .settings(&["user", "post"], SubgraphLimits::default())
            .unwrap();
        let rule = s.of("post").breaker.error_ratio.unwrap();
        assert_eq!((rule.ratio, rule.window), (0.2, Duration::from_secs(30)));
        assert_eq!(s.of("user").breaker.error_ratio, None);
    }

    #[test]
    fn bad_values_name_the_flag() {
        let err = |pairs: &[(&str, &str)]| {
            args(pairs)
                .settings(&["user", "post"], SubgraphLimits::default())
                .unwrap_err()
        };
        assert!(err(&[("timeout", "nope=1s")]).contains("--subgraph-timeout nope=1s"));
        assert!(err(&[("timeout", "post=fast")]).contains("--subgraph-timeout"));
        assert!(err(&[("timeout", "0ms")]).contains("more than zero"));
        assert!(err(&[("ratio", "1.5")]).contains("--breaker-error-ratio"));
        assert!(err(&[("failures", "-1")]).contains("--breaker-failures"));
    }
}
