//! One request to one subgraph for a batch of fetches, and its answer split back
//! into one piece per fetch.
//!
//! A [`Wave`] owns everything its fetch needs (the plan, the request's input, the
//! items), so the cache can run it for any subset of its items, at any time: the
//! misses of a batch, or one stale entry's background refresh.
//!
//! - A root field: the body its plan prepared once (when it has no variables), or
//!   its query with the variables it uses.
//! - Entities: one aliased `_entities` field per site,
//!   `e0:_entities(representations:$_gw_r0){...on User{…}}`, each with its own list
//!   of representations; entity `j` of site field `e0` is item `j` of `data.e0`.
//!
//! Errors are split the same way: an error whose path starts with a root field's key,
//! or with `e<i>` and an index, belongs to that field or entity (its path made
//! relative to it); one without such a path belongs to every fetch of the request.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;

use super::RequestInput;
use crate::piece::Piece;
use crate::plan::{request_body, Plan, SiteId};
use crate::supergraph::SubgraphId;
use crate::upstream::{
    FetchError, PathItem, SubgraphRequest, Upstream, UpstreamError, UpstreamResponse,
};

/// Prefix of the variables that carry an entity batch's representations (client
/// variables may not start with `_gw_`).
pub const REPRESENTATIONS: &str = "_gw_r";

/// One fetch of a wave.
pub enum Item {
    /// Root field `i` of the plan.
    Root(usize),
    /// One entity of a site.
    Entity {
        site: SiteId,
        representation: Box<str>,
    },
}

/// A batch of fetches for one subgraph.
pub struct Wave {
    upstream: Arc<Upstream>,
    plan: Arc<Plan>,
    input: Arc<RequestInput>,
    subgraph: SubgraphId,
    items: Vec<Item>,
}

impl Wave {
    pub fn new(
        upstream: Arc<Upstream>,
        plan: Arc<Plan>,
        input: Arc<RequestInput>,
        subgraph: SubgraphId,
        items: Vec<Item>,
    ) -> Wave {
        Wave {
            upstream,
            plan,
            input,
            subgraph,
            items,
        }
    }

