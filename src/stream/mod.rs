//! Streams: pure data. No threads, no IO, no clocks (time is a parameter).
//!
//! A [`Stream`] is an ordered map of nodes keyed by each node's master
//! (first-ever) ID (`nodes.rs`: a `BTreeMap` plus the last node, where
//! appends go, kept inline); a node packs up to [`NodeLimits::max_entries`] entries into
//! one byte buffer (see `node.rs`). Metadata mirrors Redis's `stream` struct:
//! `length`, `last_id`, `first_id`, `max_deleted_entry_id`, `entries_added`.
//! Consumer groups live next to these (`groups`), in `group.rs`.
//!
//! # Source
//! redis/src/t_stream.c and stream.h (7.x): `streamAppendItem`, `streamTrim`,
//! `streamDeleteItem`, `xdelCommand`, `xsetidCommand`, `streamIteratorGetID`.

pub mod group;
pub mod id;
pub mod idmap;
pub mod idmp;
pub mod latency;
mod node;
mod nodes;

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::error::CmdError;
pub use id::{IdSpec, RangeEnd, RangeStart, StreamId};
use node::{EntryRef, Node};
use nodes::{NodeMap, NodeRange};

/// Per-node caps, as `stream-node-max-entries` / `stream-node-max-bytes`.
/// Passed to every call that may create nodes, since CONFIG SET can change
/// them at run time. `0` means unlimited (bytes are then capped at 1 GiB, as
/// Redis caps a listpack).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    /// Entries (live + deleted) per node; Redis default 100.
    pub max_entries: usize,
    /// Encoded bytes per node; Redis default 4096.
    pub max_bytes: usize,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_entries: 100,
            max_bytes: 4096,
        }
    }
}

/// Redis's hard cap on one listpack (`STREAM_LISTPACK_MAX_SIZE`), used when
/// `max_bytes` is 0 or larger.
const NODE_MAX_BYTES_CAP: usize = 1 << 30;

impl NodeLimits {
    /// The LIMIT an approximate (`~`) trim uses when the client gave none:
    /// `100 * max_entries`, `10000` if that is 0, at most `1_000_000`.
    ///
    /// # Source
    /// `streamParseAddOrTrimArgsOrReply`.
    pub fn default_approx_trim_limit(&self) -> u64 {
        let l = (self.max_entries as u64).saturating_mul(100);
        if l == 0 {
            10_000
        } else {
            l.min(1_000_000)
        }
    }
}

/// One stream entry, copied out of its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The entry's ID.
    pub id: StreamId,
    /// Field/value pairs in insertion order (duplicates kept, as Redis does).
    pub fields: Vec<(Bytes, Bytes)>,
}

/// What to trim by (`MAXLEN n` or `MINID id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    /// Keep at most this many entries (the newest).
    MaxLen(u64),
    /// Remove entries with IDs below this one.
    MinId(StreamId),
}

/// What a trim removed, in the form its AOF effect takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrimEffect {
    /// The oldest entries, down to the new length (`XTRIM key MAXLEN = len`).
    Prefix,
    /// As `Prefix`, and these IDs were also dropped from every group's PEL (DELREF).
    PrefixUnref(Vec<StreamId>),
    /// Exactly these entries, not a prefix (ACKED skips entries groups still need).
    Ids(Vec<StreamId>),
}

/// What deleting or trimming an entry does to consumer groups' references
/// to it (Redis 8.2: XADD / XTRIM trim clause, XDELEX, XACKDEL).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefPolicy {
    /// `KEEPREF` (default): delete the entry; PEL entries naming it stay
    /// (reading them yields `[id, nil]`), as XDEL and Redis 7 trimming.
    #[default]
    KeepRef,
    /// `DELREF`: delete the entry and drop it from every group's PEL.
    DelRef,
    /// `ACKED`: delete only entries no group still needs: each group has
    /// delivered it (ID <= last-delivered) and has it in no PEL. With no
    /// groups every entry qualifies ("no effect", XTRIM's documentation).
    Acked,
}

