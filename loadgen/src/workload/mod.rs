//! Workloads: what the connections send when an experiment describes more than one
//! query, and how their answers are judged.
//!
//! Along the path of one request: [`spec`] reads the `[workload]` table (key sets,
//! weighted operations, reads to check, writes), or ([`load`]) an operations file of
//! the same shape, with [`document`] (each operation's GraphQL document and the variables it
//! declares) and [`source`] (the file and line of each, for refusals); [`keys`] draws
//! keys from uniform, Zipf, hotspot or sequence distributions, over ranges or lists; [`mix`] gives each connection its seeded operation
//! stream; [`template`] renders bodies and headers; [`traffic`] is the connection's
//! [`crate::bench::client::Traffic`]; [`oracle`] numbers writes and knows which are
//! acknowledged; [`check`] walks each answer and asks the oracle; [`recorder`] keeps the
//! per-thread tallies that become a [`recorder::WorkloadReport`].
//!
//! The bench uses it when its plan has a workload (`loadgen bench --workload FILE`),
//! and so does the matrix for experiments with a `[workload]` table.
pub mod answer;
pub mod check;
pub mod document;
pub mod keys;
pub mod load;
pub mod mix;
pub mod oracle;
pub mod recorder;
pub mod source;
pub mod spec;
pub mod template;
pub mod traffic;

pub use recorder::WorkloadReport;
pub use spec::Workload;
