//! The nodes of one stream, ordered by master ID, with the last one kept
//! apart from the tree.
//!
//! Appends go to the last node. In a `BTreeMap` reaching it means walking
//! from the root to the rightmost leaf, and on a server with many streams
//! the stream written next is rarely in cache: the walk is two or three
//! dependent cache misses per XADD (profiled at about a tenth of the
//! server's time for XADD over 1000 random keys). [`NodeMap`] keeps the
//! last node inline, next to the stream's other fields, and the rest in the
//! tree; it offers the ordered-map operations [`super::Stream`] needs.

use std::collections::btree_map;
use std::collections::BTreeMap;
use std::ops::RangeBounds;

use super::node::Node;
use super::StreamId;

/// Nodes by master ID. Every key in `sealed` is below the tail's key, and
/// there is no sealed node without a tail.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeMap {
    /// Every node but the last.
    sealed: BTreeMap<StreamId, Node>,
    /// The last node (greatest master ID), where appends go.
    tail: Option<(StreamId, Node)>,
}

impl NodeMap {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.sealed.len() + usize::from(self.tail.is_some())
    }

    /// The last node, to append to.
    pub fn last_mut(&mut self) -> Option<&mut Node> {
        self.tail.as_mut().map(|(_, n)| n)
    }

    /// The last node and its key.
    pub fn last(&self) -> Option<(&StreamId, &Node)> {
        self.tail.as_ref().map(|(k, n)| (k, n))
    }

    /// The first node and its key.
    pub fn first(&self) -> Option<(&StreamId, &Node)> {
        self.sealed.first_key_value().or_else(|| self.last())
    }

    /// Adds `node` under `key`, which must be above every key held: it
    /// becomes the last node, and the previous last one joins the tree.
    pub fn push_last(&mut self, key: StreamId, node: Node) {
        debug_assert!(self.tail.as_ref().is_none_or(|(k, _)| *k < key));
        if let Some((k, n)) = self.tail.replace((key, node)) {
            self.sealed.insert(k, n);
        }
    }

    /// The node with the greatest key `<= id` (the one that may hold `id`).
    pub fn containing(&self, id: StreamId) -> Option<(&StreamId, &Node)> {
        match &self.tail {
            Some((k, n)) if *k <= id => Some((k, n)),
            _ => self.sealed.range(..=id).next_back(),
        }
    }

    /// [`containing`](Self::containing), mutable.
    pub fn containing_mut(&mut self, id: StreamId) -> Option<(StreamId, &mut Node)> {
        match &mut self.tail {
            Some((k, n)) if *k <= id => Some((*k, n)),
            _ => self
                .sealed
                .range_mut(..=id)
                .next_back()
                .map(|(k, n)| (*k, n)),
        }
    }

    /// The node with the least key `>= from`, mutable.
    pub fn first_from_mut(&mut self, from: StreamId) -> Option<(StreamId, &mut Node)> {
        if let Some((k, n)) = self.sealed.range_mut(from..).next() {
            return Some((*k, n));
        }
        match &mut self.tail {
            Some((k, n)) if *k >= from => Some((*k, n)),
            _ => None,
        }
    }

    /// Removes the node under `key`; the greatest sealed node becomes the
    /// last one when the last is removed.
    pub fn remove(&mut self, key: StreamId) -> Option<Node> {
        match &self.tail {
            Some((k, _)) if *k == key => {
                let (_, n) = std::mem::replace(&mut self.tail, self.sealed.pop_last())?;
                Some(n)
            }
            _ => self.sealed.remove(&key),
        }
    }

    /// The nodes whose keys lie in `range`, in key order (double-ended).
    /// Panics as [`BTreeMap::range`] on a range whose start is above its end.
    pub fn range<R: RangeBounds<StreamId> + Clone>(&self, range: R) -> NodeRange<'_> {
        let tail = match &self.tail {
            Some((k, n)) if range.contains(k) => Some((k, n)),
            _ => None,
        };
        NodeRange {
            sealed: self.sealed.range(range),
            tail,
        }
    }

    /// Every node, in key order.
    pub fn iter(&self) -> NodeRange<'_> {
        NodeRange {
            sealed: self.sealed.range(..),
            tail: self.last(),
        }
    }

    /// Every node, in key order, without the keys.
    pub fn values(&self) -> impl Iterator<Item = &Node> {
        self.iter().map(|(_, n)| n)
    }
}

