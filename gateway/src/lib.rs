//! graphql-cache-lab's federating gateway.
//!
//! One request flows top to bottom through these folders:
//!
//! ```text
//! server/      accept within --max-connections, lingering close, drain on SIGTERM;
//!              routes (/graphql, /health, /metrics, /debug/profile); load shedding;
//!              request decoding and limits: body, content type, JSON shape, nesting; 4xx
//! pipeline     the request path's steps, in order:
//!   documents/   the byte-bounded document cache, each document with its plans;
//!                async-graphql's validation (every rule of GraphQL) and introspection
//!   plan/        Hive's query planner, once per document: which subgraph gets which
//!                request text, in which order; the response's shape per concrete type
//!   execute/     the plan's steps, each fetch through the cache seam, over the answers
//!                as they came (merged per object, never copied into a tree)
//!     caching/     cache-core per root field and per entity: dedupe, TTL, references
//!     upstream/    one lean HTTP/1.1 client per subgraph
//!   response/    the answer in query order, from the subgraphs' raw JSON
//! ```
//!
//! Around that path: [`runtime`] is the threads it all runs on (one current-thread
//! runtime per core by default), [`cli`] is the command line and the configuration it describes,
//! [`supergraph`] is the graph itself (read from a supergraph file, or composed from
//! the subgraphs' SDL), [`startup`] builds it, the planner and the [`pipeline::App`],
//! and [`answer`] holds subgraph answers as tapes over their bytes and the pieces of
//! them one fetch is for.

pub mod answer;
pub mod caching;
pub mod cli;
pub mod documents;
pub mod execute;
pub mod fast_map;
pub mod pipeline;
pub mod plan;
pub mod response;
pub mod runtime;
pub mod server;
pub mod startup;
pub mod supergraph;
pub mod upstream;
