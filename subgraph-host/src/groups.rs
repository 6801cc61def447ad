//! Rows grouped by their owner (a post's author, a product's seller, a review's author):
//! for each owner, its rows in row order, read as one slice.
//!
//! Built once by a counting sort into two flat vectors, one `u32` per row and one per
//! owner, so a million rows cost a few MiB and a few milliseconds, and a lookup is two
//! reads.

/// Each owner's rows, in row order.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    /// `rows[starts[o]..starts[o + 1]]` are owner `o`'s rows.
    starts: Vec<u32>,
    rows: Vec<u32>,
}

impl Groups {
    /// Group rows `0..owner_of.len()` by `owner_of[row]`, each below `owners`.
    pub fn build(owners: u32, owner_of: &[u32]) -> Groups {
        let mut starts = vec![0u32; owners as usize + 1];
        for &o in owner_of {
            starts[o as usize + 1] += 1;
        }
        for o in 0..owners as usize {
            starts[o + 1] += starts[o];
        }
        let mut next = starts.clone();
        let mut rows = vec![0u32; owner_of.len()];
        for (row, &o) in owner_of.iter().enumerate() {
            rows[next[o as usize] as usize] = row as u32;
            next[o as usize] += 1;
        }
        Groups { starts, rows }
    }

    /// Owner `owner`'s rows, in row order (none for an owner out of range).
    pub fn of(&self, owner: usize) -> &[u32] {
        match (self.starts.get(owner), self.starts.get(owner + 1)) {
            (Some(&from), Some(&to)) => &self.rows[from as usize..to as usize],
            _ => &[],
        }
    }

    /// The number of owners.
    pub fn owners(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_owner_gets_its_rows_in_order() {
        let g = Groups::build(3, &[2, 0, 2, 2, 0]);
        assert_eq!(g.of(0), [1, 4]);
        assert!(g.of(1).is_empty());
        assert_eq!(g.of(2), [0, 2, 3]);
        assert!(g.of(3).is_empty());
        assert_eq!(g.owners(), 3);
        assert!(Groups::default().of(0).is_empty());
    }
}
