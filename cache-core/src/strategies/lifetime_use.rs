//! What each strategy does with the lifetime the policy gives a value, and
//! the start-up check built on it: [`check_lifetimes`] refuses a list of
//! strategies that would silently do nothing under a policy's ttl and stale
//! window (at `ttl = 0`, a `second-hit`, `early-refresh` or `ttl-jitter` with
//! no `origin-ttl` to give values a lifetime), or whose later strategy undoes
//! an earlier one (`origin-ttl` after `ttl-jitter`).

use std::fmt;
use std::time::Duration;

use super::CATALOGUE;

/// What a strategy does with the lifetime the policy (`ttl`, `stale`) gives
/// each value, as [`check_lifetimes`] reads it. The cache runs every
/// strategy at `ttl = 0` as at any other ttl; this says whether it then has
/// anything to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LifetimeUse {
    /// Gives each value a ttl of its own, replacing the one chosen before it
    /// (`origin-ttl`: the origin's `Cache-Control`); at `ttl = 0` it keeps
    /// what the origin allows.
    Sets,
    /// Keeps each value past its freshness for its own use (`stale-if-error`:
    /// for a failed fetch to fall back on); at `ttl = 0` nothing is served as
    /// a hit, but the last good value is still kept for that.
    KeepsExpired,
    /// Changes the ttl it is handed (`ttl-jitter`): needs a ttl above 0, from
    /// the policy or from a strategy listed before it that [`Sets`](Self::Sets)
    /// one.
    Adjusts,
    /// Acts on fresh hits (`early-refresh`): needs values kept fresh, by the
    /// policy's ttl or a strategy of the list that [`Sets`](Self::Sets) one.
    OnFreshHits,
    /// Decides whether a value is kept (`second-hit`): needs something to keep:
    /// a ttl or a stale window, or a strategy of the list that
    /// [`Sets`](Self::Sets) a ttl or [`KeepsExpired`](Self::KeepsExpired).
    Admits,
}

impl LifetimeUse {
    /// One line on what the strategy does at `ttl = 0` (with `stale = 0`), for
    /// the catalogue.
    pub fn at_zero_ttl(self) -> &'static str {
        match self {
            LifetimeUse::Sets => "stores what the origin allows, and nothing else",
            LifetimeUse::KeepsExpired => {
                "every call fetches, and the last good value is kept for a failed fetch"
            }
            LifetimeUse::Adjusts => {
                "nothing to act on (refused at start-up), unless origin-ttl is listed before it"
            }
            LifetimeUse::OnFreshHits => {
                "no hits to act on (refused at start-up), unless origin-ttl is listed with it"
            }
            LifetimeUse::Admits => {
                "nothing to keep (refused at start-up), unless a stale window, origin-ttl or stale-if-error gives it some"
            }
        }
    }

    /// How to give a strategy of this use something to act on at `ttl = 0`.
    fn remedy(self) -> &'static str {
        match self {
            LifetimeUse::Adjusts => {
                "give a ttl above 0, or list origin-ttl before it to keep what the origin allows"
            }
            LifetimeUse::Admits => {
                "give a ttl or a stale window above 0, or list origin-ttl (or stale-if-error) with it"
            }
            _ => "give a ttl above 0, or list origin-ttl with it to keep what the origin allows",
        }
    }

    /// What a strategy of this use does, in words, for a refusal.
    fn what_it_does(self) -> &'static str {
        match self {
            LifetimeUse::Sets => "sets each value's ttl",
            LifetimeUse::KeepsExpired => "keeps values past their freshness",
            LifetimeUse::Adjusts => "changes the ttl it is handed",
            LifetimeUse::OnFreshHits => "acts on fresh hits",
            LifetimeUse::Admits => "decides which values are kept",
        }
    }
}

/// Why a list of strategies cannot do what it says under a policy (see
/// [`check_lifetimes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LifetimeConflict {
    /// `strategy` has nothing to act on: the policy keeps nothing for it (ttl
    /// 0, and for [`LifetimeUse::Admits`] a stale window of 0 too) and no
    /// strategy of the list gives a lifetime where it would need one.
    NothingToActOn {
        /// The strategy that would do nothing.
        strategy: &'static str,
        /// What it does with lifetimes.
        uses: LifetimeUse,
    },
    /// `by`, listed after `strategy`, replaces the ttl `strategy` adjusted.
    Undone {
        /// The strategy whose work is undone.
        strategy: &'static str,
        /// The strategy after it that undoes it.
        by: &'static str,
    },
}

impl LifetimeConflict {
    /// The strategy that would be cancelled.
    pub fn strategy(&self) -> &'static str {
        match self {
            LifetimeConflict::NothingToActOn { strategy, .. }
            | LifetimeConflict::Undone { strategy, .. } => strategy,
        }
    }
}

impl fmt::Display for LifetimeConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LifetimeConflict::NothingToActOn { strategy, uses } => write!(
                f,
                "{strategy} {}, and at ttl 0 nothing is kept for it to act on: {}",
                uses.what_it_does(),
                uses.remedy()
            ),
            LifetimeConflict::Undone { strategy, by } => write!(
                f,
                "{by} replaces the ttl that {strategy}, listed before it, chose: list {strategy} after {by}"
            ),
        }
    }
}

/// Whether the strategies `names` (in the order they run; names outside the
/// catalogue are taken on trust) can each do what they say under a policy of
/// `ttl` and `stale`; the first one that cannot, and why.
///
/// The cache would run them all the same and silently get nothing from the
/// ones this refuses: `second-hit` at `ttl = 0` admits values nobody keeps,
/// `early-refresh` waits for hits that never come, `ttl-jitter` spreads a ttl
/// of 0, and a `ttl-jitter` before `origin-ttl` has its spread overwritten.
pub fn check_lifetimes(
    names: &[&str],
    ttl: Duration,
    stale: Duration,
) -> Result<(), LifetimeConflict> {
    let uses: Vec<(&'static str, LifetimeUse)> = names
        .iter()
        .filter_map(|name| CATALOGUE.iter().find(|e| e.name == *name))
        .map(|e| (e.name, e.lifetime))
        .collect();
    let sets =
        |list: &[(&'static str, LifetimeUse)]| list.iter().any(|(_, u)| *u == LifetimeUse::Sets);
    for (i, &(name, uses_lifetime)) in uses.iter().enumerate() {
        let nothing = match uses_lifetime {
            LifetimeUse::Sets => {
                if let Some(&(adjusted, _)) =
                    uses[..i].iter().find(|(_, u)| *u == LifetimeUse::Adjusts)
                {
                    return Err(LifetimeConflict::Undone {
                        strategy: adjusted,
                        by: name,
                    });
                }
                false
            }
            LifetimeUse::KeepsExpired => false,
            LifetimeUse::Adjusts => ttl.is_zero() && !sets(&uses[..i]),
            LifetimeUse::OnFreshHits => ttl.is_zero() && !sets(&uses),
            LifetimeUse::Admits => {
                ttl.is_zero()
                    && stale.is_zero()
                    && !uses
                        .iter()
                        .any(|(_, u)| matches!(u, LifetimeUse::Sets | LifetimeUse::KeepsExpired))
            }
        };
        if nothing {
            return Err(LifetimeConflict::NothingToActOn {
                strategy: name,
                uses: uses_lifetime,
            });
        }
    }
    Ok(())
}
