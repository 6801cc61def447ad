//! Test rig for the two subgraphs: the shared rig (`subgraph-rig`: services on free
//! 127.0.0.1 ports, in this process or as real processes stopped by PID, spoken to over
//! real HTTP), with the routers and binaries of `post-service` and `user-service`.
#![allow(dead_code, unused_imports)]

use std::time::Duration;

use axum::Router;

pub use subgraph_rig::{client, data, labelled_metric, metric, post, Service};

pub fn user_router(users: user_service::Users) -> Router {
    subgraph_host::router("user", user_service::schema_with(users), Duration::ZERO)
}

pub fn post_router(posts: post_service::Posts) -> Router {
    subgraph_host::router("post", post_service::schema_with(posts), Duration::ZERO)
}

/// A subgraph binary of this workspace: `post-service`, or its sibling `user-service`.
pub fn binary(name: &str) -> std::path::PathBuf {
    let post = std::path::PathBuf::from(env!("CARGO_BIN_EXE_post-service"));
    let path = post.with_file_name(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace` before these tests",
        path.display()
    );
    path
}

/// Subgraph binary `name` as a process on a free port (see [`subgraph_rig::Process`]).
pub struct Process(subgraph_rig::Process);

impl Process {
    pub fn start(name: &str, args: &[&str]) -> Process {
        Process(subgraph_rig::Process::start(&binary(name), args))
    }
}

impl std::ops::Deref for Process {
    type Target = subgraph_rig::Process;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Process {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Run subgraph binary `name` with arguments it should refuse: its exit code and
/// standard error (see [`subgraph_rig::refused`]).
pub fn refused(name: &str, args: &[&str]) -> (Option<i32>, String) {
    subgraph_rig::refused(&binary(name), args)
}
