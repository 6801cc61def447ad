//! The shipped strategies, and the registry that builds them by name.
//!
//! Each strategy is one file of this folder (besides `lifetime_use.rs`, the
//! start-up check of what each does with a lifetime): a type that implements
//! [`Strategy`] for every value type, and [`Registered`] (its name, one line
//! of what it does, its parameters and their defaults, and how to build it
//! from them). The `registry!` line at the bottom of this file declares the
//! file's module and enters the type in the [`CATALOGUE`]; nothing else
//! needs to know about it:
//!
//! - [`build`] turns a [`StrategySpec`] (`early-refresh:beta=2`) into a
//!   [`NamedStrategy`] for any value type, checking the name and every
//!   parameter;
//! - [`catalogue`] prints what exists, with each strategy's parameters, for
//!   `gateway strategies` and for the error a bad name or parameter gets;
//! - [`check_lifetimes`] refuses a list that cannot do what it says under a
//!   policy's ttl and stale window (each strategy declares its
//!   [`LifetimeUse`]): at `ttl = 0`, `second-hit`, `early-refresh` and
//!   `ttl-jitter` have nothing to act on unless `origin-ttl` gives values a
//!   lifetime, and `origin-ttl` replaces the ttl a `ttl-jitter` listed before
//!   it spread.
//!
//! The memory store's eviction policy ([`Eviction`]) is listed in the
//! catalogue too, as a setting of the store: it chooses among stored entries
//! when the store is full, where strategies decide per call.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::storage::Eviction;
use crate::strategy::{NamedStrategy, Strategy};

mod lifetime_use;
pub use lifetime_use::{check_lifetimes, LifetimeConflict, LifetimeUse};

/// One parameter of a strategy: its name, default and meaning.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// As written in a spec (`beta`).
    pub name: &'static str,
    /// The value used when the spec does not give one (`1.0`, `30s`).
    pub default: &'static str,
    /// One line on what it changes.
    pub help: &'static str,
}

/// What the registry knows of a strategy type: name, summary, parameters,
/// and how to build one.
pub trait Registered: Sized {
    /// The name a spec gives (`early-refresh`): lowercase words and dashes.
    const NAME: &'static str;
    /// One line on what it does.
    const SUMMARY: &'static str;
    /// Its parameters (every one has a default).
    const PARAMS: &'static [Param];
    /// What it does with the lifetime the policy gives each value: whether it
    /// can act at `ttl = 0`, and what it needs from the strategies before it.
    const LIFETIME: LifetimeUse;
    /// Builds one from checked parameters; an error names what is wrong.
    fn from_params(params: &Params<'_>) -> Result<Self, String>;
}

/// One catalogue entry.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The strategy's name.
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Its parameters.
    pub params: &'static [Param],
    /// What it does with each value's lifetime.
    pub lifetime: LifetimeUse,
}

impl Entry {
    const fn of<S: Registered>() -> Entry {
        Entry {
            name: S::NAME,
            summary: S::SUMMARY,
            params: S::PARAMS,
            lifetime: S::LIFETIME,
        }
    }
}

/// A strategy as named on a command line or in a policy file:
/// `NAME[:PARAM=VALUE,...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrategySpec {
    /// The name, e.g. `early-refresh`.
    pub name: String,
    /// The parameters given, in order.
    pub params: Vec<(String, String)>,
}

impl StrategySpec {
    /// Reads `NAME[:PARAM=VALUE,...]` (no check against the catalogue: see
    /// [`build`]).
    pub fn parse(text: &str) -> Result<StrategySpec, SpecError> {
        let text = text.trim();
        let (name, rest) = match text.split_once(':') {
            Some((name, rest)) => (name.trim(), Some(rest)),
            None => (text, None),
        };
        if name.is_empty() {
            return Err(SpecError::new(format!(
                "{text:?}: expected NAME[:PARAM=VALUE,...]"
            )));
        }
        let mut params = Vec::new();
        for pair in rest.into_iter().flat_map(|r| r.split(',')) {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                SpecError::new(format!("{text:?}: parameter {pair:?} is not PARAM=VALUE"))
            })?;
            params.push((key.trim().to_string(), value.trim().to_string()));
        }
        Ok(StrategySpec {
            name: name.to_string(),
            params,
        })
    }
}

impl fmt::Display for StrategySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (i, (key, value)) in self.params.iter().enumerate() {
            f.write_str(if i == 0 { ":" } else { "," })?;
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

/// Why a spec cannot be built. Its message ends with the catalogue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    message: String,
}

impl SpecError {
    fn new(message: String) -> SpecError {
        SpecError { message }
    }

    /// What is wrong, without the catalogue.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n\n{}", self.message, catalogue())
    }
}

impl std::error::Error for SpecError {}

/// A strategy's parameters: the spec's values over the declared defaults.
pub struct Params<'a> {
    strategy: &'static str,
    declared: &'static [Param],
    given: &'a [(String, String)],
}

