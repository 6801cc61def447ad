//! Values as bytes: the [`Codec`] trait, [`JsonCodec`], the [`Encoded`]
//! adapter and the [`Envelope`] format.
//!
//! A remote store keeps bytes. [`Encoded`] wraps any `Storage<Bytes>` and a
//! codec into a `Storage<V>`: values are encoded on `set` and decoded on
//! `get` and `get_many`, and everything else passes through.
//!
//! [`Envelope`] is the framing a store shared between processes can use for
//! one entry: the deadlines become wall-clock milliseconds (an [`Instant`]
//! means nothing in another process), followed by the namespace and the
//! encoded value. References are not in it: the store indexes them itself.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{
    deadline_after, Entry, EvictionObserver, Removals, Storage, StorageFuture, StorageResult,
    Stored,
};
use crate::error::StorageError;
use crate::key::CacheKey;
use crate::references::ReferencePattern;

/// Turns values into bytes and back.
pub trait Codec<V>: Send + Sync + 'static {
    /// The bytes of `value`.
    fn encode(&self, value: &V) -> Result<Bytes, StorageError>;
    /// The value of `bytes`.
    fn decode(&self, bytes: &[u8]) -> Result<V, StorageError>;
}

/// JSON through serde: works for `serde_json::Value`, `Arc<Value>` and any
/// `Serialize + DeserializeOwned` type.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonCodec;

impl<V: Serialize + DeserializeOwned> Codec<V> for JsonCodec {
    fn encode(&self, value: &V) -> Result<Bytes, StorageError> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(StorageError::codec)
    }

    fn decode(&self, bytes: &[u8]) -> Result<V, StorageError> {
        serde_json::from_slice(bytes).map_err(StorageError::codec)
    }
}

/// A `Storage<V>` over a `Storage<Bytes>`, encoding values with a codec.
///
/// ```
/// use bytes::Bytes;
/// use cache_core::storage::{Encoded, JsonCodec, MemoryStorage};
/// use cache_core::Cache;
///
/// // JSON values kept as bytes, bounded to 1 MiB of encoded payload.
/// let bytes = MemoryStorage::<Bytes>::builder()
///     .max_bytes(1 << 20, |b: &Bytes| b.len() as u32)
///     .build();
/// let cache: Cache<serde_json::Value> = Cache::builder()
///     .storage(Encoded::new(bytes, JsonCodec))
///     .build();
/// # drop(cache);
/// ```
pub struct Encoded<S, C> {
    inner: S,
    codec: C,
}

impl<S, C> Encoded<S, C> {
    /// Encodes with `codec` into `inner`.
    pub fn new(inner: S, codec: C) -> Self {
        Self { inner, codec }
    }

    /// The byte store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<V, S, C> Storage<V> for Encoded<S, C>
where
    V: Send + 'static,
    S: Storage<Bytes>,
    C: Codec<V>,
{
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn get(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Option<Stored<V>>>> {
        let codec = &self.codec;
        self.inner
            .get(key)
            .map(move |found| found?.map(|stored| decode(codec, stored)).transpose())
    }

    fn get_many<'a>(
        &'a self,
        keys: &'a [CacheKey],
    ) -> StorageFuture<'a, StorageResult<Vec<Option<Stored<V>>>>> {
        let codec = &self.codec;
        self.inner.get_many(keys).map(move |found| {
            found?
                .into_iter()
                .map(|slot| slot.map(|stored| decode(codec, stored)).transpose())
                .collect()
        })
    }

    fn set(
        &self,
        key: CacheKey,
        entry: Entry<V>,
        ttl: Duration,
    ) -> StorageFuture<'_, StorageResult<()>> {
        let bytes = match self.codec.encode(&entry.value) {
            Ok(bytes) => bytes,
            Err(error) => return StorageFuture::ready(Err(error)),
        };
        let encoded = Entry {
            value: bytes,
            fresh_until: entry.fresh_until,
            stale_until: entry.stale_until,
            fetched_in: entry.fetched_in,
            references: entry.references,
            namespace: entry.namespace,
        };
        self.inner.set(key, encoded, ttl)
    }

    fn delete(&self, key: CacheKey) -> StorageFuture<'_, StorageResult<Removals>> {
        self.inner.delete(key)
    }

    fn invalidate<'a>(
        &'a self,
        patterns: &'a [ReferencePattern],
    ) -> StorageFuture<'a, StorageResult<Removals>> {
        self.inner.invalidate(patterns)
    }

    fn clear(&self) -> StorageFuture<'_, StorageResult<Removals>> {
        self.inner.clear()
    }

    fn observe_evictions(&self, observer: EvictionObserver) {
        self.inner.observe_evictions(observer)
    }

    fn read_in_flight(&self) -> bool {
        self.inner.read_in_flight()
    }
}

fn decode<V, C: Codec<V>>(codec: &C, stored: Stored<Bytes>) -> StorageResult<Stored<V>> {
    Ok(Stored {
        value: codec.decode(&stored.value)?,
        fresh_until: stored.fresh_until,
        stale_until: stored.stale_until,
        fetched_in: stored.fetched_in,
    })
}