/// `[MAXLEN | MINID] [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]`
/// of XADD and XTRIM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrimSpec {
    /// The threshold.
    pub strategy: TrimStrategy,
    /// `~`: remove whole nodes only, so possibly fewer entries than asked.
    pub approx: bool,
    /// `LIMIT count`: remove at most about this many entries (whole nodes are
    /// never split to honour it). `None`: for `~` the default
    /// ([`NodeLimits::default_approx_trim_limit`]), for `=` unlimited.
    /// `Some(0)`: unlimited, as in Redis.
    pub limit: Option<u64>,
    /// Consumer-group references of trimmed entries (Redis 8.2).
    pub refs: RefPolicy,
}

/// Text of XSETID's errors, exact Redis strings.
pub const ERR_XSETID_SMALLER_THAN_TOP: &str =
    "ERR The ID specified in XSETID is smaller than the target stream top item";
/// See [`Stream::set_last_id`].
pub const ERR_XSETID_ENTRIES_ADDED_SMALL: &str =
    "ERR The entries_added specified in XSETID is smaller than the target stream length";
/// See [`Stream::set_last_id`].
pub const ERR_XSETID_SMALLER_THAN_MAX_DELETED: &str =
    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id";
/// See [`Stream::set_last_id`] (Redis 8.0).
pub const ERR_XSETID_SMALLER_THAN_CURRENT_MAX_DELETED: &str =
    "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id";

/// A Redis stream: entries ordered by ID plus the metadata Redis keeps.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    nodes: NodeMap,
    /// Live entries.
    length: u64,
    /// Last ID ever generated (or set by XSETID); never goes down on append.
    last_id: StreamId,
    /// First live entry's ID; 0-0 when empty.
    first_id: StreamId,
    /// Greatest ID removed by XDEL (XTRIM does not update it, as in Redis 7).
    max_deleted_entry_id: StreamId,
    /// Count of all entries ever appended.
    entries_added: u64,
    /// Consumer groups by name (see `group.rs`); they outlive the entries.
    groups: BTreeMap<Bytes, group::ConsumerGroup>,
    /// The IDMP map (Redis 8.6), once XADD IDMP / IDMPAUTO or XCFGSET used it.
    idmp: Option<Box<idmp::Idmp>>,
}

impl Stream {
    /// An empty stream (what XADD creates). Allocates nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// `XLEN`: number of live entries.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// No live entries (the key may still exist, as in Redis).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// `last-generated-id` of XINFO STREAM.
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// `recorded-first-entry-id` of XINFO STREAM: first live ID, 0-0 when empty.
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    /// `max-deleted-entry-id` of XINFO STREAM.
    pub fn max_deleted_entry_id(&self) -> StreamId {
        self.max_deleted_entry_id
    }

    /// `entries-added` of XINFO STREAM.
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// Each node's key (its master entry's ID, which may be deleted), in
    /// order: node `i` holds the live entries from key `i` up to key `i + 1`.
    pub fn node_keys(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.nodes.iter().map(|(k, _)| *k)
    }

