//! Namesakes: a two-subgraph graph whose entities of two types share their ids, to
//! show that the cache tells them apart by their concrete type.
//!
//! - **catalog** lists `nodes: [Node!]!`, an interface that `Book` and `Author`
//!   implement: Book 1, Author 1, Book 2, Author 2 (both keyed by `id`);
//! - **labels** adds `label` to both types, and a mutation `relabelBook`.
//!
//! The supergraph below is written by hand in the join spec v0.3, in the shape a
//! standard composer gives these two subgraphs (the lab's own composition refuses
//! interfaces, and running a composer would need Node.js in the test).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_graphql::{Context, EmptyMutation, EmptySubscription, Interface, Object, Schema, ID};
use gateway::supergraph::Subgraph;

use serde_json::{json, Value};

use super::{gateway_over_supergraph, metric, metrics_of, CacheCounters, Server};

pub const SUPERGRAPH: &str = r#"
schema @link(url: "https://specs.apollo.dev/link/v1.0") @link(url: "https://specs.apollo.dev/join/v0.3", for: EXECUTION) {
  query: Query
  mutation: Mutation
}

directive @join__enumValue(graph: join__Graph!) repeatable on ENUM_VALUE
directive @join__graph(name: String!, url: String!) on ENUM_VALUE
directive @join__field(graph: join__Graph, requires: join__FieldSet, provides: join__FieldSet, type: String, external: Boolean, override: String, usedOverridden: Boolean) repeatable on FIELD_DEFINITION | INPUT_FIELD_DEFINITION
directive @join__implements(graph: join__Graph!, interface: String!) repeatable on OBJECT | INTERFACE
directive @join__type(graph: join__Graph!, key: join__FieldSet, extension: Boolean! = false, resolvable: Boolean! = true, isInterfaceObject: Boolean! = false) repeatable on OBJECT | INTERFACE | UNION | ENUM | INPUT_OBJECT | SCALAR
directive @join__unionMember(graph: join__Graph!, member: String!) repeatable on UNION
scalar join__FieldSet
directive @link(url: String, as: String, for: link__Purpose, import: [link__Import]) repeatable on SCHEMA
scalar link__Import
enum link__Purpose { SECURITY EXECUTION }

enum join__Graph {
  CATALOG @join__graph(name: "catalog", url: "http://127.0.0.1:1/graphql")
  LABELS @join__graph(name: "labels", url: "http://127.0.0.1:1/graphql")
}

interface Node @join__type(graph: CATALOG) {
  id: ID!
}

type Book implements Node @join__implements(graph: CATALOG, interface: "Node") @join__type(graph: CATALOG, key: "id") @join__type(graph: LABELS, key: "id") {
  id: ID!
  label: String! @join__field(graph: LABELS)
}

type Author implements Node @join__implements(graph: CATALOG, interface: "Node") @join__type(graph: CATALOG, key: "id") @join__type(graph: LABELS, key: "id") {
  id: ID!
  label: String! @join__field(graph: LABELS)
}

type Query @join__type(graph: CATALOG) @join__type(graph: LABELS) {
  nodes: [Node!]! @join__field(graph: CATALOG)
}

type Mutation @join__type(graph: LABELS) {
  relabelBook(id: ID!, label: String!): Book! @join__field(graph: LABELS)
}
"#;

/// A book of the catalog (only its key there).
pub struct Book {
    id: ID,
}

#[Object]
impl Book {
    async fn id(&self) -> &ID {
        &self.id
    }
}

/// An author of the catalog, with the same ids as the books.
pub struct Author {
    id: ID,
}

#[Object]
impl Author {
    async fn id(&self) -> &ID {
        &self.id
    }
}

#[derive(Interface)]
#[graphql(field(name = "id", ty = "&ID"))]
pub enum Node {
    Book(Book),
    Author(Author),
}

pub struct CatalogQuery;

#[Object]
impl CatalogQuery {
    /// Book 1, Author 1, Book 2, Author 2.
    async fn nodes(&self) -> Vec<Node> {
        ["1", "2"]
            .into_iter()
            .flat_map(|id| {
                [
                    Node::Book(Book { id: ID(id.into()) }),
                    Node::Author(Author { id: ID(id.into()) }),
                ]
            })
            .collect()
    }

