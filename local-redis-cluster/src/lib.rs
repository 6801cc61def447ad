//! Private Redis Clusters on 127.0.0.1, for the lab's tests (cache-core, gateway) and its
//! matrix runner (loadgen), so that all of them start a cluster the same way.
//!
//! A cluster here is `n` masters and no replicas, built from Debian's binaries:
//! `redis-server --cluster-enabled yes --cluster-config-file <tmp> --port P` per node
//! ([`node_arguments`]), then `redis-cli --cluster create 127.0.0.1:P1 … --cluster-replicas
//! 0 --cluster-yes` ([`form`]), then a wait until every node reports `cluster_state:ok`
//! and knows every other ([`wait_ok`]). Nodes keep nothing on disk but their cluster
//! config file, in a directory of the caller's.
//!
//! [`LocalCluster`] does all of it for a test: free ports, the processes (children of
//! the test, stopped by PID with SIGKILL when it is dropped or [`LocalCluster::kill`]
//! is called), and questions a test asks (which master holds a key, each master's
//! `DBSIZE`). The matrix runner starts the node processes itself, so that its signal
//! handling knows them, and uses [`node_arguments`], [`form`] and [`wait_ok`].
//!
//! Every wait is bounded by a deadline; every socket read by a timeout. [`resp`] is the
//! one-command RESP client all of this uses (no client crate needed).

mod cluster;
pub mod resp;

pub use cluster::{form, node_arguments, server_arguments, wait_ok, LocalCluster, NODES};
