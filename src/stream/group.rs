//! Consumer groups: pure data, no threads, no IO, no clocks (time is a
//! parameter, in ms since the Unix epoch).
//!
//! A [`ConsumerGroup`] holds the group's last-delivered ID, its logical read
//! counter (`entries_read`, for lag), the group PEL ordered by ID and its
//! consumers. Each consumer keeps its own ordered set of pending IDs; the two
//! views are kept consistent by every method here (no caller can reach one
//! without the other).
//!
//! Memory: a pending entry is one `StreamId` key plus one packed 20-byte
//! [`PendingEntry`] in the group PEL, plus one `StreamId` in its consumer's
//! set; both are chunked [`IdMap`]s, so the per-entry overhead beyond those
//! 52 bytes is a fraction of a chunk header. The owning consumer is a `u32`
//! index into the group's consumer slab, not a copy of its name.
//!
//! An entry released with XNACK (Redis 8.8) has no owner
//! ([`PendingEntry::owner`] is `None`) and delivery time 0: it is in no
//! consumer's set. The group also keeps the order in which its entries were
//! released (the "NACK zone" at the head of Redis's time-ordered PEL), which
//! XREADGROUP CLAIM serves first, oldest release first.
//!
//! Lag and `entries_read` follow Redis 8.x's rules, computed from a
//! [`StreamCounters`] snapshot of the stream's metadata.
//!
//! # Source
//! redis/src/stream.h (`streamCG`, `streamConsumer`, `streamNACK`) and
//! t_stream.c (`streamCreateCG`, `streamCreateConsumer`, `streamReplyWithRange`
//! group bookkeeping, `streamRangeHasTombstones`,
//! `streamEstimateDistanceFromFirstEverEntry`, `streamReplyWithCGLag`), 7.x.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::idmap::IdMap;
use super::{Stream, StreamId};

/// Index of a consumer in its group's slab. Valid until that consumer is
/// deleted; the group never keeps a PEL entry pointing at a deleted consumer.
pub type ConsumerId = u32;

/// [`PendingEntry::consumer`] of an entry no consumer owns (released by XNACK).
pub const NO_CONSUMER: ConsumerId = ConsumerId::MAX;

/// One entry of a group's PEL (Redis `streamNACK`): delivered, not yet acked.
///
/// Packed to 20 bytes (alignment 4): fields are read by value, never borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct PendingEntry {
    /// Last delivery time, ms since the Unix epoch; 0 for an entry released
    /// by XNACK (claimable at once, whatever the min-idle-time).
    pub delivery_time_ms: u64,
    /// Times delivered; 1 on first delivery.
    pub delivery_count: u64,
    /// Owning consumer (index into the group's consumer slab), or
    /// [`NO_CONSUMER`].
    pub consumer: ConsumerId,
}

impl PendingEntry {
    /// The owning consumer; `None` for an entry released by XNACK.
    pub fn owner(&self) -> Option<ConsumerId> {
        let c = self.consumer;
        (c != NO_CONSUMER).then_some(c)
    }

    /// Whether the entry was released by XNACK (no owner).
    pub fn is_nacked(&self) -> bool {
        self.owner().is_none()
    }

    /// Idle time at `now_ms`, as min-idle-time filters compare it: an
    /// unowned (XNACKed) entry passes every filter.
    pub fn idle_ms(&self, now_ms: u64) -> u64 {
        if self.is_nacked() {
            u64::MAX
        } else {
            now_ms.saturating_sub(self.delivery_time_ms)
        }
    }
}

/// A consumer of a group (Redis `streamConsumer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumer {
    /// The consumer's name.
    pub name: Bytes,
    /// IDs of the group PEL entries this consumer owns, ascending.
    pub pel: IdMap<()>,
    /// Last attempted interaction (XREADGROUP, XCLAIM, XAUTOCLAIM), ms since
    /// the Unix epoch; `idle` of XINFO CONSUMERS is measured from it.
    pub seen_time_ms: u64,
    /// Last successful interaction (entries read or claimed), ms since the
    /// Unix epoch; `None` if never (`inactive` is then -1).
    pub active_time_ms: Option<u64>,
}

/// A consumer group (Redis `streamCG`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// Last ID delivered to a consumer with `>` (or set by CREATE/SETID/XCLAIM LASTID).
    pub last_id: StreamId,
    /// Logical read counter: how many stream entries the group has read,
    /// counting from the first ever; `None` when unknown (Redis's -1).
    pub entries_read: Option<u64>,
    pel: IdMap<PendingEntry>,
    /// Consumer slab; `None` slots are free (listed in `free`).
    slab: Vec<Option<Consumer>>,
    free: Vec<ConsumerId>,
    by_name: BTreeMap<Bytes, ConsumerId>,
    /// The released (XNACKed) entries in release order: sequence number →
    /// ID, and each one's number. Exactly the PEL entries with no owner.
    nack_order: BTreeMap<u64, StreamId>,
    nack_seq: BTreeMap<StreamId, u64>,
    /// The next release's sequence number.
    next_nack: u64,
    /// Delivery and ack latency histograms (statistics, see [`super::latency`]).
    pub latency: super::latency::GroupLatency,
}

impl ConsumerGroup {
    /// A group with no consumers and an empty PEL (XGROUP CREATE).
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> Self {
        ConsumerGroup {
            last_id,
            entries_read,
            ..Default::default()
        }
    }