    #[graphql(entity)]
    async fn find_book_by_id(&self, id: ID) -> Book {
        Book { id }
    }

    #[graphql(entity)]
    async fn find_author_by_id(&self, id: ID) -> Author {
        Author { id }
    }
}

/// Labels by (type, id); a book's may be changed.
type Labels = Arc<Mutex<HashMap<(&'static str, String), String>>>;

fn label(ctx: &Context<'_>, ty: &'static str, id: &str) -> String {
    let labels = ctx.data_unchecked::<Labels>().lock().unwrap();
    labels
        .get(&(ty, id.to_string()))
        .cloned()
        .unwrap_or_else(|| format!("{} {id}", ty.to_lowercase()))
}

/// A book as labels knows it.
pub struct LabelledBook {
    id: ID,
}

#[Object(name = "Book")]
impl LabelledBook {
    async fn id(&self) -> &ID {
        &self.id
    }
    async fn label(&self, ctx: &Context<'_>) -> String {
        label(ctx, "Book", &self.id)
    }
}

/// An author as labels knows it.
pub struct LabelledAuthor {
    id: ID,
}

#[Object(name = "Author")]
impl LabelledAuthor {
    async fn id(&self) -> &ID {
        &self.id
    }
    async fn label(&self, ctx: &Context<'_>) -> String {
        label(ctx, "Author", &self.id)
    }
}

pub struct LabelsQuery;

#[Object]
impl LabelsQuery {
    #[graphql(entity)]
    async fn find_book_by_id(&self, id: ID) -> LabelledBook {
        LabelledBook { id }
    }

    #[graphql(entity)]
    async fn find_author_by_id(&self, id: ID) -> LabelledAuthor {
        LabelledAuthor { id }
    }
}

pub struct LabelsMutation;

#[Object]
impl LabelsMutation {
    async fn relabel_book(&self, ctx: &Context<'_>, id: ID, label: String) -> LabelledBook {
        ctx.data_unchecked::<Labels>()
            .lock()
            .unwrap()
            .insert(("Book", id.to_string()), label);
        LabelledBook { id }
    }
}

/// The two subgraphs and a gateway over them.
pub struct Namesakes {
    pub catalog: Server,
    pub labels: Server,
    pub gateway: Server,
    pub http: reqwest::Client,
}

impl Namesakes {
    /// With the gateway's cache set to `cache`.
    pub async fn start(cache: Option<gateway::caching::CacheSettings>) -> Namesakes {
        let catalog = Schema::build(CatalogQuery, EmptyMutation, EmptySubscription)
            .enable_federation()
            .finish();
        let labels = Schema::build(LabelsQuery, LabelsMutation, EmptySubscription)
            .enable_federation()
            .data(Labels::default())
            .finish();
        let catalog =
            Server::start(subgraph_host::router("catalog", catalog, Duration::ZERO)).await;
        let labels = Server::start(subgraph_host::router("labels", labels, Duration::ZERO)).await;
        let urls = vec![
            Subgraph {
                name: "catalog".into(),
                url: catalog.url(),
            },
            Subgraph {
                name: "labels".into(),
                url: labels.url(),
            },
        ];
        let gateway = gateway_over_supergraph(SUPERGRAPH.into(), urls, |c| c.cache = cache).await;
        Namesakes {
            catalog,
            labels,
            gateway,
            http: reqwest::Client::new(),
        }
    }

    /// The whole answer of `query`.
    pub async fn answer(&self, query: &str) -> Value {
        let r = self
            .http
            .post(self.gateway.url())
            .json(&json!({ "query": query }));
        r.send()
            .await
            .expect("the gateway answers")
            .json()
            .await
            .unwrap()
    }

    /// `subgraph_requests_total` of (catalog, labels).
    pub async fn requests(&self) -> (u64, u64) {
        let of = |server: &Server| {
            let addr = server.addr;
            async move {
                let text = metrics_of(&self.http, addr).await;
                metric(&text, "subgraph_requests_total").expect("subgraph_requests_total") as u64
            }
        };
        (of(&self.catalog).await, of(&self.labels).await)
    }

    /// The gateway's cache counters.
    pub async fn counters(&self) -> CacheCounters {
        CacheCounters(metrics_of(&self.http, self.gateway.addr).await)
    }
}
