//! The order the configurations run in, round by round.
//!
//! On a shared machine whatever grows during a round (a neighbour's load, the page
//! cache, the subgraphs' memory) falls on the configurations that run late in it. If
//! the order were the same every round (A B C D, A B C D), that drift would always land
//! on C and D and read as their difference. So the order rotates: round r starts one
//! configuration further on (A B C D, B C D A, C D A B, …). Over any n consecutive
//! rounds of n configurations, each configuration runs once in each position (a cyclic
//! Latin square). The first round keeps the file's order. The run's manifest records
//! every round's order (`round_order`).
//!
//! Ratios are still taken within a round, against the same round's baseline,
//! wherever the baseline fell in it.

/// The configurations' indices in the order round `round` (1-based) runs them.
pub fn of_round(configurations: usize, round: u32) -> Vec<usize> {
    let n = configurations.max(1);
    let start = (round.saturating_sub(1) as usize) % n;
    (0..configurations).map(|i| (start + i) % n).collect()
}

/// Every round's order, by configuration name, for the manifest.
pub fn by_name(names: &[&str], rounds: u32) -> Vec<Vec<String>> {
    (1..=rounds)
        .map(|r| {
            of_round(names.len(), r)
                .into_iter()
                .map(|i| names[i].to_owned())
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_round_keeps_the_files_order() {
        assert_eq!(of_round(4, 1), vec![0, 1, 2, 3]);
        assert_eq!(of_round(4, 2), vec![1, 2, 3, 0]);
    }

    #[test]
    fn over_n_rounds_each_configuration_runs_once_in_each_position() {
        for n in 1..7 {
            // Any n consecutive rounds, not only the first n.
            for first in 1..4u32 {
                let rounds: Vec<Vec<usize>> =
                    (first..first + n as u32).map(|r| of_round(n, r)).collect();
                for round in &rounds {
                    let mut sorted = round.clone();
                    sorted.sort_unstable();
                    assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "a permutation");
                }
                for position in 0..n {
                    let mut at: Vec<usize> = rounds.iter().map(|r| r[position]).collect();
                    at.sort_unstable();
                    assert_eq!(at, (0..n).collect::<Vec<_>>(), "n={n} position {position}");
                }
            }
        }
    }

    #[test]
    fn the_manifest_names_each_rounds_order() {
        assert_eq!(
            by_name(&["a", "b", "c"], 2),
            vec![vec!["a", "b", "c"], vec!["b", "c", "a"]]
        );
        assert!(of_round(0, 3).is_empty());
    }
}
