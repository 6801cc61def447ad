//! The values at one place of the response: one per answer that has one (a
//! [`Node`] each), read as a view of the answers merged there ([`super::Data`]).

use smallvec::SmallVec;

use super::TapeId;

/// One value of one answer: its tape, and its index in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Node {
    pub tape: TapeId,
    pub index: u32,
}

impl Node {
    /// The value at tape index `index` of the same answer.
    pub(super) fn at(self, index: u32) -> Node {
        Node {
            tape: self.tape,
            index,
        }
    }
}

/// The values at one place of the response, one per answer that has one. Most
/// places have one, a merged object a few (its root answer and an entity answer
/// per subgraph that adds to it): up to four are held inline, so building a view
/// allocates only for an object more than four answers stand at.
#[derive(Debug, Clone, Default)]
pub struct Nodes {
    first: Option<Node>,
    rest: SmallVec<[Node; 3]>,
}

/// The values of a [`Nodes`], in order.
pub struct NodesIter<'n> {
    first: Option<Node>,
    rest: std::slice::Iter<'n, Node>,
}

impl Iterator for NodesIter<'_> {
    type Item = Node;

    #[inline]
    fn next(&mut self) -> Option<Node> {
        match self.first.take() {
            Some(node) => Some(node),
            None => self.rest.next().copied(),
        }
    }
}

impl Nodes {
    pub fn one(node: Node) -> Nodes {
        Nodes {
            first: Some(node),
            rest: SmallVec::new(),
        }
    }

    pub fn push(&mut self, node: Node) {
        match self.first {
            None => self.first = Some(node),
            Some(_) => self.rest.push(node),
        }
    }

    pub fn first(&self) -> Option<Node> {
        self.first
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Its values in order (one step each: a chained iterator cost a look-up through
    /// a merged view a tenth more).
    #[inline]
    pub fn iter(&self) -> NodesIter<'_> {
        NodesIter {
            first: self.first,
            rest: self.rest.iter(),
        }
    }

    /// Whether it holds at most one value.
    pub fn is_single(&self) -> bool {
        self.rest.is_empty()
    }

    /// Its one value, when it holds exactly one.
    #[inline]
    pub(super) fn only(&self) -> Option<Node> {
        match (self.first, self.rest.is_empty()) {
            (Some(node), true) => Some(node),
            _ => None,
        }
    }
}