    /// The released (XNACKed) pending entries, oldest release first: the
    /// order XREADGROUP CLAIM redelivers them in.
    ///
    /// # Source
    /// redis.io XNACK "Behavior" and "Notes" (8.8: the NACK zone at the
    /// head of the PEL); released entries come back first-released first,
    /// as Redis 8.8 answers redis-rs's XNACK ordering tests.
    pub fn nacked_in_order(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.nack_order.values().copied()
    }

    /// Forgets `id`'s place in the release order (it is no longer an
    /// unowned pending entry, or is being released again).
    fn unlist_nack(&mut self, id: StreamId) {
        if let Some(seq) = self.nack_seq.remove(&id) {
            self.nack_order.remove(&seq);
        }
    }

    /// The group PEL, ordered by ID.
    pub fn pel(&self) -> &IdMap<PendingEntry> {
        &self.pel
    }

    /// The pending entry `id`, if any.
    pub fn pending(&self, id: StreamId) -> Option<&PendingEntry> {
        self.pel.get(id)
    }

    /// Number of consumers.
    pub fn consumer_count(&self) -> usize {
        self.by_name.len()
    }

    /// The consumer with this index. `None` for a freed or unknown index.
    pub fn consumer(&self, id: ConsumerId) -> Option<&Consumer> {
        self.slab.get(id as usize).and_then(Option::as_ref)
    }

    /// The index of the consumer named `name`.
    pub fn consumer_id(&self, name: &[u8]) -> Option<ConsumerId> {
        self.by_name.get(name).copied()
    }

    /// The consumer named `name`.
    pub fn consumer_by_name(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumer_id(name).and_then(|id| self.consumer(id))
    }

