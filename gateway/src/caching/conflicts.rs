//! Cache settings that would silently cancel one another, refused at start-up with a
//! message that names both sides (the flag, or the `--policy` file's field).
//!
//! [`CacheSettings::check`] (no schema needed; `gateway` runs it before it reads any
//! SDL):
//! - a field's strategies against its ttl and stale window: cache-core's
//!   [`check_lifetimes`] (at ttl 0, `second-hit`, `early-refresh` and `ttl-jitter`
//!   have nothing to act on unless `origin-ttl` gives values a lifetime; `origin-ttl`
//!   overwrites the ttl a `ttl-jitter` before it spread), for `--ttl`/`--stale`/
//!   `--strategy` and for every policy field that overrides one of them;
//! - a policy's `skip = true` beside `ttl`, `stale`, `key`, `references`, `storage`
//!   or `strategies` (a skipped field is never cached, so they would do nothing);
//! - `--invalidation off` beside a policy's `invalidate` or `references` (both exist
//!   only for invalidation).
//!
//! [`check_flags`] (the command line): a cache flag with a default, given where its
//! subject is absent: any of them without a cache, `--l1-*` without layered storage,
//! `--redis-autopipeline`/`--redis-timeout-ms` without Redis, `--cache-max-entries`/
//! `--cache-eviction` without the memory store.
//!
//! [`check_policy_against`] (once the schema is composed): every policy names a field
//! of the schema (a misspelt one would silently apply to nothing), a mutation's
//! policy holds only `invalidate` (mutations are never cached), `invalidate` appears
//! only on mutations, and `key.args` only on root fields, naming arguments the field
//! has (an argument left out of the key by a typo would make calls that differ by it
//! share one entry).

use cache_core::strategies::check_lifetimes;

use super::settings::{CacheSettings, FieldPolicy, PolicyFile, StorageKind};
use crate::supergraph::Supergraph;

/// Seconds as `--ttl` takes them (`0`, `0.5`, `10`).
fn seconds(d: std::time::Duration) -> String {
    format!("{}", d.as_secs_f64())
}

impl CacheSettings {
    /// Refuses settings where one would silently cancel another (see the module
    /// documentation); the message names both.
    pub fn check(&self) -> Result<(), String> {
        let policy = self.policies.describe();
        let defaults: Vec<&str> = self.strategies.iter().map(|s| s.name()).collect();
        let flag_list = |names: &[&str]| {
            names
                .iter()
                .map(|n| format!("--strategy {n}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        check_lifetimes(&defaults, self.ttl, self.stale).map_err(|conflict| match conflict {
            cache_core::strategies::LifetimeConflict::Undone { strategy, by } => {
                format!("--strategy {strategy} and --strategy {by}: {conflict}")
            }
            _ => format!(
                "--ttl {} and --strategy {}: {conflict}",
                seconds(self.ttl),
                conflict.strategy()
            ),
        })?;
        let mut names: Vec<&String> = self.policies.policy.keys().collect();
        names.sort();
        for name in names {
            let rule = &self.policies.policy[name];
            if rule.skip {
                if let Some(field) = rule.pointless_beside_skip() {
                    return Err(format!(
                        "{policy}: {name}.skip = true and {name}.{field}: a skipped field is never cached, so its {field} would do nothing; drop one of them"
                    ));
                }
                continue;
            }
            if !self.invalidation {
                for (field, set) in [
                    ("invalidate", !rule.invalidate.is_empty()),
                    ("references", !rule.references.is_empty()),
                ] {
                    if set {
                        return Err(format!(
                            "--invalidation off and {policy}: {name}.{field}: with invalidation off nothing is ever invalidated, so {name}.{field} would do nothing; drop one of them"
                        ));
                    }
                }
            }
            if rule.ttl.is_none() && rule.stale.is_none() && rule.strategies.is_none() {
                continue;
            }
            let ttl = rule
                .ttl
                .map_or(self.ttl, std::time::Duration::from_secs_f64);
            let stale = rule
                .stale
                .map_or(self.stale, std::time::Duration::from_secs_f64);
            let own: Vec<&str>;
            let (list, list_source) = match &rule.strategies {
                Some(specs) => {
                    own = specs
                        .iter()
                        .map(|s| s.split(':').next().unwrap_or(s).trim())
                        .collect();
                    (&own[..], format!("{name}.strategies {specs:?}"))
                }
                None => (&defaults[..], flag_list(&defaults)),
            };
            check_lifetimes(list, ttl, stale).map_err(|conflict| {
                let ttl_source = match rule.ttl {
                    Some(t) => format!("{name}.ttl = {t}"),
                    None => format!("--ttl {}", seconds(self.ttl)),
                };
                // A field that inherits --strategy can also opt out of it.
                let opt_out = if rule.strategies.is_none() {
                    format!("; or give {name} strategies = [] to run none")
                } else {
                    String::new()
                };
                match conflict {
                    cache_core::strategies::LifetimeConflict::Undone { .. } => {
                        format!("{policy}: {list_source}: {conflict}")
                    }
                    _ => format!("{policy}: {ttl_source} and {list_source}: {conflict}{opt_out}"),
                }
            })?;
        }
        Ok(())
    }
}

impl FieldPolicy {
    /// The first field that `skip = true` would make do nothing.
    fn pointless_beside_skip(&self) -> Option<&'static str> {
        [
            ("ttl", self.ttl.is_some()),
            ("stale", self.stale.is_some()),
            (
                "key",
                self.key.args.is_some() || !self.key.headers.is_empty(),
            ),
            ("references", !self.references.is_empty()),
            ("storage", self.storage.is_some()),
            ("strategies", self.strategies.is_some()),
        ]
        .into_iter()
        .find_map(|(field, set)| set.then_some(field))
    }

