//! loadgen: the lab's load generator and experiment-matrix runner.
//!
//! `bench` drives one URL over keep-alive HTTP/1.1 connections, closed loop or open
//! loop, records latency in HDR histograms and counts every error class, GraphQL errors
//! inside 2xx responses included. `matrix` starts the lab's services for each
//! configuration of an experiment file, checks the answer, benches the gateway, and
//! writes a traceable run directory; `compare` sets two runs side by side. The modules
//! follow that split:
//!
//! - request side: [`request_template`], [`client`], [`outcome`]
//! - measurement: [`stats`], [`engine`], [`proc_usage`], [`progress`], [`report`]
//! - the matrix: [`experiment`], [`services`], [`http_probe`], [`metrics`],
//!   [`flamegraph`], [`matrix`], [`summary`], [`chart`], [`manifest`], [`compare`],
//!   [`redis_server`]
//! - a known target for tests and calibration: [`target_server`]
pub mod chart;
pub mod cli;
pub mod client;
pub mod compare;
pub mod engine;
pub mod experiment;
pub mod flamegraph;
pub mod http_probe;
pub mod manifest;
pub mod matrix;
pub mod metrics;
pub mod outcome;
pub mod proc_usage;
pub mod progress;
pub mod redis_server;
pub mod report;
pub mod request_template;
pub mod services;
pub mod stats;
pub mod summary;
pub mod target_server;
