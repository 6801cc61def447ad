//! Subgraph answers as the gateway holds them: a [`tape`] over each answer's bytes,
//! and the [`piece`] of one answer that one fetch is for (what the cache keeps).

pub mod piece;
pub mod tape;