    /// Consumers in name order (as Redis's rax lists them).
    pub fn consumers(&self) -> impl Iterator<Item = &Consumer> + '_ {
        self.by_name.values().filter_map(|&id| self.consumer(id))
    }

    /// Name of consumer `id` (empty if unknown, which the group never lets happen
    /// for an index stored in its PEL).
    pub fn consumer_name(&self, id: ConsumerId) -> Bytes {
        self.consumer(id)
            .map(|c| c.name.clone())
            .unwrap_or_default()
    }

    /// Finds or creates the consumer `name` (created with `seen_time_ms = now_ms`
    /// and no active time). Returns its index and whether it was created.
    /// A new consumer keeps a copy of `name`, never `name` itself: a command
    /// argument is a slice of the connection's whole read buffer (16 KB and
    /// more), which the consumer would otherwise keep alive as long as it
    /// exists (measured: about 16 KB of `used_memory` per consumer).
    ///
    /// # Source
    /// `streamLookupConsumer` + `streamCreateConsumer`.
    pub fn get_or_create_consumer(&mut self, name: &Bytes, now_ms: u64) -> (ConsumerId, bool) {
        if let Some(id) = self.consumer_id(name) {
            return (id, false);
        }
        let name = Bytes::copy_from_slice(name);
        let consumer = Consumer {
            name: name.clone(),
            pel: IdMap::new(),
            seen_time_ms: now_ms,
            active_time_ms: None,
        };
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(slot) = self.slab.get_mut(id as usize) {
                    *slot = Some(consumer);
                }
                id
            }
            None => {
                self.slab.push(Some(consumer));
                (self.slab.len() - 1) as ConsumerId
            }
        };
        self.by_name.insert(name, id);
        (id, true)
    }

    /// Mutable access to consumer `id` (its times; its PEL only through the group).
    fn consumer_mut(&mut self, id: ConsumerId) -> Option<&mut Consumer> {
        self.slab.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// Sets the consumer's seen time (any attempted interaction).
    pub fn touch_seen(&mut self, id: ConsumerId, now_ms: u64) {
        if let Some(c) = self.consumer_mut(id) {
            c.seen_time_ms = now_ms;
        }
    }

    /// Sets the consumer's seen and active times (a successful interaction).
    pub fn touch_active(&mut self, id: ConsumerId, now_ms: u64) {
        if let Some(c) = self.consumer_mut(id) {
            c.seen_time_ms = now_ms;
            c.active_time_ms = Some(now_ms);
        }
    }

    /// `XGROUP DELCONSUMER`: removes the consumer and its pending entries
    /// (from the group PEL too). Returns how many entries it had pending, or
    /// `None` if there is no such consumer.
    ///
    /// # Source
    /// `streamDelConsumer`.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<u64> {
        let id = self.by_name.remove(name)?;
        let consumer = self.slab.get_mut(id as usize)?.take()?;
        for pid in consumer.pel.keys() {
            self.pel.remove(*pid);
        }
        self.free.push(id);
        Some(consumer.pel.len() as u64)
    }

    /// Records a delivery of `id` to `consumer` by a `>` read: a new PEL
    /// entry (count 1, time `now_ms`); if `id` was already pending (the group
    /// was moved back with SETID), it is reassigned and its count reset to 1.
    ///
    /// # Source
    /// `streamReplyWithRange` (the `raxTryInsert` / reassign path).
    pub fn deliver(&mut self, id: StreamId, consumer: ConsumerId, now_ms: u64) {
        let new = PendingEntry {
            delivery_time_ms: now_ms,
            delivery_count: 1,
            consumer,
        };
        if let Some(old) = self.pel.insert(id, new) {
            if let Some(c) = self.consumer_mut(old.consumer) {
                c.pel.remove(id);
            }
            if old.is_nacked() {
                self.unlist_nack(id);
            }
        }
        if let Some(c) = self.consumer_mut(consumer) {
            c.pel.insert(id, ());
        }
    }

    /// Redelivery from a consumer's own history (XREADGROUP with an explicit
    /// ID): time becomes `now_ms`, count goes up by one.
    pub fn redeliver(&mut self, id: StreamId, now_ms: u64) {
        if let Some(p) = self.pel.get_mut(id) {
            p.delivery_time_ms = now_ms;
            p.delivery_count = p.delivery_count.saturating_add(1);
        }
    }

    /// XACK / XACKDEL of `id` at `now_ms`: [`ack`](Self::ack), recording
    /// the delivered→acked time in the group's latency histogram when the
    /// entry was pending.
    pub fn ack_recording(&mut self, id: StreamId, now_ms: u64) -> bool {
        let Some(p) = self.pel.remove(id) else {
            return false;
        };
        self.latency.record_ack(p.delivery_time_ms, now_ms);
        if let Some(c) = self.consumer_mut(p.consumer) {
            c.pel.remove(id);
        }
        if p.is_nacked() {
            self.unlist_nack(id);
        }
        true
    }

    /// `XACK`: removes `id` from the group PEL and its consumer's PEL.
    /// Returns whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(p) = self.pel.remove(id) else {
            return false;
        };
        if let Some(c) = self.consumer_mut(p.consumer) {
            c.pel.remove(id);
        }
        if p.is_nacked() {
            self.unlist_nack(id);
        }
        true
    }

    /// Gives the pending entry `id` to `consumer` and sets its delivery time
    /// and count (XCLAIM / XAUTOCLAIM). Creates the entry if it is not
    /// pending (XCLAIM FORCE). The caller decides `delivery_count`.
    ///
    /// # Source
    /// `xclaimCommand` / `xautoclaimCommand` NACK updates.
    pub fn claim(
        &mut self,
        id: StreamId,
        consumer: ConsumerId,
        delivery_time_ms: u64,
        delivery_count: u64,
    ) {
        let new = PendingEntry {
            delivery_time_ms,
            delivery_count,
            consumer,
        };
        if let Some(old) = self.pel.insert(id, new) {
            if old.consumer != consumer {
                if let Some(c) = self.consumer_mut(old.consumer) {
                    c.pel.remove(id);
                }
                if old.is_nacked() {
                    self.unlist_nack(id);
                }
            }
        }
        if let Some(c) = self.consumer_mut(consumer) {
            c.pel.insert(id, ());
        }
    }

    /// `XNACK` (Redis 8.8): releases the pending entry `id` back to the
    /// group: no owner (it leaves its consumer's set), delivery time 0 (so
    /// it is claimable at once), delivery count set by `count` from the
    /// current one, and the last place in the release order (an entry
    /// released again moves there). With `force`, an entry that is not
    /// pending is created unowned with `count(0)`. Returns whether the
    /// entry was released.
    ///
    /// # Source
    /// redis.io XNACK "Behavior" (8.8: the entry is repositioned in the
    /// NACK zone).
    pub fn nack(&mut self, id: StreamId, force: bool, count: impl FnOnce(u64) -> u64) -> bool {
        let (old_owner, old_count) = match self.pel.get(id) {
            Some(p) => (p.owner(), p.delivery_count),
            None if force => (None, 0),
            None => return false,
        };
        if let Some(c) = old_owner.and_then(|o| self.consumer_mut(o)) {
            c.pel.remove(id);
        }
        self.pel.insert(
            id,
            PendingEntry {
                delivery_time_ms: 0,
                delivery_count: count(old_count),
                consumer: NO_CONSUMER,
            },
        );
        self.unlist_nack(id);
        let seq = self.next_nack;
        self.next_nack += 1;
        self.nack_order.insert(seq, id);
        self.nack_seq.insert(id, seq);
        true
    }

    /// Pending IDs of `consumer` from `start` (inclusive), ascending.
    pub fn consumer_pel_from(
        &self,
        consumer: ConsumerId,
        start: StreamId,
    ) -> impl Iterator<Item = StreamId> + '_ {
        self.consumer(consumer)
            .into_iter()
            .flat_map(move |c| c.pel.range(start..).map(|(id, _)| *id))
    }

    /// Sets the last-delivered ID and read counter (XGROUP SETID, and CREATE).
    /// A counter above `entries_added` is stored as `entries_added` (no group
    /// can have read more than was ever added).
    ///
    /// # Source
    /// Redis 8.2.2 release notes (redis/redis#14257: ENTRIESREAD no longer
    /// produces a negative lag).
    pub fn set_last_id(
        &mut self,
        last_id: StreamId,
        entries_read: Option<u64>,
        entries_added: u64,
    ) {
        self.last_id = last_id;
        self.entries_read = entries_read.map(|n| n.min(entries_added));
    }

    /// Advances the group past `id`, an entry just delivered by a `>` read
    /// (so `id > last_id`), keeping `entries_read` exact when it can: +1 if
    /// the counter is known, the group was not left behind the first live
    /// entry (trimmed past it) and no tombstone lies after the group's
    /// position; otherwise a fresh estimate for `id`.
    ///
    /// # Source
    /// `streamReplyWithRange` (group branch), with redis/redis#13338 (count
    /// from the group's position, not the delivered ID) and #13958 (a group
    /// behind the first entry re-estimates), both in Redis 8.x.
    pub fn advance_last_delivered(&mut self, id: StreamId, s: &StreamCounters) {
        if id <= self.last_id {
            return;
        }
        let counter_holds =
            self.last_id >= s.first_id && !s.range_has_tombstones(self.last_id, StreamId::MAX);
        match self.entries_read {
            Some(n) if counter_holds => self.entries_read = Some(n + 1),
            _ if s.entries_added != 0 => {
                self.entries_read = s.estimate_distance_from_first_ever_entry(id);
            }
            _ => {}
        }
        self.last_id = id;
    }

    /// XINFO GROUPS `lag`: entries not yet delivered to the group; `None` when
    /// it cannot be computed (a tombstone after the group's position and a
    /// counter that cannot be estimated).
    ///
    /// In order: a never-written or emptied stream has lag 0; a group whose
    /// position and the greatest tombstone both lie before the first live
    /// entry has every live entry ahead of it (lag = length); a known counter
    /// with no tombstone ahead gives `entries_added - entries_read`; else the
    /// counter of the group's position is estimated.
    ///
    /// # Source
    /// `streamReplyWithCGLag`, Redis 8.x (redis/redis#13338, #13473).
    pub fn lag(&self, s: &StreamCounters) -> Option<u64> {
        if s.entries_added == 0 || s.length == 0 {
            return Some(0);
        }
        if self.last_id < s.first_id && s.max_deleted_entry_id < s.first_id {
            return Some(s.length);
        }
        if let Some(n) = self.entries_read {
            if !s.range_has_tombstones(self.last_id, StreamId::MAX) {
                return Some(s.entries_added.saturating_sub(n));
            }
        }
        s.estimate_distance_from_first_ever_entry(self.last_id)
            .map(|n| s.entries_added.saturating_sub(n))
    }

    /// Checks the group's bookkeeping and returns the first broken invariant:
    /// every owned PEL entry names a live consumer whose own PEL holds that
    /// ID, unowned (XNACK-released) entries are in no consumer's PEL; the
    /// consumer PELs are disjoint and, with the unowned entries, equal the
    /// group PEL (they partition it); the release order lists exactly the
    /// unowned entries, once each; the name index and the slab agree (same
    /// names, no free slot in use).
    ///
    /// # Errors
    /// A description of the first violated invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut unowned = 0usize;
        for (id, p) in self.pel.iter() {
            let Some(owner) = p.owner() else {
                unowned += 1;
                continue;
            };
            let Some(c) = self.consumer(owner) else {
                return Err(format!("PEL entry {id} owned by missing consumer {owner}"));
            };
            if !c.pel.contains(*id) {
                return Err(format!(
                    "PEL entry {id} missing from consumer {}'s PEL",
                    String::from_utf8_lossy(&c.name)
                ));
            }
        }
        let mut total = 0usize;
        for (slot, c) in self.slab.iter().enumerate() {
            let Some(c) = c else { continue };
            let cid = slot as ConsumerId;
            if self.by_name.get(&c.name) != Some(&cid) {
                return Err(format!(
                    "consumer slot {slot} ({}) not indexed by name",
                    String::from_utf8_lossy(&c.name)
                ));
            }
            for id in c.pel.keys() {
                match self.pel.get(*id) {
                    Some(p) if p.owner() == Some(cid) => {}
                    Some(p) => {
                        let owner = p.consumer;
                        return Err(format!(
                            "{id} in consumer {slot}'s PEL but owned by {owner}"
                        ));
                    }
                    None => return Err(format!("{id} in consumer {slot}'s PEL, not the group's")),
                }
            }
            total += c.pel.len();
        }
        if total + unowned != self.pel.len() {
            return Err(format!(
                "consumer PELs hold {total} IDs and {unowned} are unowned, group PEL {}",
                self.pel.len()
            ));
        }
        if self.nack_order.len() != unowned || self.nack_seq.len() != unowned {
            return Err(format!(
                "{unowned} unowned entries, release order lists {} ({} numbered)",
                self.nack_order.len(),
                self.nack_seq.len()
            ));
        }
        for (seq, id) in &self.nack_order {
            if self.nack_seq.get(id) != Some(seq)
                || !self.pel.get(*id).is_some_and(|p| p.is_nacked())
            {
                return Err(format!(
                    "release order entry {seq} ({id}) is not an unowned entry"
                ));
            }
        }
        if self.by_name.len() != self.slab.iter().flatten().count() {
            return Err("name index and consumer slab differ in size".into());
        }
        for &f in &self.free {
            if self.consumer(f).is_some() {
                return Err(format!("slot {f} is both free and in use"));
            }
        }
        Ok(())
    }

    /// Estimated bytes for this group (PEL chunks, consumer sets, names).
    pub fn memory_usage_bytes(&self) -> usize {
        let sets: usize = self
            .consumers()
            .map(|c| c.pel.heap_bytes() + 2 * c.name.len() + 96)
            .sum();
        // Two B-tree entries per released entry (ID and number each way).
        let released = self.nack_order.len() * 2 * (16 + 8 + 16);
        std::mem::size_of::<Self>()
            + self.pel.heap_bytes()
            + sets
            + released
            + self.latency.memory_usage_bytes()
    }
}