    /// Send the items at `asked` as one request; one answer per asked item, in order.
    ///
    /// The future is boxed: it holds the upstream exchange (kilobytes of state), and
    /// only a leader's fetch ever creates it, so a hit or a deduplicated follower
    /// neither carries nor copies that state through its own futures.
    pub fn fetch(
        self: Arc<Self>,
        asked: Vec<usize>,
    ) -> BoxFuture<'static, Vec<Result<Piece, FetchError>>> {
        Box::pin(self.send(asked))
    }

    async fn send(self: Arc<Self>, asked: Vec<usize>) -> Vec<Result<Piece, FetchError>> {
        let roots = matches!(self.items.first(), Some(Item::Root(_)));
        let (body, groups) = if roots {
            (self.roots_body(&asked), Vec::new())
        } else {
            self.entities_body(&asked)
        };
        let request = SubgraphRequest {
            subgraph: self.subgraph,
            body,
            authorization: self.input.authorization.as_ref(),
            mutation: roots && self.plan.mutation,
        };
        match self.upstream.send(request).await {
            Err(e) => asked.iter().map(|_| Err(e.clone())).collect(),
            Ok(response) if roots => self.split_roots(&asked, response),
            Ok(response) => split_entities(&asked, &groups, response),
        }
    }

    fn root(&self, item: usize) -> usize {
        match self.items[item] {
            Item::Root(i) => i,
            Item::Entity { .. } => unreachable!("a root wave holds root fields only"),
        }
    }

    /// Write `"name":value` for each of `variables` the client sent.
    fn write_variables(&self, variables: &[usize], out: &mut Vec<u8>, mut first: bool) {
        for &v in variables {
            let name = &self.plan.variables[v].name;
            if let Some(value) = self.input.variable(name) {
                if !first {
                    out.push(b',');
                }
                first = false;
                let _ = serde_json::to_writer(&mut *out, name.as_str());
                out.push(b':');
                let _ = serde_json::to_writer(&mut *out, value);
            }
        }
    }

    fn roots_body(&self, asked: &[usize]) -> Bytes {
        let Some(&only) = asked.first() else {
            return Bytes::new();
        };
        let root = &self.plan.roots[self.root(only)];
        if !root.body.is_empty() {
            return root.body.clone();
        }
        request_body(
            &root.query,
            Some(&|out: &mut Vec<u8>| self.write_variables(&root.variables, out, true)),
        )
    }

    /// Each asked root field's value and errors.
    fn split_roots(
        &self,
        asked: &[usize],
        response: UpstreamResponse,
    ) -> Vec<Result<Piece, FetchError>> {
        let data = response.data.map(|d| response.tape.at(d));
        asked
            .iter()
            .map(|&a| {
                let key = &*self.plan.roots[self.root(a)].key;
                let value = data.and_then(|d| d.get(key));
                let errors = relative_errors(&response.errors, |path| match path {
                    [] => Some(&[][..]),
                    [PathItem::Key(k), rest @ ..] if k == key => Some(rest),
                    _ => None,
                });
                Ok(
                    Piece::new(response.tape.clone(), value.map(|v| v.index()), errors)
                        .with_cache_control(response.cache_control),
                )
            })
            .collect()
    }

    /// The `_entities` request for the items at `asked`: one field per site, in order
    /// of first appearance. Returns the body and, per field, the positions in `asked`
    /// of its representations.
    fn entities_body(&self, asked: &[usize]) -> (Bytes, Vec<Vec<usize>>) {
        let mut sites: Vec<SiteId> = Vec::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (pos, &a) in asked.iter().enumerate() {
            let Item::Entity { site, .. } = &self.items[a] else {
                continue;
            };
            match sites.iter().position(|s| s == site) {
                Some(g) => groups[g].push(pos),
                None => {
                    sites.push(*site);
                    groups.push(vec![pos]);
                }
            }
        }
        let mut variables: Vec<usize> = Vec::new();
        for &site in &sites {
            for &v in &self.plan.sites[site as usize].variables {
                if !variables.contains(&v) {
                    variables.push(v);
                }
            }
        }
        let mut query = String::with_capacity(64 + sites.len() * 64);
        query.push_str("query(");
        for g in 0..sites.len() {
            if g > 0 {
                query.push(',');
            }
            query.push_str(&format!("${REPRESENTATIONS}{g}:[_Any!]!"));
        }
        for &v in &variables {
            query.push(',');
            query.push_str(&self.plan.variables[v].declaration);
        }
        query.push_str("){");
        for (g, &site) in sites.iter().enumerate() {
            if g > 0 {
                query.push(' ');
            }
            query.push_str(&format!(
                "e{g}:_entities(representations:${REPRESENTATIONS}{g}){{"
            ));
            query.push_str(&self.plan.sites[site as usize].selection);
            query.push('}');
        }
        query.push('}');
        let write = |out: &mut Vec<u8>| {
            for (g, positions) in groups.iter().enumerate() {
                if g > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(format!("\"{REPRESENTATIONS}{g}\":[").as_bytes());
                for (n, &pos) in positions.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    if let Item::Entity { representation, .. } = &self.items[asked[pos]] {
                        out.extend_from_slice(representation.as_bytes());
                    }
                }
                out.push(b']');
            }
            self.write_variables(&variables, out, groups.is_empty());
        };
        (request_body(&query, Some(&write)), groups)
    }
}

/// Each entity's value and errors, in `asked` order: entity `j` of group `g` is item
/// `j` of `data.e<g>`.
fn split_entities(
    asked: &[usize],
    groups: &[Vec<usize>],
    response: UpstreamResponse,
) -> Vec<Result<Piece, FetchError>> {
    let data = response.data.map(|d| response.tape.at(d));
    let mut out: Vec<Option<Result<Piece, FetchError>>> = asked.iter().map(|_| None).collect();
    for (g, positions) in groups.iter().enumerate() {
        let alias = format!("e{g}");
        let list: Vec<_> = data
            .and_then(|d| d.get(&alias))
            .map(|l| l.items().collect())
            .unwrap_or_default();
        for (j, &pos) in positions.iter().enumerate() {
            let errors = relative_errors(&response.errors, |path| match path {
                [PathItem::Key(k), PathItem::Index(i), rest @ ..] if *k == alias => {
                    (*i == j).then_some(rest)
                }
                [PathItem::Key(k), ..] if *k != alias => None,
                _ => Some(&[][..]),
            });
            let piece = match list.get(j) {
                Some(value) if !value.is_null() => {
                    Piece::new(Arc::new(value.to_tape()), Some(0), errors)
                }
                _ => Piece::new(response.tape.clone(), None, errors),
            };
            out[pos] = Some(Ok(piece.with_cache_control(response.cache_control)));
        }
    }
    out.into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(FetchError::Malformed {
                    subgraph: String::new(),
                    detail: "an entity was not asked for".into(),
                })
            })
        })
        .collect()
}

/// The errors `belongs` accepts, with the path it returns (relative to the fetch).
fn relative_errors<'e>(
    errors: &'e [UpstreamError],
    belongs: impl Fn(&'e [PathItem]) -> Option<&'e [PathItem]>,
) -> Vec<UpstreamError> {
    errors
        .iter()
        .filter_map(|e| {
            belongs(&e.path).map(|rest| UpstreamError {
                message: e.message.clone(),
                path: rest.to_vec(),
            })
        })
        .collect()
}
