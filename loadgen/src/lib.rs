//! loadgen: the lab's load generator and experiment-matrix runner.
//!
//! The crate has two halves and a module between them, along the path of the data:
//!
//! - [`mod@bench`] drives one or more URLs over keep-alive HTTP/1.1 connections, closed
//!   loop or open loop, records latency in HDR histograms and counts every error
//!   class, GraphQL errors inside 2xx responses included (`loadgen bench`);
//! - [`workload`] says *what* each connection sends when an experiment describes more
//!   than one query: a weighted mix of operations, keys drawn from uniform, Zipf or
//!   hotspot distributions, writes that carry versions, and the version oracle that
//!   tells a stale read from a fresh one and catches wrong answers;
//! - [`matrix`] starts the lab's services for each configuration of an experiment
//!   file, checks the answer, benches the gateway through [`mod@bench`], samples CPU, RSS,
//!   metrics and profiles over the window, aggregates the rounds and renders the run
//!   directory (`loadgen matrix`, `loadgen compare`).
//!
//! Around them: [`cli`] (the command line), [`proc_usage`] (CPU and memory read from
//! Linux, used by both halves), [`target_server`] (a server with known behaviour,
//! for tests and calibration, which can also answer from a recording of a graph's
//! subgraph exchanges: [`replay`]) and [`netproxy`] (a TCP proxy that adds a round trip's
//! latency, so the matrix can put a service "across a network").
pub mod bench;
pub mod cli;
pub mod matrix;
pub mod netproxy;
pub mod proc_usage;
pub mod replay;
pub mod target_server;
pub mod workload;
