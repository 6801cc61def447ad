//! Invalidation from outside: what `POST /invalidate` on the admin listener asks
//! (`--admin-listen`, [`crate::server::admin`]), and how each cache level answers.
//!
//! A change that does not come through the gateway's mutations (a batch job, another
//! service, a mutation sent straight to a subgraph) is otherwise seen only when the
//! entries expire. The body names what changed, in one of four forms:
//! - `{"references": ["Post:p1"]}`: the entries that hold these entities (a `*` key
//!   matches every key: `"Post:*"`);
//! - `{"types": ["Post"]}`: every entity of these types;
//! - `{"namespaces": ["Query.topPosts"]}`: every entry of these fields;
//! - `{"all": true}`: everything.
//!
//! **Each level.** The resolver cache drops its entries in every tier: in memory, in
//! Redis (so every gateway sharing it), and through the layered store's broadcast (so
//! every gateway's L1). The response strategy's stored answers are dropped by the
//! same references; they are not indexed by field, so a namespace drops them all. With
//! `--edge-purge` the edge cache in front is sent a purge by surrogate key
//! ([`super::edge`]). The answer counts what each level dropped:
//! `{"dropped": {"resolver": 3, "response": 1}}`, plus `"edge": "purged"` when the
//! edge took its purge.
//!
//! **Namespaces need a reference.** Entries are indexed by the entities they hold, not
//! by field. With `--admin-listen`, each resolver entry also carries its namespace as a
//! reference (`@namespace:Query.topPosts`; `@` cannot begin a GraphQL type name, so it
//! never meets an entity's). Without the flag no entry pays for it.

use serde::Deserialize;

use super::edge::{EdgeKeys, EdgePurge};
use super::requests::RequestCache;
use super::ResolverCache;

/// How a namespace is named among an entry's references.
pub const NAMESPACE_REFERENCE: &str = "@namespace:";

/// What an invalidation drops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Entries holding these references (`Type:key`, `Type:*`).
    References(Vec<String>),
    /// Every entity of these types.
    Types(Vec<String>),
    /// Every entry of these fields (`Query.topPosts`, `User.topPosts`).
    Namespaces(Vec<String>),
    /// Everything.
    All,
}

/// The body as sent: exactly one member.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    references: Option<Vec<String>>,
    types: Option<Vec<String>>,
    namespaces: Option<Vec<String>>,
    all: Option<bool>,
}

/// What a body must be, in the words of every refusal.
const FORMS: &str = "send one of {\"references\": [\"Post:p1\"]}, {\"types\": [\"Post\"]}, {\"namespaces\": [\"Query.topPosts\"]} or {\"all\": true}";

impl Target {
    /// The target of a request body; the refusal names what was wrong.
    pub fn parse(body: &[u8]) -> Result<Target, String> {
        let body: Body = serde_json::from_slice(body)
            .map_err(|e| format!("the body could not be read ({e}): {FORMS}"))?;
        let given = [
            body.references.is_some(),
            body.types.is_some(),
            body.namespaces.is_some(),
            body.all.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(format!(
                "the body names {} targets: {FORMS}",
                given.iter().filter(|g| **g).count()
            ));
        }
        let nonempty = |list: Vec<String>, what: &str| {
            if list.is_empty() || list.iter().any(|s| s.is_empty()) {
                Err(format!(
                    "\"{what}\" must be a list of non-empty strings: {FORMS}"
                ))
            } else {
                Ok(list)
            }
        };
        if let Some(references) = body.references {
            let references = nonempty(references, "references")?;
            if let Some(bad) = references.iter().find(|r| !r.contains(':')) {
                return Err(format!(
                    "the reference {bad:?} is not Type:key (\"Post:p1\", \"Post:*\")"
                ));
            }
            return Ok(Target::References(references));
        }
        if let Some(types) = body.types {
            let types = nonempty(types, "types")?;
            if let Some(bad) = types.iter().find(|t| t.contains(':')) {
                return Err(format!(
                    "the type {bad:?} is a reference: send it in \"references\""
                ));
            }
            return Ok(Target::Types(types));
        }
        if let Some(namespaces) = body.namespaces {
            let namespaces = nonempty(namespaces, "namespaces")?;
            if let Some(bad) = namespaces.iter().find(|n| !n.contains('.')) {
                return Err(format!(
                    "the namespace {bad:?} is not Type.field (\"Query.topPosts\")"
                ));
            }
            return Ok(Target::Namespaces(namespaces));
        }
        match body.all {
            Some(true) => Ok(Target::All),
            _ => Err(format!("\"all\" must be true: {FORMS}")),
        }
    }

