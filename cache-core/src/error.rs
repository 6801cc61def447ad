//! The errors a caller of the cache can see.
//!
//! A fetch's error is shared by every caller that waited on that fetch, so it
//! is kept behind an `Arc` ([`FetchError`]) and handed out by clone. Callers
//! get their own error type back with [`CacheError::downcast_ref`].

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

/// A fetch's error, shared by every caller that waited on the fetch.
pub type FetchError = Arc<dyn StdError + Send + Sync + 'static>;

/// Why `get_or_fetch` gave no value.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CacheError {
    /// The fetch failed. Every caller that waited on it gets this same error,
    /// and nothing was stored.
    #[error("fetch failed: {0}")]
    Fetch(FetchError),
    /// This caller gave up waiting for a fetch started by another caller
    /// (the cache's `wait_timeout`). The fetch itself goes on.
    #[error("gave up after waiting {0:?} for an in-flight fetch")]
    Timeout(Duration),
    /// This caller's own fetch ended without a result: it panicked, or the
    /// runtime running it shut down.
    #[error("the fetch ended without a result (it panicked or its task was cancelled)")]
    Aborted,
}

impl CacheError {
    /// The fetch's error, if this is a fetch failure.
    pub fn fetch_error(&self) -> Option<&FetchError> {
        match self {
            Self::Fetch(error) => Some(error),
            _ => None,
        }
    }

    /// The fetch's error as the type the fetch returned, if it was an `E`.
    pub fn downcast_ref<E: StdError + 'static>(&self) -> Option<&E> {
        self.fetch_error()
            .and_then(|error| error.downcast_ref::<E>())
    }
}

/// Why a storage back end failed. The cache treats a failed read as a miss
/// and a failed write as "not stored", counting both; `invalidate`, `delete`
/// and `clear` return it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StorageError {
    /// A value could not be encoded or decoded.
    #[error("codec: {0}")]
    Codec(Arc<str>),
    /// The back end failed (connection lost, command refused, ...).
    #[error("storage back end: {0}")]
    Backend(Arc<dyn StdError + Send + Sync + 'static>),
}

impl StorageError {
    /// A codec error with this message.
    pub fn codec(message: impl std::fmt::Display) -> Self {
        Self::Codec(Arc::from(message.to_string()))
    }

    /// A back-end error wrapping `error`.
    pub fn backend(error: impl Into<Box<dyn StdError + Send + Sync + 'static>>) -> Self {
        Self::Backend(Arc::from(error.into()))
    }
}
