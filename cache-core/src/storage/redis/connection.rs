//! How commands reach Redis: one server or a Redis Cluster, every round trip through
//! the breaker, the timeout and the counters.
//!
//! [`Connection`] is either a `ConnectionManager` (one server) or a
//! `cluster_async::ClusterConnection` (a cluster: it learns the slot map from the seed
//! nodes, routes each command by its key's hash slot and follows `MOVED`/`ASK`). Both
//! are multiplexed and cheap to clone; both connect lazily.
//!
//! The store speaks in *groups*: commands whose keys all sit in one hash slot (one key,
//! usually). [`Core::exchange`] sends stages of groups. On one server every group of
//! every stage goes out as one pipeline, in order: one round trip, as before clusters
//! existed. On a cluster a pipeline may not cross slots (the client refuses it with
//! `CROSSSLOT` before sending), so each group is its own pipeline, routed to its slot's
//! master; the groups of a stage go out concurrently, and the stages one after the
//! other, so a later stage sees the effects of an earlier one (an entry is stored before
//! it is added to its reference sets).
//!
//! Reads of many keys (`get_many`, and the batcher's auto-pipelined gets) are one `MGET`.
//! On a cluster the client splits an `MGET` into one `MGET` per hash slot, sends them
//! concurrently, and puts the answers back in the keys' order. Entries carry no hash
//! tag, so the keys of a batch sit in as many slots as there are distinct keys: the
//! split costs about one command per distinct key (the counters say so: on a cluster an
//! `MGET` counts one command and one round trip per slot it touches). The alternatives
//! cost more or spread less. A pipeline of `GET`s across slots is refused by the client
//! (see above), and one pipeline per node would need a slot map of our own, kept in step
//! with resharding. Hash-tagging entries into a few buckets (`gcl:e:{7}…`) would let one
//! `MGET` cover many keys, but every bucket is one slot on one master: a handful of
//! buckets spreads the keys unevenly over the masters, and a hot bucket cannot be moved
//! in parts. On the wire the split is cheaper than it sounds: the per-slot `MGET`s of a
//! batch that go to one master share its multiplexed connection, which writes what is
//! queued together, so a batch costs about one socket write per master.
//!
//! `SCAN` walks one server. On a cluster [`Core::scan`] walks the masters one after the
//! other (sorted by address, found with `CLUSTER NODES`), with a cursor that carries the
//! master's index in its top 8 bits and that master's own `SCAN` cursor below: a lazy GC
//! pass can stop and resume, in another process too. A master added or removed during a
//! pass shifts the indices, so a pass may then miss or repeat some keys (GC and
//! invalidation by prefix run again later; neither depends on a complete pass).

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::Ordering;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo, Slot};
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value};

use super::{is_transport, Core, RedisFault};
use crate::error::StorageError;
use crate::key::CacheKey;
use crate::storage::StorageResult;

/// Where a cluster cursor keeps the master's index.
const NODE_SHIFT: u32 = 56;
/// The bits of a cluster cursor that belong to the master's own `SCAN` cursor.
const NODE_CURSOR_MASK: u64 = (1 << NODE_SHIFT) - 1;

/// Commands whose keys share one hash slot (see the module docs).
pub(super) type Group = Vec<Cmd>;

/// The store's connection: one Redis or a cluster. Cheap to clone.
#[derive(Clone)]
pub(super) enum Connection {
    /// One server, through a reconnecting manager.
    Single(ConnectionManager),
    /// A Redis Cluster, through the cluster client.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
        }
    }
}

/// A master of a cluster, as `CLUSTER NODES` names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Master {
    pub host: String,
    pub port: u16,
}