    /// The reference patterns the resolver cache drops by; `None` for everything.
    fn resolver_patterns(&self) -> Option<Vec<String>> {
        match self {
            Target::References(r) => Some(r.clone()),
            Target::Types(types) => Some(types.iter().map(|t| format!("{t}:*")).collect()),
            Target::Namespaces(n) => Some(
                n.iter()
                    .map(|n| format!("{NAMESPACE_REFERENCE}{n}"))
                    .collect(),
            ),
            Target::All => None,
        }
    }

    /// The reference patterns the response store drops by; `None` for everything (a
    /// namespace too: stored answers are not indexed by field).
    fn response_patterns(&self) -> Option<Vec<String>> {
        match self {
            Target::Namespaces(_) => None,
            other => other.resolver_patterns(),
        }
    }
}

/// What each level dropped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub resolver: u64,
    pub response: u64,
    /// Whether the edge was sent its purge (`None` without `--edge-purge`): Varnish's
    /// bans do not say how many answers they will drop.
    pub edge: Option<bool>,
}

impl Dropped {
    /// As the answer's body.
    pub fn to_json(self) -> String {
        let edge = match self.edge {
            Some(true) => r#","edge":"purged""#,
            _ => "",
        };
        format!(
            r#"{{"dropped":{{"resolver":{},"response":{}}}{edge}}}"#,
            self.resolver, self.response
        )
    }
}

/// Drop `target` from the resolver cache, the response store and the edge, where
/// they run. Every level is tried; the first failure is the answer.
pub async fn invalidate(
    resolver: Option<&ResolverCache>,
    responses: Option<&RequestCache>,
    edge: Option<&EdgePurge>,
    target: &Target,
) -> Result<Dropped, String> {
    let mut dropped = Dropped::default();
    let mut failed = None;
    if let Some(cache) = resolver {
        match cache.drop_entries(target.resolver_patterns()).await {
            Ok(n) => dropped.resolver = n,
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(store) = responses {
        match store.drop_answers(target.response_patterns()).await {
            Ok(n) => dropped.response = n,
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(edge) = edge {
        match edge.purge(&EdgeKeys::of_target(target)).await {
            Ok(()) => dropped.edge = Some(true),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    failed.map_or(Ok(dropped), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_is_read_and_each_bad_body_named() {
        let ok = |text: &str| Target::parse(text.as_bytes()).unwrap();
        assert_eq!(
            ok(r#"{"references":["Post:p1"]}"#),
            Target::References(vec!["Post:p1".into()])
        );
        assert_eq!(
            ok(r#"{"types":["Post"]}"#),
            Target::Types(vec!["Post".into()])
        );
        assert_eq!(
            ok(r#"{"namespaces":["Query.topPosts"]}"#),
            Target::Namespaces(vec!["Query.topPosts".into()])
        );
        assert_eq!(ok(r#"{"all":true}"#), Target::All);
        let bad = [
            ("not json", "could not be read"),
            (r#"{"everything":true}"#, "could not be read"),
            (r#"{}"#, "names 0 targets"),
            (r#"{"all":true,"types":["Post"]}"#, "names 2 targets"),
            (r#"{"all":false}"#, "\"all\" must be true"),
            (r#"{"references":[]}"#, "non-empty strings"),
            (r#"{"references":["p1"]}"#, "is not Type:key"),
            (r#"{"types":["Post:p1"]}"#, "send it in \"references\""),
            (r#"{"namespaces":["topPosts"]}"#, "is not Type.field"),
        ];
        for (text, expected) in bad {
            let error = Target::parse(text.as_bytes()).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