/// A copy of the stream metadata the lag rules need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamCounters {
    /// Live entries.
    pub length: u64,
    /// Last generated ID.
    pub last_id: StreamId,
    /// First live ID (0-0 if empty).
    pub first_id: StreamId,
    /// Greatest XDEL'ed ID (0-0: none).
    pub max_deleted_entry_id: StreamId,
    /// Entries ever appended.
    pub entries_added: u64,
}

impl StreamCounters {
    /// Whether a tombstone may lie in `[start, end]`: the stream is not empty,
    /// has deleted something, and the greatest deleted ID falls in the range
    /// (even when it lies before the first live entry: a group may still be
    /// behind it).
    ///
    /// # Source
    /// `streamRangeHasTombstones`, Redis 8.x (redis/redis#13338).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_entry_id == StreamId::MIN {
            return false;
        }
        start <= self.max_deleted_entry_id && self.max_deleted_entry_id <= end
    }

    /// The logical read counter of `id` (how many entries from the first
    /// ever up to and including `id`), when it can be known: 0 for a stream
    /// never written; `entries_added` for an emptied stream (any `id` up to
    /// the last ID) or for the last ID itself; `entries_added - length` just
    /// before the first live entry and `+ 1` at it, when no tombstone lies at
    /// or after the first live entry. A tombstone after `id`, a future ID, or
    /// an ID inside a fragmented stream has no known counter.
    ///
    /// # Source
    /// `streamEstimateDistanceFromFirstEverEntry`, Redis 8.x (redis/redis#13338).
    pub fn estimate_distance_from_first_ever_entry(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id != StreamId::MIN && id < self.max_deleted_entry_id {
            return None;
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        let contiguous =
            self.max_deleted_entry_id == StreamId::MIN || self.max_deleted_entry_id < self.first_id;
        if contiguous {
            let before_first = self.entries_added.saturating_sub(self.length);
            if id < self.first_id {
                return Some(before_first);
            }
            if id == self.first_id {
                return Some(before_first + 1);
            }
        }
        None
    }
}