    /// `radix-tree-keys` of XINFO STREAM: number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The ID an XADD with `spec` would get at `now_ms`, without changing
    /// anything. Call it before creating a key so an invalid ID leaves no key.
    ///
    /// # Errors
    /// In Redis's order: `StreamIdZero` for an explicit `0-0`;
    /// `StreamExhausted` if `last_id` is `MAX-MAX` (whatever `spec` is);
    /// `StreamIdTooSmall` if the ID is not above `last_id` (for `ms-*`: `ms`
    /// below the last ms, or the last seq at `u64::MAX` in the same ms).
    /// # Source
    /// `xaddCommand` checks, `streamAppendItem` ID choice, `streamNextID`.
    pub fn next_id(&self, spec: IdSpec, now_ms: u64) -> Result<StreamId, CmdError> {
        if spec == IdSpec::Explicit(StreamId::MIN) {
            return Err(CmdError::StreamIdZero);
        }
        if self.last_id == StreamId::MAX {
            return Err(CmdError::StreamExhausted);
        }
        let id = match spec {
            IdSpec::Auto => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    // Clock did not advance (or went back): never go backwards.
                    self.last_id.next().ok_or(CmdError::StreamExhausted)?
                }
            }
            IdSpec::AutoSeq { ms } => {
                if ms == self.last_id.ms {
                    if self.last_id.seq == u64::MAX {
                        return Err(CmdError::StreamIdTooSmall);
                    }
                    StreamId::new(ms, self.last_id.seq + 1)
                } else {
                    StreamId::new(ms, 0)
                }
            }
            IdSpec::Explicit(id) => id,
        };
        if id <= self.last_id {
            return Err(CmdError::StreamIdTooSmall);
        }
        Ok(id)
    }

    /// `XADD key <id> field value [field value ...]` (without the trim part):
    /// appends one entry and returns its ID. Goes into the last node unless
    /// that node is full under `limits`, else starts a new node.
    ///
    /// # Errors
    /// As [`Stream::next_id`]; on error nothing changes.
    /// # Source
    /// `streamAppendItem`.
    pub fn append(
        &mut self,
        spec: IdSpec,
        fields: &[(Bytes, Bytes)],
        now_ms: u64,
        limits: NodeLimits,
    ) -> Result<StreamId, CmdError> {
        self.append_at(spec, fields, now_ms, Some(limits))
    }

    /// [`append`](Self::append) into a new node, whatever room the last
    /// one has: a DUMP payload (RESTORE, MIGRATE) keeps its nodes,
    /// as Redis keeps the listpacks it loads (`rdbLoadObject`).
    ///
    /// # Errors
    /// As [`Stream::next_id`]; on error nothing changes.
    pub fn append_to_new_node(
        &mut self,
        spec: IdSpec,
        fields: &[(Bytes, Bytes)],
        now_ms: u64,
    ) -> Result<StreamId, CmdError> {
        self.append_at(spec, fields, now_ms, None)
    }

    /// Appends into the last node when `limits` leave it room for the
    /// entry, else (and always with `None`) into a new node.
    fn append_at(
        &mut self,
        spec: IdSpec,
        fields: &[(Bytes, Bytes)],
        now_ms: u64,
        limits: Option<NodeLimits>,
    ) -> Result<StreamId, CmdError> {
        let id = self.next_id(spec, now_ms)?;
        let room = |n: &Node, l: NodeLimits| {
            let data_bytes: usize = fields.iter().map(|(f, v)| f.len() + v.len()).sum();
            let max_bytes = match l.max_bytes {
                0 => NODE_MAX_BYTES_CAP,
                b => b.min(NODE_MAX_BYTES_CAP),
            };
            n.len_bytes() + data_bytes < max_bytes
                && (l.max_entries == 0 || n.total_entries() < l.max_entries)
        };
        match (self.nodes.last_mut(), limits) {
            (Some(n), Some(l)) if room(n, l) => n.push(id, fields),
            (tail, _) => {
                if let Some(n) = tail {
                    n.shrink();
                }
                self.nodes.push_last(id, Node::new(id, fields));
            }
        }
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        Ok(id)
    }

    /// `XRANGE key start end [COUNT n]` / `XREVRANGE key end start [COUNT n]`:
    /// live entries with `start <= id <= end` (both inclusive; resolve
    /// exclusive bounds with [`RangeStart::first_included`] /
    /// [`RangeEnd::last_included`]), ascending, or descending if `rev`, at most
    /// `count` of them (`Some(0)` gives none). Empty if `start > end`.
    ///
    /// # Source
    /// `xrangeGenericCommand` / `streamReplyWithRange`.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: Option<usize>,
        rev: bool,
    ) -> Vec<Entry> {
        let it = self.iter_range(start, end, rev);
        match count {
            Some(n) => it.take(n).collect(),
            None => it.collect(),
        }
    }

    /// Lazy form of [`Stream::range`]: seeks the node holding the first
    /// wanted entry, then walks entries forward (or backward if `rev`).
    pub fn iter_range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> impl Iterator<Item = Entry> + '_ {
        self.iter_views(start, end, rev).map(|v| v.to_entry())
    }

    /// [`Stream::iter_range`] without copying: each entry is a view into
    /// its node, read (or written out) in place.
    pub fn iter_views(&self, start: StreamId, end: StreamId, rev: bool) -> EntryViews<'_> {
        let nodes = if start > end {
            self.nodes.range(StreamId::MAX..StreamId::MAX)
        } else if rev {
            self.nodes.range(..=end)
        } else {
            // The node whose master is the greatest one <= start may hold start.
            let from = self.nodes.containing(start).map_or(start, |(k, _)| *k);
            self.nodes
                .range((Bound::Included(from), Bound::Included(end)))
        };
        EntryViews {
            nodes,
            cur: None,
            start,
            end,
            rev,
        }
    }

    /// Whether a live entry with ID `>= start` exists. Looks from the end of
    /// the stream, so the common answer (the newest entry qualifies) costs one
    /// entry's decode and no copy; a forward seek would decode the node's
    /// entries up to `start`. Used by blocked `>` reads to tell whether a read
    /// would return something now.
    pub fn has_entry_from(&self, start: StreamId) -> bool {
        self.iter_views(start, StreamId::MAX, true).next().is_some()
    }

    /// The live entry `id`, if present.
    pub fn get(&self, id: StreamId) -> Option<Entry> {
        let (_, node) = self.nodes.containing(id)?;
        let e = node.find_live(id)?;
        Some(Entry {
            id,
            fields: node.fields(&e),
        })
    }

    /// Whether the live entry `id` exists (XCLAIM/XAUTOCLAIM drop PEL entries
    /// whose entry is gone).
    pub fn contains(&self, id: StreamId) -> bool {
        self.nodes
            .containing(id)
            .is_some_and(|(_, n)| n.find_live(id).is_some())
    }

    /// First live entry (XINFO STREAM `first-entry`).
    pub fn first_entry(&self) -> Option<Entry> {
        self.iter_range(StreamId::MIN, StreamId::MAX, false).next()
    }

    /// Last live entry (XINFO STREAM `last-entry`).
    pub fn last_entry(&self) -> Option<Entry> {
        self.iter_range(StreamId::MIN, StreamId::MAX, true).next()
    }

    /// `XDEL key id`: tombstones the entry; a node left with no live entries
    /// is dropped. Updates `length`, `max_deleted_entry_id` (if `id` is above
    /// it) and `first_id` (0-0 when the stream becomes empty).
    ///
    /// # Reply
    /// `true` if the entry existed (XDEL counts these).
    /// # Source
    /// `xdelCommand`, `streamDeleteItem`, `streamIteratorRemoveEntry`.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((key, node)) = self.nodes.containing_mut(id) else {
            return false;
        };
        let Some(e) = node.find_live(id) else {
            return false;
        };
        node.mark_deleted(&e);
        if node.live() == 0 {
            self.nodes.remove(key);
        }
        self.length -= 1;
        if id > self.max_deleted_entry_id {
            self.max_deleted_entry_id = id;
        }
        if id == self.first_id {
            self.recompute_first_id();
        }
        true
    }

    /// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]` (and XADD's
    /// trim clause). Removes entries from the head:
    /// * whole nodes while they lie entirely below the threshold (MINID: the
    ///   node's last ID < threshold; MAXLEN: removing it leaves >= maxlen);
    /// * stops before a node whose live count would push the removed total
    ///   over the limit;
    /// * exact (`=`) then tombstones single entries of the next node;
    ///   approximate (`~`) stops, so it never goes below the threshold.
    ///
    /// Updates `length` and `first_id`; like Redis 7, not `max_deleted_entry_id`.
    ///
    /// # Reply
    /// Number of entries removed.
    /// `DELREF` also drops the removed entries from every group's PEL;
    /// `ACKED` removes only entries no group needs ([`RefPolicy::Acked`]),
    /// skipping the others (an exact trim goes on past them; an approximate
    /// one removes whole unreferenced nodes only and stops at the first node
    /// holding a referenced entry). A MAXLEN trim still stops at the length.
    ///
    /// # Source
    /// `streamTrim`; Redis 8.2 XTRIM / XADD `KEEPREF | DELREF | ACKED`.
    pub fn trim(&mut self, spec: TrimSpec, limits: NodeLimits) -> u64 {
        self.trim_reporting(spec, limits).0
    }

    /// [`trim`](Self::trim), also saying what was removed in a form that
    /// replays exactly (the AOF logs it): see [`TrimEffect`].
    pub fn trim_reporting(&mut self, spec: TrimSpec, limits: NodeLimits) -> (u64, TrimEffect) {
        match spec.refs {
            RefPolicy::Acked if !self.groups.is_empty() => {
                let mut ids = Vec::new();
                let n = self.trim_acked(spec, limits, &mut ids);
                (n, TrimEffect::Ids(ids))
            }
            RefPolicy::DelRef if !self.groups.is_empty() => {
                let before: Vec<StreamId> = match spec.strategy {
                    TrimStrategy::MinId(min) => self
                        .iter_range(StreamId::MIN, min, false)
                        .filter(|e| e.id < min)
                        .map(|e| e.id)
                        .collect(),
                    TrimStrategy::MaxLen(max) => {
                        let n = self.length.saturating_sub(max);
                        self.iter_range(StreamId::MIN, StreamId::MAX, false)
                            .take(usize::try_from(n).unwrap_or(usize::MAX))
                            .map(|e| e.id)
                            .collect()
                    }
                };
                let removed = self.trim_keepref(spec, limits);
                let gone: Vec<StreamId> = before
                    .into_iter()
                    .filter(|id| !self.contains(*id))
                    .collect();
                for &id in &gone {
                    self.drop_refs(id);
                }
                (removed, TrimEffect::PrefixUnref(gone))
            }
            _ => (self.trim_keepref(spec, limits), TrimEffect::Prefix),
        }
    }

    /// Removes entry `id` the way a trim does: like [`delete`](Self::delete)
    /// but leaving `max_deleted_entry_id` alone (trims never move it). Replays
    /// the entries an `ACKED` trim removed.
    pub fn remove_as_trim(&mut self, id: StreamId) -> bool {
        let keep = self.max_deleted_entry_id;
        let removed = self.delete(id);
        self.max_deleted_entry_id = keep;
        removed
    }

    /// Whether some consumer group still needs entry `id`: it is in a PEL,
    /// or a group has not delivered it yet (ID above its last-delivered ID).
    /// False when the stream has no groups.
    ///
    /// # Source
    /// Redis 8.2 `ACKED` rule (XDELEX, XACKDEL, XTRIM documentation).
    pub fn is_referenced(&self, id: StreamId) -> bool {
        self.groups
            .values()
            .any(|g| id > g.last_id || g.pending(id).is_some())
    }

    /// Removes `id` from every group's PEL (DELREF). Returns whether any
    /// group had it pending.
    pub fn drop_refs(&mut self, id: StreamId) -> bool {
        let mut any = false;
        for g in self.groups.values_mut() {
            any |= g.ack(id);
        }
        any
    }

    /// Deletes entry `id` under a reference policy (XDELEX; XACKDEL after
    /// its acknowledgement).
    ///
    /// ACKED asks [`is_referenced`](Self::is_referenced) first, whether or
    /// not the entry exists: an ID some group still needs is kept (`2`)
    /// even when it is not in the stream. DELREF drops every group's
    /// reference, also for an ID no longer in the stream.
    ///
    /// # Reply
    /// `-1`: no such entry; `1`: deleted; `2`: kept because a group still
    /// needs it (ACKED).
    /// # Source
    /// `xdelexCommand`, redis/src/t_stream.c (8.2): the ACKED check comes
    /// before the deletion, which alone tells a missing ID.
    pub fn delete_with_refs(&mut self, id: StreamId, refs: RefPolicy) -> i64 {
        match refs {
            RefPolicy::Acked if self.is_referenced(id) => return 2,
            RefPolicy::DelRef => {
                self.drop_refs(id);
            }
            _ => {}
        }
        if self.delete(id) {
            1
        } else {
            -1
        }
    }

    /// [`trim`](Self::trim) with `ACKED` on a stream with groups: walks nodes
    /// from the head, skipping entries a group still needs.
    fn trim_acked(&mut self, spec: TrimSpec, limits: NodeLimits, ids: &mut Vec<StreamId>) -> u64 {
        let limit = match spec.limit {
            Some(0) => None,
            Some(n) => Some(n),
            None if spec.approx => Some(limits.default_approx_trim_limit()),
            None => None,
        };
        let groups = &self.groups;
        let referenced = |id: StreamId| {
            groups
                .values()
                .any(|g| id > g.last_id || g.pending(id).is_some())
        };
        let range_referenced = |lo: StreamId, hi: StreamId| {
            groups
                .values()
                .any(|g| hi > g.last_id || g.pel().range(lo..=hi).next().is_some())
        };
        let mut removed = 0u64;
        let mut cursor = StreamId::MIN;
        while let Some((key, node)) = self.nodes.first_from_mut(cursor) {
            if let TrimStrategy::MaxLen(max) = spec.strategy {
                if self.length <= max {
                    break;
                }
            }
            let live = node.live() as u64;
            if limit.is_some_and(|l| removed + live > l) {
                break;
            }
            let below = match spec.strategy {
                TrimStrategy::MaxLen(max) => self.length - live >= max,
                TrimStrategy::MinId(min) => node.last_id() < min,
            };
            if below && !range_referenced(key, node.last_id()) {
                let mut pos = node.first_pos();
                while pos < node.end_pos() {
                    let e = node.entry_at(pos);
                    pos = e.end;
                    if !e.deleted {
                        ids.push(e.id);
                    }
                }
                self.nodes.remove(key);
                self.length -= live;
                removed += live;
                continue;
            }
            if spec.approx {
                break;
            }
            let mut done = false;
            let mut pos = node.first_pos();
            while pos < node.end_pos() {
                let e = node.entry_at(pos);
                pos = e.end;
                if e.deleted {
                    continue;
                }
                let stop = match spec.strategy {
                    TrimStrategy::MaxLen(max) => self.length <= max,
                    TrimStrategy::MinId(min) => e.id >= min,
                };
                if stop {
                    done = true;
                    break;
                }
                if referenced(e.id) {
                    continue;
                }
                ids.push(e.id);
                node.mark_deleted(&e);
                self.length -= 1;
                removed += 1;
            }
            if node.live() == 0 {
                self.nodes.remove(key);
            }
            match key.next() {
                Some(next) if !done => cursor = next,
                _ => break,
            }
        }
        if removed > 0 {
            self.recompute_first_id();
        }
        removed
    }

    /// `KEEPREF` trimming (Redis 7 behaviour), see [`trim`](Self::trim).
    fn trim_keepref(&mut self, spec: TrimSpec, limits: NodeLimits) -> u64 {
        let limit = match spec.limit {
            Some(0) => None,
            Some(n) => Some(n),
            None if spec.approx => Some(limits.default_approx_trim_limit()),
            None => None,
        };
        let mut removed = 0u64;
        while let Some((key, node)) = self.nodes.first_from_mut(StreamId::MIN) {
            if let TrimStrategy::MaxLen(max) = spec.strategy {
                if self.length <= max {
                    break;
                }
            }
            let live = node.live() as u64;
            if limit.is_some_and(|l| removed + live > l) {
                break;
            }
            let whole = match spec.strategy {
                TrimStrategy::MaxLen(max) => self.length - live >= max,
                TrimStrategy::MinId(min) => node.last_id() < min,
            };
            if whole {
                self.nodes.remove(key);
                self.length -= live;
                removed += live;
                continue;
            }
            if spec.approx {
                break;
            }
            let mut pos = node.first_pos();
            while pos < node.end_pos() {
                let e = node.entry_at(pos);
                pos = e.end;
                if e.deleted {
                    continue;
                }
                let stop = match spec.strategy {
                    TrimStrategy::MaxLen(max) => self.length <= max,
                    TrimStrategy::MinId(min) => e.id >= min,
                };
                if stop {
                    break;
                }
                node.mark_deleted(&e);
                self.length -= 1;
                removed += 1;
            }
            if node.live() == 0 {
                self.nodes.remove(key);
            }
            break;
        }
        if removed > 0 {
            self.recompute_first_id();
        }
        removed
    }

    /// `XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]`.
    ///
    /// Sets `last_id` (it may go down, but not below the last live entry),
    /// and optionally `entries_added` and `max_deleted_entry_id`
    /// (`Some(0-0)` leaves it unchanged, as Redis treats 0-0 as "not given").
    ///
    /// # Errors
    /// In Redis's order, each a `Msg` with the exact text:
    /// [`ERR_XSETID_SMALLER_THAN_MAX_DELETED`] (id < given max deleted),
    /// [`ERR_XSETID_SMALLER_THAN_CURRENT_MAX_DELETED`] (id < the stream's
    /// max deleted ID; Redis 8.0),
    /// [`ERR_XSETID_SMALLER_THAN_TOP`] (stream not empty and id < last entry),
    /// [`ERR_XSETID_ENTRIES_ADDED_SMALL`] (entries_added < length).
    /// # Source
    /// `xsetidCommand`.
    pub fn set_last_id(
        &mut self,
        id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) -> Result<(), CmdError> {
        if max_deleted.is_some_and(|m| id < m) {
            return Err(CmdError::msg(ERR_XSETID_SMALLER_THAN_MAX_DELETED));
        }
        if id < self.max_deleted_entry_id {
            return Err(CmdError::msg(ERR_XSETID_SMALLER_THAN_CURRENT_MAX_DELETED));
        }
        if let Some(top) = self.last_live_id() {
            if id < top {
                return Err(CmdError::msg(ERR_XSETID_SMALLER_THAN_TOP));
            }
        }
        if entries_added.is_some_and(|n| n < self.length) {
            return Err(CmdError::msg(ERR_XSETID_ENTRIES_ADDED_SMALL));
        }
        self.last_id = id;
        if let Some(n) = entries_added {
            self.entries_added = n;
        }
        if let Some(m) = max_deleted.filter(|m| *m != StreamId::MIN) {
            self.max_deleted_entry_id = m;
        }
        Ok(())
    }

    /// Estimated heap + inline bytes held by this stream: the struct, every
    /// node buffer's capacity, the node structs and the B-tree's own nodes
    /// (11-slot nodes assumed 2/3 full, plus per-node header and edges) for
    /// all nodes but the last, which the struct holds.
    pub fn memory_usage_bytes(&self) -> usize {
        const BTREE_CAPACITY: usize = 11;
        let kv = std::mem::size_of::<StreamId>() + std::mem::size_of::<Node>();
        let n = self.nodes.len().saturating_sub(1);
        let btree_nodes = if n == 0 {
            0
        } else {
            (n * 3).div_ceil(BTREE_CAPACITY * 2)
        };
        let btree_bytes = btree_nodes * (BTREE_CAPACITY * kv + 16 + 12 * 8);
        let buffers: usize = self.nodes.values().map(Node::capacity_bytes).sum();
        let idmp = self.idmp.as_ref().map_or(0, |m| m.memory_usage_bytes());
        std::mem::size_of::<Self>() + btree_bytes + buffers + idmp
    }

    /// The IDMP map (Redis 8.6), if the stream ever used one.
    pub fn idmp(&self) -> Option<&idmp::Idmp> {
        self.idmp.as_deref()
    }

    /// The IDMP map, created (with the default settings) if missing.
    pub fn idmp_mut(&mut self) -> &mut idmp::Idmp {
        self.idmp.get_or_insert_with(Default::default)
    }

    /// Checks the stream's structural invariants and returns the first one
    /// that does not hold. Read-only; O(entries + pending). Used by the unit
    /// proptests and by the `streams` fuzz target after every operation.
    ///
    /// Checked:
    /// * every node holds at least one live entry and its key is its first
    ///   (master) entry's ID;
    /// * each node's live count equals its untombstoned entries;
    /// * live IDs strictly increase across the whole stream (nodes in key
    ///   order), and the last live ID is `<= last_id`. Tombstones are not
    ///   ordered: XSETID may lower `last_id` below a deleted ID (Redis only
    ///   checks the last live entry), so a new entry can follow a greater
    ///   tombstone, in Redis's listpacks as here; readers skip tombstones
    ///   before comparing IDs;
    /// * `length` equals the number of live entries; `entries_added >= length`;
    /// * `first_id` is the first live ID (0-0 when empty);
    /// * each group satisfies [`group::ConsumerGroup::check_invariants`]
    ///   (consumer PELs partition the group PEL, names and slab agree).
    ///
    /// # Errors
    /// A description of the first violated invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut live_total = 0u64;
        let mut prev: Option<StreamId> = None;
        let mut first_live: Option<StreamId> = None;
        for (&key, node) in &self.nodes {
            if node.live() == 0 {
                return Err(format!("node {key} has no live entries"));
            }
            let mut pos = node.first_pos();
            let mut live = 0usize;
            let mut first = true;
            while pos < node.end_pos() {
                let e = node.entry_at(pos);
                if e.end <= pos {
                    return Err(format!("node {key}: entry at {pos} does not advance"));
                }
                if first && e.id != key {
                    return Err(format!("node {key}: master entry has ID {}", e.id));
                }
                first = false;
                if !e.deleted {
                    if prev.is_some_and(|p| p >= e.id) {
                        return Err(format!("live ID {} does not increase", e.id));
                    }
                    prev = Some(e.id);
                    live += 1;
                    first_live.get_or_insert(e.id);
                }
                pos = e.end;
            }
            if pos != node.end_pos() {
                return Err(format!("node {key}: entries overrun the buffer"));
            }
            if live != node.live() {
                return Err(format!(
                    "node {key}: live count {} but {live} live entries",
                    node.live()
                ));
            }
            if prev.is_some_and(|p| node.last_id() < p) {
                return Err(format!(
                    "node {key}: last_id {} below a live entry",
                    node.last_id()
                ));
            }
            live_total += live as u64;
        }
        if live_total != self.length {
            return Err(format!(
                "length {} but {live_total} live entries",
                self.length
            ));
        }
        if self.entries_added < self.length {
            return Err(format!(
                "entries_added {} < length {}",
                self.entries_added, self.length
            ));
        }
        if self.first_id != first_live.unwrap_or(StreamId::MIN) {
            return Err(format!(
                "first_id {} but first live entry is {:?}",
                self.first_id, first_live
            ));
        }
        if let Some(top) = self.last_live_id() {
            if top > self.last_id {
                return Err(format!("live entry {top} above last_id {}", self.last_id));
            }
        }
        for (name, g) in &self.groups {
            g.check_invariants()
                .map_err(|e| format!("group {}: {e}", String::from_utf8_lossy(name)))?;
        }
        Ok(())
    }

    fn last_live_id(&self) -> Option<StreamId> {
        let (_, node) = self.nodes.last()?;
        node.last_live().map(|e| e.id)
    }

    fn recompute_first_id(&mut self) {
        self.first_id = self
            .nodes
            .first()
            .and_then(|(_, n)| n.first_live())
            .map_or(StreamId::MIN, |e| e.id);
    }

    #[cfg(test)]
    fn node_live_counts(&self) -> Vec<u64> {
        self.nodes.values().map(|n| n.live() as u64).collect()
    }
}