    /// Whether it sets anything about caching (everything but `invalidate`).
    fn caches(&self) -> bool {
        self.skip || self.pointless_beside_skip().is_some()
    }
}

/// Refuses policies the composed schema makes do nothing (see the module
/// documentation).
pub fn check_policy_against(policies: &PolicyFile, supergraph: &Supergraph) -> Result<(), String> {
    let policy = policies.describe();
    let mut names: Vec<&String> = policies.policy.keys().collect();
    names.sort();
    for name in names {
        let rule = &policies.policy[name];
        // `Type.field`, or `Type.a+b` for entity fields fetched together.
        let (ty, fields) = name.split_once('.').unwrap_or((name, ""));
        let missing = fields
            .split('+')
            .find(|f| supergraph.field(ty, f).is_none());
        if let Some(field) = missing {
            return Err(format!(
                "{policy}: [policy.\"{name}\"]: the composed schema has no field {ty}.{field}, so this policy would apply to nothing"
            ));
        }
        let mutation = supergraph.mutation_type.as_deref() == Some(ty);
        if mutation && rule.caches() {
            return Err(format!(
                "{policy}: [policy.\"{name}\"]: {ty} is the mutation type, and mutations are never cached: only `invalidate` applies to it"
            ));
        }
        if !mutation && !rule.invalidate.is_empty() {
            return Err(format!(
                "{policy}: {name}.invalidate: only a mutation's policy invalidates ({name} is not a field of {}), so it would do nothing",
                supergraph.mutation_type.as_deref().unwrap_or("the mutation type")
            ));
        }
        if let Some(args) = &rule.key.args {
            if ty != supergraph.query_type {
                return Err(format!(
                    "{policy}: {name}.key.args: only root fields ({}.*) are keyed by their arguments; an entity field is keyed by its parent and selection, so key.args would do nothing",
                    supergraph.query_type
                ));
            }
            let known = &supergraph.field(ty, fields).map(|f| &f.args);
            if let Some(arg) = args
                .iter()
                .find(|a| !known.is_some_and(|k| k.iter().any(|d| &d.name == *a)))
            {
                return Err(format!(
                    "{policy}: {name}.key.args: {name} has no argument {arg:?}; calls that differ by their arguments would share one entry"
                ));
            }
        }
    }
    Ok(())
}

/// The cache's flags that have a default (or none), which `gateway` hands to
/// [`check_flags`] when the command line gave them.
pub const TUNING_FLAGS: [&str; 9] = [
    "--stale",
    "--cache-max-entries",
    "--cache-eviction",
    "--invalidation",
    "--cache-report-interval",
    "--l1-ttl",
    "--l1-max-entries",
    "--redis-autopipeline",
    "--redis-timeout-ms",
];

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Refuses the flags of `given` (some of [`TUNING_FLAGS`]) whose subject is absent:
/// `kinds` are the storages in use (`--storage` and the policies'), `None` when there
/// is no cache at all.
pub fn check_flags(given: &[&str], kinds: Option<&[StorageKind]>) -> Result<(), String> {
    let of = |flags: &[&str]| -> Vec<&str> {
        given
            .iter()
            .copied()
            .filter(|g| flags.contains(g))
            .collect()
    };
    let verb = |flags: &[&str], one: &str, many: &str| {
        format!(
            "{} {}",
            and_list(flags),
            if flags.len() == 1 { one } else { many }
        )
    };
    let Some(kinds) = kinds else {
        if given.is_empty() {
            return Ok(());
        }
        return Err(format!(
            "{} the cache: give --ttl or --policy too",
            verb(given, "configures", "configure")
        ));
    };
    let l1 = of(&["--l1-ttl", "--l1-max-entries"]);
    if !l1.is_empty() && !kinds.contains(&StorageKind::Layered) {
        return Err(format!(
            "{} the layered storage's in-process L1, and no entry lives in layered storage: give --storage layered (or a policy's storage = \"layered\")",
            verb(&l1, "sets", "set")
        ));
    }
    let knobs = of(&["--redis-autopipeline", "--redis-timeout-ms"]);
    if !knobs.is_empty() && !kinds.iter().any(|k| k.needs_redis()) {
        return Err(format!(
            "{} used only with --storage redis or layered (or a policy's storage)",
            verb(&knobs, "is", "are")
        ));
    }
    let memory = of(&["--cache-max-entries", "--cache-eviction"]);
    if !memory.is_empty() && !kinds.contains(&StorageKind::Memory) {
        return Err(format!(
            "{} the memory store, and no entry lives there with --storage {} (the layered storage's L1 has --l1-max-entries)",
            verb(&memory, "bounds", "bound"),
            kinds.first().map_or("redis", |k| k.name())
        ));
    }
    Ok(())
}