/// What a `>` read delivered from one stream ([`Stream::deliver_new`]).
#[derive(Debug, Default)]
pub struct Delivered {
    /// The consumer was created by this read.
    pub created: bool,
    /// IDs of the entries delivered, ascending (empty when nothing was new).
    pub ids: Vec<StreamId>,
}

/// What a history read found ([`Stream::read_history`]).
#[derive(Debug, Default)]
pub struct History {
    /// The consumer was created by this read.
    pub created: bool,
    /// The consumer's pending IDs read, ascending, each with its entry, or
    /// `None` when the entry was deleted from the stream (Redis replies
    /// `[id, nil]` for those).
    pub entries: Vec<(StreamId, Option<super::Entry>)>,
}

impl Stream {
    /// A `>` read of `group` by `consumer` (created if missing): the entries
    /// after the group's last-delivered ID, at most `take`, while `admit`
    /// accepts them (it is asked before each entry is delivered, with the
    /// entry in place in its node, and is where the caller writes it out;
    /// the first refusal ends the read). Each delivered entry advances last-delivered
    /// and entries-read and, unless `noack`, enters both PELs; the consumer's
    /// seen time is `now_ms`, and its active time too when an entry entered
    /// its PEL. `None` when the group does not exist.
    ///
    /// # Source
    /// `streamReplyWithRange` (group branch), t_stream.c.
    pub fn deliver_new(
        &mut self,
        group: &[u8],
        consumer: &Bytes,
        take: usize,
        noack: bool,
        now_ms: u64,
        mut admit: impl FnMut(&super::EntryView<'_>) -> bool,
    ) -> Option<Delivered> {
        let counters = self.counters();
        let last = self.group(group)?.last_id;
        // Sized up front (a `take_while` tells `collect` nothing), within
        // what the stream holds: COUNT may be huge.
        let mut ids: Vec<StreamId> = Vec::with_capacity(take.min(self.length as usize).min(1024));
        if let Some(start) = last.next() {
            ids.extend(
                self.iter_views(start, StreamId::MAX, false)
                    .take(take)
                    .take_while(|e| admit(e))
                    .map(|e| e.id),
            );
        }
        let g = self.group_mut(group)?;
        let (cid, created) = g.get_or_create_consumer(consumer, now_ms);
        g.touch_seen(cid, now_ms);
        if !ids.is_empty() && !noack {
            g.touch_active(cid, now_ms);
        }
        // Entries of one millisecond share one histogram update.
        let mut run: Option<(u64, u64)> = None;
        for &id in &ids {
            g.advance_last_delivered(id, &counters);
            match &mut run {
                Some((ms, n)) if *ms == id.ms => *n += 1,
                _ => {
                    if let Some((ms, n)) = run.replace((id.ms, 1)) {
                        g.latency.record_deliveries(ms, now_ms, n);
                    }
                }
            }
            if !noack {
                g.deliver(id, cid, now_ms);
            }
        }
        if let Some((ms, n)) = run {
            g.latency.record_deliveries(ms, now_ms, n);
        }
        Some(Delivered { created, ids })
    }

    /// A history read of `group` by `consumer` (created if missing): its
    /// pending IDs from `start`, at most `take`, while `admit` accepts them
    /// (asked with the entry, or `None` for one deleted from the stream).
    /// Entries still in the stream are redelivered (delivery time `now_ms`,
    /// count + 1). `None` when the group does not exist.
    ///
    /// # Source
    /// `streamReplyWithRangeFromConsumerPEL`, t_stream.c.
    pub fn read_history(
        &mut self,
        group: &[u8],
        consumer: &Bytes,
        start: StreamId,
        take: usize,
        now_ms: u64,
        mut admit: impl FnMut(StreamId, Option<&super::Entry>) -> bool,
    ) -> Option<History> {
        let g = self.group_mut(group)?;
        let (cid, created) = g.get_or_create_consumer(consumer, now_ms);
        g.touch_seen(cid, now_ms);
        let ids: Vec<StreamId> = g.consumer_pel_from(cid, start).take(take).collect();
        let mut entries = Vec::with_capacity(ids.len());
        for id in ids {
            let e = self.get(id);
            if !admit(id, e.as_ref()) {
                break;
            }
            entries.push((id, e));
        }
        if let Some(g) = self.group_mut(group) {
            for (id, _) in entries.iter().filter(|(_, e)| e.is_some()) {
                g.redeliver(*id, now_ms);
            }
        }
        Some(History { created, entries })
    }
}

impl Stream {
    /// The metadata snapshot lag computations need.
    pub fn counters(&self) -> StreamCounters {
        StreamCounters {
            length: self.length,
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
        }
    }

