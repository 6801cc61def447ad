//! Cutting a failing operation down to a small one that still fails: one edit at a
//! time (drop a selection, a directive, an alias or an argument; replace a fragment
//! spread by an inline fragment; lift an inline fragment's selections into its
//! parent), keeping an edit when the operation it makes still fails, until no edit
//! does. Edits that make an invalid operation are told apart by the caller (the
//! reference refuses them), and count as not failing.

use super::operations::{Operation, Selection};

/// The smallest operation reached from `op` by edits after which `fails` still holds,
/// trying at most `budget` edits.
pub async fn shrink(
    op: &Operation,
    budget: usize,
    mut fails: impl AsyncFnMut(&Operation) -> bool,
) -> Operation {
    let mut best = op.clone();
    let mut tried = 0;
    'outer: loop {
        let mut k = 0;
        while let Some(candidate) = edit(&best, k) {
            k += 1;
            if candidate.document() == best.document()
                && candidate.variables_json() == best.variables_json()
            {
                continue;
            }
            tried += 1;
            if tried > budget {
                break 'outer;
            }
            if fails(&candidate).await {
                best = candidate;
                continue 'outer;
            }
        }
        break;
    }
    best
}

/// `op` with its `k`-th edit applied; `None` once there are fewer than `k + 1` edits.
fn edit(op: &Operation, k: usize) -> Option<Operation> {
    let mut out = op.clone();
    let mut editor = Editor {
        target: k,
        seen: 0,
        fragments: op.fragments.clone(),
    };
    if editor.set(&mut out.selections) {
        return Some(out);
    }
    for f in 0..out.fragments.len() {
        if editor.set(&mut out.fragments[f].selections) {
            return Some(out);
        }
    }
    None
}

/// Walks an operation, counting edit sites, and applies the `target`-th.
struct Editor {
    target: usize,
    seen: usize,
    fragments: Vec<super::operations::Fragment>,
}

impl Editor {
    /// Whether this site is the one to edit.
    fn here(&mut self) -> bool {
        let hit = self.seen == self.target;
        self.seen += 1;
        hit
    }

    /// Edit within one selection set; whether the edit was made.
    fn set(&mut self, set: &mut Vec<Selection>) -> bool {
        for i in 0..set.len() {
            if set.len() > 1 && self.here() {
                set.remove(i);
                return true;
            }
            if let Selection::Inline { selections, .. } = &set[i] {
                if self.here() {
                    let lifted = selections.clone();
                    set.splice(i..=i, lifted);
                    return true;
                }
            }
            if let Selection::Spread {
                fragment,
                directives,
            } = &set[i]
            {
                if self.here() {
                    let f = &self.fragments[*fragment];
                    set[i] = Selection::Inline {
                        on: Some(f.on),
                        directives: directives.clone(),
                        selections: f.selections.clone(),
                    };
                    return true;
                }
            }
            if self.selection(&mut set[i]) {
                return true;
            }
        }
        false
    }

    fn selection(&mut self, s: &mut Selection) -> bool {
        match s {
            Selection::Field(f) => {
                if !f.directives.is_empty() && self.here() {
                    f.directives.clear();
                    return true;
                }
                if f.alias.is_some() && self.here() {
                    f.alias = None;
                    return true;
                }
                for a in 0..f.args.len() {
                    if self.here() {
                        f.args.remove(a);
                        return true;
                    }
                }
                self.set(&mut f.selections)
            }
            Selection::Inline {
                on,
                directives,
                selections,
            } => {
                if !directives.is_empty() && self.here() {
                    directives.clear();
                    return true;
                }
                if on.is_some() && !directives.is_empty() && self.here() {
                    *on = None;
                    return true;
                }
                self.set(selections)
            }
            Selection::Spread { directives, .. } => {
                if !directives.is_empty() && self.here() {
                    directives.clear();
                    return true;
                }
                false
            }
        }
    }
}