/// Version 2 adds the fetch duration after the namespace; version 1 (no
/// duration) is still read, so entries written before an upgrade are not lost.
const ENVELOPE_VERSION: u8 = 2;
const ENVELOPE_V1: u8 = 1;
const ENVELOPE_HEADER: usize = 1 + 8 + 8 + 2;
/// The fetch duration's bytes (version 2).
const FETCHED_IN_LEN: usize = 4;

/// One entry framed for a store shared between processes.
///
/// Layout: version (`2`), fresh-until and stale-until as little-endian
/// `u64` milliseconds since the Unix epoch, the namespace's length as a
/// little-endian `u16` and its UTF-8 bytes, the fetch duration in
/// microseconds as a little-endian `u32` (saturated), then the encoded
/// value. The namespace sits where version 1 had it, so a reader of entry
/// heads needs no version check beyond accepting both.
#[derive(Clone, Debug)]
pub struct Envelope {
    /// The entry's namespace.
    pub namespace: Arc<str>,
    /// The encoded value and its deadlines, back in this process's clock.
    pub stored: Stored<Bytes>,
}

impl Envelope {
    /// Frames `entry`. A namespace longer than 65535 bytes is cut at a
    /// character boundary.
    pub fn seal(entry: &Entry<Bytes>) -> Bytes {
        let mut namespace = &*entry.namespace;
        if namespace.len() > usize::from(u16::MAX) {
            let mut end = usize::from(u16::MAX);
            while !namespace.is_char_boundary(end) {
                end -= 1;
            }
            namespace = &namespace[..end];
        }
        let mut out = BytesMut::with_capacity(
            ENVELOPE_HEADER + namespace.len() + FETCHED_IN_LEN + entry.value.len(),
        );
        out.put_u8(ENVELOPE_VERSION);
        out.put_u64_le(to_unix_millis(entry.fresh_until));
        out.put_u64_le(to_unix_millis(entry.stale_until));
        out.put_u16_le(namespace.len() as u16);
        out.put_slice(namespace.as_bytes());
        out.put_u32_le(u32::try_from(entry.fetched_in.as_micros()).unwrap_or(u32::MAX));
        out.put_slice(&entry.value);
        out.freeze()
    }

    /// Reads what [`seal`](Self::seal) wrote. The value shares `bytes`'
    /// buffer. Deadlines already past come back as "now".
    pub fn open(bytes: Bytes) -> StorageResult<Self> {
        if bytes.len() < ENVELOPE_HEADER {
            return Err(StorageError::codec("envelope too short"));
        }
        let version = bytes[0];
        if version != ENVELOPE_VERSION && version != ENVELOPE_V1 {
            return Err(StorageError::codec(format!(
                "unknown envelope version {version}"
            )));
        }
        let word = |at: usize| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(raw)
        };
        let fresh_until = from_unix_millis(word(1));
        let stale_until = from_unix_millis(word(9));
        let namespace_len = usize::from(u16::from_le_bytes([bytes[17], bytes[18]]));
        let namespace_end = ENVELOPE_HEADER + namespace_len;
        let value_start = match version {
            ENVELOPE_V1 => namespace_end,
            _ => namespace_end + FETCHED_IN_LEN,
        };
        if bytes.len() < value_start {
            return Err(StorageError::codec("envelope namespace cut short"));
        }
        let namespace = std::str::from_utf8(&bytes[ENVELOPE_HEADER..namespace_end])
            .map_err(StorageError::codec)?;
        let fetched_in = match version {
            ENVELOPE_V1 => Duration::ZERO,
            _ => {
                let mut raw = [0u8; FETCHED_IN_LEN];
                raw.copy_from_slice(&bytes[namespace_end..value_start]);
                Duration::from_micros(u64::from(u32::from_le_bytes(raw)))
            }
        };
        Ok(Self {
            namespace: Arc::from(namespace),
            stored: Stored {
                value: bytes.slice(value_start..),
                fresh_until,
                stale_until,
                fetched_in,
            },
        })
    }
}

/// How many leading bytes of an envelope hold a namespace of up to
/// `max_namespace` bytes (for a store that reads only an entry's head).
pub(crate) const fn envelope_head_len(max_namespace: usize) -> usize {
    ENVELOPE_HEADER + max_namespace
}

/// The namespace in the first bytes of an envelope, if they hold it whole.
pub(crate) fn envelope_namespace(head: &[u8]) -> Option<&str> {
    if head.len() < ENVELOPE_HEADER || (head[0] != ENVELOPE_VERSION && head[0] != ENVELOPE_V1) {
        return None;
    }
    let len = usize::from(u16::from_le_bytes([head[17], head[18]]));
    let namespace = head.get(ENVELOPE_HEADER..ENVELOPE_HEADER + len)?;
    std::str::from_utf8(namespace).ok()
}

fn to_unix_millis(deadline: Instant) -> u64 {
    let remaining = deadline.saturating_duration_since(Instant::now());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let total = now.checked_add(remaining).unwrap_or(Duration::MAX);
    u64::try_from(total.as_millis()).unwrap_or(u64::MAX)
}

fn from_unix_millis(millis: u64) -> Instant {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let remaining = Duration::from_millis(millis).saturating_sub(now);
    deadline_after(Instant::now(), remaining)
}