    /// The groups, by name.
    pub fn groups(&self) -> &BTreeMap<Bytes, ConsumerGroup> {
        &self.groups
    }

    /// Mutable group map (XGROUP CREATE/DESTROY).
    pub fn groups_mut(&mut self) -> &mut BTreeMap<Bytes, ConsumerGroup> {
        &mut self.groups
    }

    /// The group `name`.
    pub fn group(&self, name: &[u8]) -> Option<&ConsumerGroup> {
        self.groups.get(name)
    }

    /// The group `name`, mutable.
    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut ConsumerGroup> {
        self.groups.get_mut(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{IdSpec, NodeLimits, TrimSpec, TrimStrategy};

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    fn stream_with(n: u64) -> Stream {
        let mut s = Stream::new();
        for i in 1..=n {
            s.append(
                IdSpec::Explicit(id(i, 0)),
                &[(Bytes::from_static(b"f"), Bytes::from_static(b"v"))],
                0,
                NodeLimits::default(),
            )
            .unwrap();
        }
        s
    }

    /// Simulates a `>` read of `count` entries by `c`.
    fn read_new(s: &mut Stream, g: &str, c: &str, count: usize, now: u64) -> Vec<StreamId> {
        let counters = s.counters();
        let start = s.group(g.as_bytes()).unwrap().last_id.next().unwrap();
        let ids: Vec<StreamId> = s
            .iter_range(start, StreamId::MAX, false)
            .take(count)
            .map(|e| e.id)
            .collect();
        let group = s.group_mut(g.as_bytes()).unwrap();
        let (cid, _) = group.get_or_create_consumer(&Bytes::copy_from_slice(c.as_bytes()), now);
        for &i in &ids {
            group.deliver(i, cid, now);
            group.advance_last_delivered(i, &counters);
        }
        ids
    }

    fn add_group(s: &mut Stream, name: &str, last: StreamId, read: Option<u64>) {
        s.groups_mut().insert(
            Bytes::copy_from_slice(name.as_bytes()),
            ConsumerGroup::new(last, read),
        );
    }

    fn lag(s: &Stream, g: &str) -> Option<u64> {
        s.group(g.as_bytes()).unwrap().lag(&s.counters())
    }

    #[test]
    fn lag_of_empty_never_used_stream_is_zero() {
        let mut s = Stream::new();
        add_group(&mut s, "g", StreamId::MIN, None);
        assert_eq!(lag(&s, "g"), Some(0));
    }

    #[test]
    fn lag_counts_down_as_group_reads() {
        let mut s = stream_with(5);
        add_group(&mut s, "g", StreamId::MIN, Some(0));
        assert_eq!(lag(&s, "g"), Some(5));
        assert_eq!(read_new(&mut s, "g", "c", 2, 10), vec![id(1, 0), id(2, 0)]);
        assert_eq!(s.group(b"g").unwrap().entries_read, Some(2));
        assert_eq!(lag(&s, "g"), Some(3));
        read_new(&mut s, "g", "c", 10, 10);
        assert_eq!(lag(&s, "g"), Some(0));
        assert_eq!(s.group(b"g").unwrap().entries_read, Some(5));
    }

    #[test]
    fn unknown_counter_at_zero_is_estimated() {
        // XGROUP CREATE s g 0 without ENTRIESREAD: entries_read unknown,
        // estimate says 0 entries before the first entry.
        let mut s = stream_with(3);
        add_group(&mut s, "g", StreamId::MIN, None);
        assert_eq!(lag(&s, "g"), Some(3));
        read_new(&mut s, "g", "c", 1, 0);
        // First entry read: estimate == exact counter of the first entry.
        assert_eq!(s.group(b"g").unwrap().entries_read, Some(1));
        assert_eq!(lag(&s, "g"), Some(2));
    }

    #[test]
    fn tombstone_ahead_makes_lag_null() {
        let mut s = stream_with(5);
        add_group(&mut s, "g", StreamId::MIN, Some(0));
        read_new(&mut s, "g", "c", 1, 0);
        assert!(s.delete(id(3, 0)));
        // A tombstone after last_id: the counter cannot tell how much is left.
        assert_eq!(lag(&s, "g"), None);
        // Reading past the tombstone makes it exact again.
        read_new(&mut s, "g", "c", 10, 0);
        assert_eq!(s.group(b"g").unwrap().last_id, id(5, 0));
        assert_eq!(lag(&s, "g"), Some(0));
        assert_eq!(s.group(b"g").unwrap().entries_read, Some(5));
    }

    #[test]
    fn tombstone_behind_keeps_lag() {
        let mut s = stream_with(5);
        add_group(&mut s, "g", StreamId::MIN, Some(0));
        read_new(&mut s, "g", "c", 3, 0);
        assert!(s.delete(id(2, 0)));
        assert_eq!(lag(&s, "g"), Some(2));
    }

    #[test]
    fn setid_to_last_id_estimates_exactly() {
        let mut s = stream_with(4);
        add_group(&mut s, "g", id(4, 0), None);
        assert_eq!(lag(&s, "g"), Some(0));
        s.group_mut(b"g").unwrap().set_last_id(id(2, 0), None, 4);
        // Middle ID without counter: unknown.
        assert_eq!(lag(&s, "g"), None);
    }

    #[test]
    fn trimmed_head_estimates_from_entries_added() {
        let mut s = stream_with(6);
        s.trim(
            TrimSpec {
                strategy: TrimStrategy::MaxLen(2),
                approx: false,
                limit: None,
                refs: Default::default(),
            },
            NodeLimits::default(),
        );
        add_group(&mut s, "g", StreamId::MIN, None);
        // 0-0 is before the first live entry: 4 entries gone before it.
        assert_eq!(lag(&s, "g"), Some(2));
        let c = s.counters();
        assert_eq!(c.estimate_distance_from_first_ever_entry(id(5, 0)), Some(5));
        assert_eq!(c.estimate_distance_from_first_ever_entry(id(7, 0)), None);
    }

    #[test]
    fn emptied_stream_estimates_entries_added() {
        let mut s = stream_with(2);
        s.delete(id(1, 0));
        s.delete(id(2, 0));
        let c = s.counters();
        assert!(!c.range_has_tombstones(StreamId::MIN, StreamId::MAX));
        assert_eq!(
            c.estimate_distance_from_first_ever_entry(StreamId::MIN),
            Some(2)
        );
    }

    #[test]
    fn first_entry_after_deleted_head_is_counted_exactly() {
        // Two entries added and deleted, two more added: the group created
        // before them reads the first live entry, whose counter is 3.
        let mut s = Stream::new();
        add_group(&mut s, "g", StreamId::MIN, None);
        for i in 1..=4 {
            s.append(
                IdSpec::Explicit(id(i, 0)),
                &[(Bytes::from_static(b"f"), Bytes::from_static(b"v"))],
                0,
                NodeLimits::default(),
            )
            .unwrap();
            if i == 2 {
                assert!(s.delete(id(1, 0)) && s.delete(id(2, 0)));
            }
        }
        read_new(&mut s, "g", "c", 1, 0);
        assert_eq!(s.group(b"g").unwrap().entries_read, Some(3));
        assert_eq!(lag(&s, "g"), Some(1));
    }

    #[test]
    fn entries_read_is_clamped_to_entries_added() {
        let mut g = ConsumerGroup::new(StreamId::MIN, None);
        g.set_last_id(id(1, 0), Some(7), 3);
        assert_eq!(g.entries_read, Some(3));
        g.set_last_id(id(1, 0), Some(2), 3);
        assert_eq!(g.entries_read, Some(2));
        g.set_last_id(id(1, 0), None, 3);
        assert_eq!(g.entries_read, None);
    }

    #[test]
    fn group_behind_first_entry_re_estimates() {
        // Known counter 1 at 1-0, then the head is trimmed past the group:
        // the next read re-estimates instead of counting on.
        let mut s = stream_with(6);
        add_group(&mut s, "g", StreamId::MIN, Some(0));
        read_new(&mut s, "g", "c", 1, 0);
        s.trim(
            TrimSpec {
                strategy: TrimStrategy::MaxLen(2),
                approx: false,
                limit: None,
                refs: Default::default(),
            },
            NodeLimits::default(),
        );
        assert_eq!(lag(&s, "g"), Some(2));
        read_new(&mut s, "g", "c", 1, 0);
        assert_eq!(s.group(b"g").unwrap().entries_read, Some(5));
        assert_eq!(lag(&s, "g"), Some(1));
    }

    #[test]
    fn deliver_new_and_read_history() {
        let mut s = stream_with(4);
        add_group(&mut s, "g", StreamId::MIN, Some(0));
        let c = Bytes::from_static(b"c");
        // The budget refuses the third entry: two are delivered.
        let mut n = 0;
        let d = s
            .deliver_new(b"g", &c, 10, false, 5, |_| {
                n += 1;
                n <= 2
            })
            .unwrap();
        assert!(d.created);
        assert_eq!(d.ids, vec![id(1, 0), id(2, 0)]);
        let g = s.group(b"g").unwrap();
        assert_eq!(
            (g.last_id, g.entries_read, g.pel().len()),
            (id(2, 0), Some(2), 2)
        );
        // NOACK: delivered, not pending, consumer not made active again.
        let d = s.deliver_new(b"g", &c, 1, true, 9, |_| true).unwrap();
        assert_eq!(d.ids.len(), 1);
        assert_eq!(s.group(b"g").unwrap().pel().len(), 2);
        assert!(s.deliver_new(b"nog", &c, 1, false, 9, |_| true).is_none());
        // History: a deleted entry comes back as None and is not redelivered.
        assert!(s.delete(id(1, 0)));
        let h = s
            .read_history(b"g", &c, StreamId::MIN, 10, 20, |_, _| true)
            .unwrap();
        assert!(!h.created);
        assert_eq!(h.entries.len(), 2);
        assert!(h.entries[0].1.is_none() && h.entries[1].1.is_some());
        let g = s.group(b"g").unwrap();
        assert_eq!(g.pending(id(1, 0)).map(|p| p.delivery_count), Some(1));
        assert_eq!(g.pending(id(2, 0)).map(|p| p.delivery_count), Some(2));
    }

    #[test]
    fn a_new_consumer_keeps_a_copy_of_its_name_not_the_callers_buffer() {
        // An argument as the decoder hands it over: a slice of a larger buffer.
        let read_buffer = Bytes::from(vec![b'c'; 16 << 10]);
        let arg = read_buffer.slice(0..5);
        let mut g = ConsumerGroup::new(StreamId::MIN, Some(0));
        let (c, created) = g.get_or_create_consumer(&arg, 1);
        assert!(created);
        let stored = g.consumer_name(c);
        assert_eq!(stored, arg);
        let inside = read_buffer.as_ptr_range();
        assert!(
            !inside.contains(&stored.as_ptr()),
            "the name points into the read buffer"
        );
        assert_eq!(g.consumer_id(&arg), Some(c));
    }

    #[test]
    fn deliver_ack_and_reassign_keep_both_pels_in_step() {
        let mut g = ConsumerGroup::new(StreamId::MIN, Some(0));
        let (a, created) = g.get_or_create_consumer(&Bytes::from_static(b"a"), 1);
        assert!(created);
        let (b, _) = g.get_or_create_consumer(&Bytes::from_static(b"b"), 1);
        g.deliver(id(1, 0), a, 5);
        g.deliver(id(2, 0), a, 5);
        g.redeliver(id(1, 0), 9);
        assert_eq!(
            g.pending(id(1, 0)),
            Some(&PendingEntry {
                delivery_time_ms: 9,
                delivery_count: 2,
                consumer: a
            })
        );
        // Re-delivery with `>` after SETID back: moves to b, count reset.
        g.deliver(id(1, 0), b, 11);
        assert_eq!({ g.pending(id(1, 0)).unwrap().delivery_count }, 1);
        assert_eq!(g.consumer(a).unwrap().pel.len(), 1);
        assert_eq!(g.consumer(b).unwrap().pel.len(), 1);
        g.claim(id(2, 0), b, 20, 7);
        assert!(g.consumer(a).unwrap().pel.is_empty());
        assert_eq!(g.consumer_pel_from(b, StreamId::MIN).count(), 2);
        assert!(g.ack(id(2, 0)));
        assert!(!g.ack(id(2, 0)));
        assert_eq!(g.delete_consumer(b"b"), Some(1));
        assert!(g.pel().is_empty());
        assert_eq!(g.delete_consumer(b"b"), None);
        // The freed slot is reused; names stay ordered.
        let (c, _) = g.get_or_create_consumer(&Bytes::from_static(b"0c"), 1);
        assert_eq!(c, b);
        let names: Vec<_> = g.consumers().map(|c| c.name.clone()).collect();
        assert_eq!(
            names,
            vec![Bytes::from_static(b"0c"), Bytes::from_static(b"a")]
        );
    }

    #[test]
    fn nack_unowns_and_force_creates() {
        let mut g = ConsumerGroup::new(StreamId::MIN, Some(0));
        let (a, _) = g.get_or_create_consumer(&Bytes::from_static(b"a"), 1);
        g.deliver(id(1, 0), a, 5);
        g.redeliver(id(1, 0), 6);
        assert!(g.nack(id(1, 0), false, |n| n - 1));
        let p = *g.pending(id(1, 0)).unwrap();
        assert_eq!(p.owner(), None);
        assert_eq!({ p.delivery_time_ms }, 0);
        assert_eq!({ p.delivery_count }, 1);
        assert_eq!(p.idle_ms(1_000), u64::MAX);
        assert!(g.consumer(a).unwrap().pel.is_empty());
        assert_eq!(g.consumer_name(p.consumer), Bytes::new());
        // Not pending: skipped unless forced.
        assert!(!g.nack(id(2, 0), false, |_| 9));
        assert!(g.pending(id(2, 0)).is_none());
        assert!(g.nack(id(2, 0), true, |_| 9));
        assert_eq!({ g.pending(id(2, 0)).unwrap().delivery_count }, 9);
        // Claiming gives it an owner again; deleting that consumer drops it.
        g.claim(id(2, 0), a, 7, 10);
        assert_eq!(g.consumer_pel_from(a, StreamId::MIN).count(), 1);
        assert_eq!(g.delete_consumer(b"a"), Some(1));
        assert_eq!(g.pel().len(), 1);
        assert!(g.ack(id(1, 0)));
    }

    #[test]
    fn pending_entry_is_compact() {
        assert!(std::mem::size_of::<PendingEntry>() <= 20);
    }
}
