//! Reading a composed supergraph: the join spec's SDL in, the planner and the
//! gateway's [`Supergraph`] model out.
//!
//! The SDL is parsed once and handed to Hive's query planner
//! (`hive-router-query-planner`), which reads every join directive itself
//! (`join__graph`, `join__type`, `join__field`, `join__implements`,
//! `join__unionMember`, `join__enumValue`) and prunes `@inaccessible` elements into
//! its consumer schema. The model is then read off the planner's own state, so the
//! planner and the rest of the gateway can never disagree about the graph: the
//! public types from the consumer schema, and subgraph names and URLs from
//! `join__Graph` (in the enum's order).
//!
//! Only join v0.3 to v0.5 with link v1.0 is read (what Federation 2's composers
//! write); anything else is refused before the planner sees it, with a message
//! that says what the file is. The planner is someone else's code and may panic on
//! input it did not expect: its construction is caught, so that a bad file is an
//! error at start-up, never a crash.

use std::collections::HashMap;
use std::sync::Arc;

use graphql_tools::parser::schema::{Definition, TypeDefinition};
use hive_router_query_planner::planner::{Planner as HivePlanner, QueryPlannerOptions};

use super::{public, Subgraph, SubgraphId, Supergraph};

/// Join spec versions this gateway reads.
const JOIN_VERSIONS: [&str; 3] = ["v0.3", "v0.4", "v0.5"];

/// Why a supergraph SDL could not be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SupergraphError(pub String);

impl Supergraph {
    /// Read a supergraph SDL: the model, and the planner built from the same text.
    pub fn from_sdl(sdl: &str) -> Result<(Supergraph, HivePlanner), SupergraphError> {
        let fail = |m: String| SupergraphError(m);
        check_specs(sdl).map_err(fail)?;
        let doc = graphql_tools::parser::parse_schema(sdl)
            .map_err(|e| fail(format!("the supergraph does not parse: {e}")))?
            .into_static();
        let graph_order: Vec<String> = doc
            .definitions
            .iter()
            .find_map(|d| match d {
                Definition::TypeDefinition(TypeDefinition::Enum(e)) if e.name == "join__Graph" => {
                    Some(e.values.iter().map(|v| v.name.clone()).collect())
                }
                _ => None,
            })
            .ok_or_else(|| fail("the supergraph has no join__Graph enum".into()))?;
        let built = std::panic::catch_unwind(|| {
            HivePlanner::new_from_supergraph(&doc, QueryPlannerOptions::default())
        });
        let planner = match built {
            Ok(Ok(planner)) => planner,
            Ok(Err(e)) => return Err(fail(format!("the planner refused the supergraph: {e}"))),
            Err(panic) => {
                return Err(fail(format!(
                    "the planner failed on the supergraph: {}",
                    panic_message(&panic)
                )))
            }
        };
        let state = &planner.supergraph;
        let mut subgraphs = Vec::with_capacity(graph_order.len());
        let mut ids: HashMap<&str, SubgraphId> = HashMap::new();
        for graph in &graph_order {
            let Some(name) = state.known_subgraphs.get(graph) else {
                return Err(fail(format!(
                    "join__Graph.{graph} has no @join__graph(name:, url:)"
                )));
            };
            let url = state
                .subgraph_endpoint_map
                .get(name)
                .cloned()
                .unwrap_or_default();
            ids.insert(graph.as_str(), subgraphs.len());
            subgraphs.push(Subgraph {
                name: name.clone(),
                url,
            });
        }
        let consumer = planner.consumer_schema.document.to_string();
        let mut public = public::read(&consumer).map_err(fail)?;
        for (type_name, sizes) in super::list_size::read(&doc) {
            let fields = match public.types.get_mut(&type_name).map(|t| &mut t.kind) {
                Some(super::Kind::Object(o) | super::Kind::Interface(o)) => &mut o.fields,
                _ => continue,
            };
            for (field, size) in sizes {
                if let Some(def) = fields.get_mut(&field) {
                    def.list_size = Some(size);
                }
            }
        }
        let model = Supergraph::assemble(subgraphs, public, Arc::from(sdl));
        Ok((model, planner))
    }
}

/// The subgraphs a supergraph names (`join__Graph`'s `@join__graph(name:, url:)`),
/// in order, without building anything else: what the command line checks its
/// per-subgraph flags against.
pub fn subgraphs_of(sdl: &str) -> Result<Vec<Subgraph>, SupergraphError> {
    use graphql_tools::parser::query::Value;
    check_specs(sdl).map_err(SupergraphError)?;
    let doc = graphql_tools::parser::parse_schema::<String>(sdl)
        .map_err(|e| SupergraphError(format!("the supergraph does not parse: {e}")))?;
    let values = doc
        .definitions
        .iter()
        .find_map(|d| match d {
            Definition::TypeDefinition(TypeDefinition::Enum(e)) if e.name == "join__Graph" => {
                Some(&e.values)
            }
            _ => None,
        })
        .ok_or_else(|| SupergraphError("the supergraph has no join__Graph enum".into()))?;
    values
        .iter()
        .map(|v| {
            let graph = v
                .directives
                .iter()
                .find(|d| d.name == "join__graph")
                .ok_or_else(|| {
                    SupergraphError(format!("join__Graph.{} has no @join__graph", v.name))
                })?;
            let arg = |name: &str| {
                graph.arguments.iter().find_map(|(k, value)| match value {
                    Value::String(s) if k == name => Some(s.clone()),
                    _ => None,
                })
            };
            match (arg("name"), arg("url")) {
                (Some(name), Some(url)) => Ok(Subgraph { name, url }),
                _ => Err(SupergraphError(format!(
                    "join__Graph.{}: @join__graph needs name and url",
                    v.name
                ))),
            }
        })
        .collect()
}

/// Refuse what is not a Federation 2 supergraph, saying what it looks like instead.
fn check_specs(sdl: &str) -> Result<(), String> {
    let version_of = |spec: &str| {
        let marker = format!("specs.apollo.dev/{spec}/");
        sdl.find(&marker).map(|at| {
            let rest = &sdl[at + marker.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .unwrap_or(rest.len());
            rest[..end].to_string()
        })
    };
    match version_of("join") {
        None if sdl.contains("_service") || sdl.contains("@key") => Err(
            "this is not a supergraph (no @link to the join spec); it looks like a subgraph's SDL: start the gateway with --subgraph NAME=URL to compose subgraphs".into(),
        ),
        None => Err("this is not a supergraph: it has no @link to https://specs.apollo.dev/join".into()),
        Some(v) if !JOIN_VERSIONS.contains(&v.as_str()) => Err(format!(
            "the supergraph uses join spec {v}; this gateway reads {} (Federation 2 composition)",
            JOIN_VERSIONS.join(", ")
        )),
        Some(_) => match version_of("link") {
            Some(v) if v == "v1.0" => Ok(()),
            Some(v) => Err(format!("the supergraph uses link spec {v}; this gateway reads v1.0")),
            None => Err("the supergraph has no @link to https://specs.apollo.dev/link/v1.0 (a Federation 1 supergraph?)".into()),
        },
    }
}

/// What a caught panic said.
pub(crate) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}
