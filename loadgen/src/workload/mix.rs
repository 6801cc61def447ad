//! The operation mix: what one connection sends next.
//!
//! Every connection has its own [`OperationStream`]: a ChaCha8 generator seeded with
//! the workload's seed on a stream of its own (the connection's index and role), so two
//! runs with the same seed and connection count send the same operations with the same
//! keys on every connection, however the connections interleave. Only the versions that
//! writes carry depend on that interleaving: they are numbered when sent. A `sequence`
//! key set is walked, not drawn: each stream keeps its position in it.

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;

use super::spec::Workload;

/// Which operations a connection draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The whole mix.
    All,
    /// Reads only: the mix's connections when writes have a rate of their own.
    Reads,
    /// Writes only, on the open-loop writer connections.
    Writes,
}

impl Role {
    fn stream_base(self) -> u64 {
        match self {
            Role::All => 0,
            Role::Reads => 1 << 32,
            Role::Writes => 2 << 32,
        }
    }
}

/// A connection's sequence of operations.
#[derive(Debug)]
pub struct OperationStream {
    rng: ChaCha8Rng,
    /// Indices into the workload's operations that this role draws from.
    candidates: Vec<usize>,
    choose: Option<WeightedIndex<f64>>,
    /// The keys drawn for the current operation, by key set (unused sets keep old values).
    pub keys: Vec<u64>,
    /// Per key set, the next position of its walk (sequence sets only).
    positions: Vec<u64>,
}

impl OperationStream {
    /// The stream of connection `index` in `role`.
    pub fn new(workload: &Workload, role: Role, index: u64) -> OperationStream {
        let candidates: Vec<usize> = workload
            .operations
            .iter()
            .enumerate()
            .filter(|(_, o)| match role {
                Role::All => true,
                Role::Reads => !o.is_write(),
                Role::Writes => o.is_write(),
            })
            .map(|(i, _)| i)
            .collect();
        let choose = (candidates.len() > 1).then(|| {
            WeightedIndex::new(candidates.iter().map(|i| workload.operations[*i].weight))
                .expect("weights were checked positive")
        });
        let mut rng = ChaCha8Rng::seed_from_u64(workload.seed);
        rng.set_stream(role.stream_base() + index);
        OperationStream {
            rng,
            candidates,
            choose,
            keys: vec![0; workload.keys.len()],
            positions: workload
                .keys
                .iter()
                .map(|k| k.sequence_start(role.stream_base() + index))
                .collect(),
        }
    }

    /// Draw the next operation and its keys; returns the operation's index.
    pub fn next(&mut self, workload: &Workload) -> usize {
        let op = match &self.choose {
            Some(w) => self.candidates[w.sample(&mut self.rng)],
            None => self.candidates[0],
        };
        for &k in &workload.operations[op].draws {
            let set = &workload.keys[k];
            self.keys[k] = if set.is_sequence() {
                self.positions[k] += 1;
                set.sequence_key(self.positions[k] - 1)
            } else {
                set.sample(&mut self.rng)
            };
        }
        op
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIX: &str = r#"
[workload]
seed = 3
[workload.keys]
post = { distribution = "uniform", count = 1000 }
[[workload.operation]]
name = "a"
weight = 3
document = "query($p: ID!) { getPost(pid: $p) { pid } }"
variables = { p = "p{post}" }
[[workload.operation]]
name = "b"
weight = 1
document = "{ topPosts { pid } }"
[[workload.operation]]
name = "w"
weight = 1
document = "mutation($p: ID!, $t: String!) { updatePostTitle(pid: $p, title: $t) { pid } }"
variables = { p = "p{post}", t = "{version}" }
write = { type = "Post", id = "p{post}" }
"#;

    fn draws(w: &Workload, role: Role, index: u64, n: usize) -> Vec<(usize, u64)> {
        let mut s = OperationStream::new(w, role, index);
        (0..n)
            .map(|_| {
                let op = s.next(w);
                (op, s.keys[0])
            })
            .collect()
    }

    #[test]
    fn the_same_seed_draws_the_same_operations() {
        let w = Workload::from_toml(MIX).unwrap().unwrap();
        assert_eq!(draws(&w, Role::All, 0, 200), draws(&w, Role::All, 0, 200));
        assert_ne!(draws(&w, Role::All, 0, 200), draws(&w, Role::All, 1, 200));
        let other = Workload::from_toml(&MIX.replace("seed = 3", "seed = 4"))
            .unwrap()
            .unwrap();
        assert_ne!(
            draws(&w, Role::All, 0, 200),
            draws(&other, Role::All, 0, 200)
        );
        // Roles draw from their part of the mix only.
        assert!(draws(&w, Role::Reads, 0, 200)
            .iter()
            .all(|(op, _)| *op != 2));
        assert!(draws(&w, Role::Writes, 0, 50)
            .iter()
            .all(|(op, _)| *op == 2));
        // The weights hold: 3 : 1 : 1.
        let all = draws(&w, Role::All, 5, 50_000);
        let share = all.iter().filter(|(op, _)| *op == 0).count() as f64 / all.len() as f64;
        assert!((share - 0.6).abs() < 0.01, "{share}");
    }

    #[test]
    fn a_sequence_is_walked_in_order_by_each_connection() {
        let text = MIX.replace(
            r#"post = { distribution = "uniform", count = 1000 }"#,
            r#"post = { distribution = "sequence", values = ["a", "b", "c"] }"#,
        );
        let w = Workload::from_toml(&text).unwrap().unwrap();
        for index in 0..3 {
            let keys: Vec<u64> = draws(&w, Role::Writes, index, 7)
                .iter()
                .map(|(_, k)| *k)
                .collect();
            let start = keys[0];
            let expected: Vec<u64> = (0..7).map(|i| (start + i) % 3).collect();
            assert_eq!(keys, expected, "connection {index}");
        }
    }
}