impl<'a> IntoIterator for &'a NodeMap {
    type Item = (&'a StreamId, &'a Node);
    type IntoIter = NodeRange<'a>;

    fn into_iter(self) -> NodeRange<'a> {
        self.iter()
    }
}

/// Iterator over some of a [`NodeMap`]'s nodes ([`NodeMap::range`]); the
/// default one is empty.
#[derive(Clone, Default)]
pub(crate) struct NodeRange<'a> {
    sealed: btree_map::Range<'a, StreamId, Node>,
    /// The last node, when in the range and not yet taken.
    tail: Option<(&'a StreamId, &'a Node)>,
}

impl<'a> Iterator for NodeRange<'a> {
    type Item = (&'a StreamId, &'a Node);

    fn next(&mut self) -> Option<Self::Item> {
        self.sealed.next().or_else(|| self.tail.take())
    }
}

impl DoubleEndedIterator for NodeRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.tail.take().or_else(|| self.sealed.next_back())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    fn id(ms: u64) -> StreamId {
        StreamId { ms, seq: 0 }
    }

    fn node(ms: u64) -> Node {
        Node::new(
            id(ms),
            &[(Bytes::from_static(b"f"), Bytes::from_static(b"v"))],
        )
    }

    fn keys<'a>(it: impl Iterator<Item = (&'a StreamId, &'a Node)>) -> Vec<u64> {
        it.map(|(k, _)| k.ms).collect()
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push,
        Remove(u64),
        Containing(u64),
        FirstFrom(u64),
        Range(u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Push),
            2 => (0..40u64).prop_map(Op::Remove),
            1 => (0..40u64).prop_map(Op::Containing),
            1 => (0..40u64).prop_map(Op::FirstFrom),
            1 => (0..40u64, 0..40u64).prop_map(|(a, b)| Op::Range(a.min(b), a.max(b))),
        ]
    }

    proptest! {
        /// Every operation answers as the same operation on one `BTreeMap`.
        #[test]
        fn behaves_as_one_btreemap(ops in proptest::collection::vec(op(), 0..80)) {
            let mut m = NodeMap::default();
            let mut model: BTreeMap<StreamId, Node> = BTreeMap::new();
            let mut next = 1u64;
            for op in ops {
                match op {
                    Op::Push => {
                        m.push_last(id(next), node(next));
                        model.insert(id(next), node(next));
                        next += 1 + next % 3;
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(m.remove(id(k)).is_some(), model.remove(&id(k)).is_some());
                    }
                    Op::Containing(k) => {
                        let want = model.range(..=id(k)).next_back().map(|(k, _)| k.ms);
                        prop_assert_eq!(m.containing(id(k)).map(|(k, _)| k.ms), want);
                        prop_assert_eq!(m.containing_mut(id(k)).map(|(k, _)| k.ms), want);
                    }
                    Op::FirstFrom(k) => {
                        let want = model.range(id(k)..).next().map(|(k, _)| k.ms);
                        prop_assert_eq!(m.first_from_mut(id(k)).map(|(k, _)| k.ms), want);
                    }
                    Op::Range(a, b) => {
                        let r = id(a)..=id(b);
                        prop_assert_eq!(keys(m.range(r.clone())), keys(model.range(r.clone())));
                        prop_assert_eq!(keys(m.range(r.clone()).rev()), keys(model.range(r).rev()));
                    }
                }
                prop_assert_eq!(m.len(), model.len());
                prop_assert_eq!(keys(m.iter()), keys(model.iter()));
                prop_assert_eq!(m.first().map(|(k, _)| k.ms), model.keys().next().map(|k| k.ms));
                prop_assert_eq!(m.last().map(|(k, _)| k.ms), model.keys().next_back().map(|k| k.ms));
                // The last node is always the inline one.
                prop_assert!(m.sealed.is_empty() || m.tail.is_some());
            }
        }
    }

    #[test]
    fn a_range_walked_from_both_ends_meets_once() {
        let mut m = NodeMap::default();
        for k in 1..=4 {
            m.push_last(id(k), node(k));
        }
        let mut r = m.range(..);
        assert_eq!(r.next().map(|(k, _)| k.ms), Some(1));
        assert_eq!(r.next_back().map(|(k, _)| k.ms), Some(4));
        assert_eq!(r.next_back().map(|(k, _)| k.ms), Some(3));
        assert_eq!(r.next().map(|(k, _)| k.ms), Some(2));
        assert!(r.next().is_none() && r.next_back().is_none());
        assert!(NodeRange::default().next().is_none());
    }
}