/// One live entry, borrowed from the node that holds it
/// ([`Stream::iter_views`]).
#[derive(Clone, Copy)]
pub struct EntryView<'a> {
    /// The entry's ID.
    pub id: StreamId,
    node: &'a Node,
    at: EntryRef,
}

impl<'a> EntryView<'a> {
    /// Field/value pairs in insertion order, as slices of the node.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.node.field_slices(&self.at)
    }

    /// The entry copied out of its node.
    pub fn to_entry(&self) -> Entry {
        Entry {
            id: self.id,
            fields: self.node.fields(&self.at),
        }
    }
}

/// Iterator over live entries of an ID interval; see [`Stream::iter_views`].
pub struct EntryViews<'a> {
    nodes: NodeRange<'a>,
    /// Current node and cursor: forward, the next entry's start; reverse, its end.
    cur: Option<(&'a Node, usize)>,
    start: StreamId,
    end: StreamId,
    rev: bool,
}

impl<'a> Iterator for EntryViews<'a> {
    type Item = EntryView<'a>;

    fn next(&mut self) -> Option<EntryView<'a>> {
        loop {
            let (node, pos) = match self.cur {
                Some(c) => c,
                None => {
                    let node = if self.rev {
                        let (_, n) = self.nodes.next_back()?;
                        if n.last_id() < self.start {
                            // This node and all before it are below the interval.
                            self.nodes = Default::default();
                            return None;
                        }
                        (n, n.end_pos())
                    } else {
                        let (_, n) = self.nodes.next()?;
                        (n, n.seek(self.start))
                    };
                    self.cur = Some(node);
                    node
                }
            };
            let e: EntryRef = if self.rev {
                if pos <= node.first_pos() {
                    self.cur = None;
                    continue;
                }
                let e = node.entry_before(pos);
                self.cur = Some((node, e.start));
                e
            } else {
                if pos >= node.end_pos() {
                    self.cur = None;
                    continue;
                }
                let e = node.entry_at(pos);
                self.cur = Some((node, e.end));
                e
            };
            // Tombstones are skipped before any ordering test: after XSETID
            // lowers last_id, a tombstone may sit above later live entries.
            if e.deleted {
                continue;
            }
            if self.rev {
                if e.id > self.end {
                    continue;
                }
                if e.id < self.start {
                    self.finish();
                    return None;
                }
            } else {
                if e.id < self.start {
                    continue;
                }
                if e.id > self.end {
                    self.finish();
                    return None;
                }
            }
            return Some(EntryView {
                id: e.id,
                node,
                at: e,
            });
        }
    }
}

impl EntryViews<'_> {
    fn finish(&mut self) {
        self.cur = None;
        self.nodes = Default::default();
    }
}

#[cfg(test)]
mod tests;