impl Core {
    /// Whether the store talks to a cluster.
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self.conn, Connection::Cluster(_))
    }

    /// Runs one exchange of `commands` commands in `round_trips` requests through the
    /// breaker, the timeout (over the whole exchange) and the counters.
    pub(super) async fn run<T>(
        &self,
        commands: u64,
        round_trips: u64,
        exchange: impl Future<Output = RedisResult<T>>,
    ) -> StorageResult<T> {
        let Ok(permit) = self.breaker.admit() else {
            self.counts.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(StorageError::backend(RedisFault::BreakerOpen));
        };
        self.counts.commands.fetch_add(commands, Ordering::Relaxed);
        self.counts
            .round_trips
            .fetch_add(round_trips, Ordering::Relaxed);
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(value)) => {
                permit.succeed();
                Ok(value)
            }
            Ok(Err(error)) => {
                self.counts.errors.fetch_add(1, Ordering::Relaxed);
                if is_transport(&error) {
                    permit.fail();
                } else {
                    permit.succeed();
                }
                Err(StorageError::backend(error))
            }
            Err(_) => {
                self.counts.errors.fetch_add(1, Ordering::Relaxed);
                self.counts.timeouts.fetch_add(1, Ordering::Relaxed);
                permit.fail();
                Err(StorageError::backend(RedisFault::Timeout(self.timeout)))
            }
        }
    }

    /// One command (its keys in one slot), through [`run`](Self::run).
    pub(super) async fn command<T: FromRedisValue>(&self, cmd: Cmd) -> StorageResult<T> {
        let mut conn = self.conn.clone();
        self.run(1, 1, async move { cmd.query_async::<T>(&mut conn).await })
            .await
    }

    /// Sends `stages` of groups and returns each group's replies, in order (see the
    /// module docs: one pipeline on one server; per group, stage after stage, on a
    /// cluster). Empty groups are not sent and get no replies.
    pub(super) async fn exchange(&self, stages: Vec<Vec<Group>>) -> StorageResult<Vec<Vec<Value>>> {
        let sizes: Vec<usize> = stages.iter().flatten().map(Vec::len).collect();
        let commands: usize = sizes.iter().sum();
        if commands == 0 {
            return Ok(vec![Vec::new(); sizes.len()]);
        }
        match &self.conn {
            Connection::Single(conn) => {
                let mut pipe = redis::pipe();
                for cmd in stages.into_iter().flatten().flatten() {
                    pipe.add_command(cmd);
                }
                let mut conn = conn.clone();
                let mut replies = self
                    .run(commands as u64, 1, async move {
                        pipe.query_async::<Vec<Value>>(&mut conn).await
                    })
                    .await?
                    .into_iter();
                Ok(sizes
                    .iter()
                    .map(|&n| replies.by_ref().take(n).collect())
                    .collect())
            }
            Connection::Cluster(conn) => {
                let groups = sizes.iter().filter(|&&n| n > 0).count();
                let conn = conn.clone();
                self.run(commands as u64, groups as u64, async move {
                    let mut out = Vec::with_capacity(sizes.len());
                    for stage in stages {
                        let sent = stage.into_iter().map(|group| {
                            let mut conn = conn.clone();
                            async move {
                                if group.is_empty() {
                                    return Ok(Vec::new());
                                }
                                let mut pipe = redis::pipe();
                                for cmd in group {
                                    pipe.add_command(cmd);
                                }
                                pipe.query_async::<Vec<Value>>(&mut conn).await
                            }
                        });
                        out.extend(futures::future::try_join_all(sent).await?);
                    }
                    Ok(out)
                })
                .await
            }
        }
    }

    /// One `MGET` of `keys` (split per slot by the cluster client on a cluster).
    pub(super) async fn mget(
        &self,
        keys: impl IntoIterator<Item = CacheKey>,
    ) -> StorageResult<Vec<Option<Vec<u8>>>> {
        let mut cmd = redis::cmd("MGET");
        let mut slots = HashSet::new();
        let mut n = 0u64;
        for key in keys {
            let entry = self.entry_key(key);
            if self.is_cluster() {
                slots.insert(Slot::for_key(entry.as_bytes()));
            }
            cmd.arg(entry);
            n += 1;
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        self.counts.keys_read.fetch_add(n, Ordering::Relaxed);
        let requests = slots.len().max(1) as u64;
        let mut conn = self.conn.clone();
        self.run(requests, requests, async move {
            cmd.query_async::<Vec<Option<Vec<u8>>>>(&mut conn).await
        })
        .await
    }

    /// One `SCAN` step (on a cluster: on one master, see the module docs).
    pub(super) async fn scan(
        &self,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> StorageResult<(u64, Vec<String>)> {
        let mut cmd = redis::cmd("SCAN");
        let Connection::Cluster(cluster) = &self.conn else {
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(count);
            return self.command(cmd).await;
        };
        let masters = self.masters().await?;
        let index = usize::try_from(cursor >> NODE_SHIFT).unwrap_or(usize::MAX);
        let Some(master) = masters.get(index) else {
            // Fewer masters than when the pass began: the pass is over.
            return Ok((0, Vec::new()));
        };
        cmd.arg(cursor & NODE_CURSOR_MASK)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
            host: master.host.clone(),
            port: master.port,
        });
        let mut conn = cluster.clone();
        let value = self
            .run(1, 1, async move { conn.route_command(cmd, routing).await })
            .await?;
        let (next, keys) =
            <(u64, Vec<String>)>::from_redis_value(value).map_err(StorageError::backend)?;
        let next = if next != 0 {
            (next & NODE_CURSOR_MASK) | ((index as u64) << NODE_SHIFT)
        } else if index + 1 < masters.len() {
            ((index + 1) as u64) << NODE_SHIFT
        } else {
            0
        };
        Ok((next, keys))
    }

    /// The cluster's masters that serve slots, sorted by address (empty on one server).
    pub(super) async fn masters(&self) -> StorageResult<Vec<Master>> {
        if !self.is_cluster() {
            return Ok(Vec::new());
        }
        let text: String = self
            .command(redis::cmd("CLUSTER").arg("NODES").clone())
            .await?;
        Ok(parse_masters(&text))
    }
}

/// The masters that serve slots and are not marked failed, out of a `CLUSTER NODES`
/// text, sorted by address.
fn parse_masters(text: &str) -> Vec<Master> {
    let mut masters: Vec<Master> = text
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (address, flags) = (fields.get(1)?, fields.get(2)?);
            let flags: Vec<&str> = flags.split(',').collect();
            let serves = fields.len() > 8;
            if !flags.contains(&"master") || flags.iter().any(|f| f.starts_with("fail")) || !serves
            {
                return None;
            }
            // ip:port@cport[,hostname]
            let address = address.split(['@', ',']).next()?;
            let (host, port) = address.rsplit_once(':')?;
            Some(Master {
                host: host.to_owned(),
                port: port.parse().ok()?,
            })
        })
        .collect();
    masters.sort();
    masters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masters_are_read_from_cluster_nodes() {
        let text = "\
a1 127.0.0.1:7002@17002 master - 0 1 2 connected 5461-10922
b2 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
c3 127.0.0.1:7004@17004 slave b2 0 1 1 connected
d4 127.0.0.1:7003@17003 master,fail - 0 1 3 disconnected 10923-16383
e5 127.0.0.1:7005@17005 master - 0 1 0 connected
";
        assert_eq!(
            parse_masters(text),
            [
                Master {
                    host: "127.0.0.1".into(),
                    port: 7001
                },
                Master {
                    host: "127.0.0.1".into(),
                    port: 7002
                }
            ]
        );
    }
}
