//! Tests of the Redis back end and the layered store against a real
//! `redis-server`, started by each test on a free port (see `server`), or on a
//! three-master Redis Cluster (see `cluster`).
//! They fail, loudly, if `redis-server` is not installed.

mod cache;
mod cluster;
mod faults;
mod layered;
mod server;
mod store;