impl Params<'_> {
    fn raw(&self, name: &str) -> &str {
        self.given
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .or_else(|| {
                self.declared
                    .iter()
                    .find(|p| p.name == name)
                    .map(|p| p.default)
            })
            .unwrap_or_else(|| panic!("{}: parameter {name} is not declared", self.strategy))
    }

    fn error(&self, name: &str, expected: &str) -> String {
        format!(
            "{}: {name}={:?}: expected {expected}",
            self.strategy,
            self.raw(name)
        )
    }

    /// A finite, non-negative number.
    pub fn number(&self, name: &str) -> Result<f64, String> {
        self.raw(name)
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| self.error(name, "a non-negative number"))
    }

    /// A non-negative integer.
    pub fn count(&self, name: &str) -> Result<u64, String> {
        self.raw(name)
            .parse::<u64>()
            .map_err(|_| self.error(name, "a non-negative integer"))
    }

    /// A duration: `30s`, `500ms`, `2m`, `1h`, or a number of seconds.
    pub fn duration(&self, name: &str) -> Result<Duration, String> {
        parse_duration(self.raw(name))
            .ok_or_else(|| self.error(name, "a duration such as 30s, 500ms or 2m"))
    }
}

/// `30s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number.trim().parse().ok()?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

/// Builds the strategy `spec` names, for values of type `V`, counted under
/// its catalogue name.
pub fn build<V: Clone + Send + Sync + 'static>(
    spec: &StrategySpec,
) -> Result<NamedStrategy<V>, SpecError> {
    let Some(entry) = CATALOGUE.iter().find(|e| e.name == spec.name) else {
        return Err(SpecError::new(format!(
            "there is no strategy named {:?}",
            spec.name
        )));
    };
    for (key, _) in &spec.params {
        if !entry.params.iter().any(|p| p.name == key) {
            let known = if entry.params.is_empty() {
                "none".to_string()
            } else {
                entry
                    .params
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(SpecError::new(format!(
                "{spec}: {} has no parameter {key:?} (its parameters: {known})",
                entry.name
            )));
        }
    }
    let params = Params {
        strategy: entry.name,
        declared: entry.params,
        given: &spec.params,
    };
    match construct::<V>(entry.name, &params) {
        Some(Ok(strategy)) => Ok(NamedStrategy::shared(entry.name, strategy)),
        Some(Err(message)) => Err(SpecError::new(format!("{spec}: {message}"))),
        None => unreachable!("every catalogue entry is constructible"),
    }
}

/// Reads and builds `text` (`NAME[:PARAM=VALUE,...]`).
pub fn parse_and_build<V: Clone + Send + Sync + 'static>(
    text: &str,
) -> Result<NamedStrategy<V>, SpecError> {
    build(&StrategySpec::parse(text)?)
}

/// The catalogue as text: every strategy with its parameters and summary,
/// then the store settings.
pub fn catalogue() -> String {
    let mut out =
        String::from("strategies (--strategy NAME[:PARAM=VALUE,...], repeatable, run in order):\n");
    for entry in CATALOGUE {
        out.push_str(&format!("  {:<16} {}\n", entry.name, entry.summary));
        for p in entry.params {
            out.push_str(&format!(
                "  {:<16}   {}={:<8} {}\n",
                "", p.name, p.default, p.help
            ));
        }
        out.push_str(&format!(
            "  {:<16}   at ttl 0: {}\n",
            "",
            entry.lifetime.at_zero_ttl()
        ));
    }
    out.push_str(
        "store settings (not hooks: the memory store applies them to the entries it holds):\n",
    );
    out.push_str("  --cache-eviction lru|tinylfu (default tinylfu)\n");
    for eviction in Eviction::ALL {
        out.push_str(&format!(
            "  {:<16} {}\n",
            eviction.name(),
            eviction.summary()
        ));
    }
    out
}

/// Declares each strategy's module and enters its type in the catalogue, in
/// catalogue order: one line per strategy.
macro_rules! registry {
    ($($module:ident :: $strategy:ident),* $(,)?) => {
        $(
            pub mod $module;
            pub use $module::$strategy;
        )*

        /// Every strategy the registry builds, in catalogue order.
        pub const CATALOGUE: &[Entry] = &[$(Entry::of::<$strategy>()),*];

        fn construct<V: Clone + Send + Sync + 'static>(
            name: &str,
            params: &Params<'_>,
        ) -> Option<Result<Arc<dyn Strategy<V>>, String>> {
            $(
                if name == <$strategy as Registered>::NAME {
                    return Some(
                        <$strategy as Registered>::from_params(params)
                            .map(|s| Arc::new(s) as Arc<dyn Strategy<V>>),
                    );
                }
            )*
            None
        }
    };
}

registry! {
    second_hit::SecondHitAdmission,
    early_refresh::EarlyRefresh,
    stale_if_error::StaleIfError,
    origin_ttl::OriginTtl,
    ttl_jitter::TtlJitter,
}
