//! graphql-cache-lab's federating gateway.
//!
//! One request flows top to bottom through these modules:
//!
//! ```text
//! connections accept within --max-connections, lingering close, drain on SIGTERM
//! server      routes (/graphql, /health, /metrics, /debug/profile); load shedding
//! request     decoding and limits: body, content type, JSON shape, nesting; 4xx
//! pipeline    the request path's steps, in order:
//!   documents   the byte-bounded document cache, each document with its plans
//!   validation  async-graphql: every rule of GraphQL, and introspection
//!   plan        which subgraph gets which request text; how answers map back
//!   execute     the plan's fetches, waves of _entities, through the cache seam
//!     caching     cache-core per root field and per entity: dedupe, TTL, references
//!     upstream    one lean HTTP/1.1 client per subgraph
//!   response    the answer in query order, from the subgraphs' raw JSON
//! ```
//!
//! [`load`] counts connections and requests in progress against their limits, and
//! [`linger`] closes a connection whose client is still sending without resetting it.
//! [`json`] holds subgraph answers as tapes over their bytes, and [`piece`] the part
//! of an answer one fetch is for. [`supergraph`] composes the subgraphs' SDL at
//! start-up; [`startup`] fetches it and assembles the [`pipeline::App`].

pub mod caching;
pub mod connections;
pub mod documents;
pub mod execute;
pub mod fast_map;
pub mod json;
pub mod linger;
pub mod load;
pub mod metrics;
pub mod piece;
pub mod pipeline;
pub mod plan;
pub mod profile;
pub mod request;
pub mod response;
pub mod server;
pub mod startup;
pub mod supergraph;
pub mod upstream;
pub mod validation;
