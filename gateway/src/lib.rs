//! graphql-cache-lab's federating gateway.
//!
//! One request flows top to bottom through these modules:
//!
//! ```text
//! http        GraphQL over HTTP, limits, status codes, /health, /metrics
//! documents   parsed documents, cached and bounded in bytes
//! execute     async-graphql dynamic schema over the composed SDL; resolvers fetch
//! plan        what each subgraph is asked for; keys at hand need no trip
//! batch       one _entities request per subgraph and selection per level
//! caching     resolver calls through cache-core: dedupe, TTL, references
//! upstream    the Fetch seam and the subgraph HTTP clients
//! ```
//!
//! [`supergraph`] composes the subgraphs' SDL at start-up; [`startup`] fetches it.

pub mod batch;
pub mod caching;
pub mod documents;
pub mod execute;
pub mod http;
pub mod metrics;
pub mod plan;
pub mod profile;
pub mod response;
pub mod startup;
pub mod supergraph;
pub mod upstream;
