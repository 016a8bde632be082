//! One packed node of a stream: up to `max_entries` entries in one `Vec<u8>`.
//!
//! Layout (all integers are LEB128 varints unless said otherwise):
//!
//! ```text
//! header:  master_field_count  { field_len field_bytes } * master_field_count
//! entry:   flags:u8  ms_delta  seq  [body]  backlen
//!   flags    bit 0 = DELETED (tombstone, XDEL/XTRIM), bit 1 = SAMEFIELDS
//!   ms_delta id.ms - master.ms
//!   seq      id.seq - master.seq when ms_delta == 0, else id.seq itself
//!   body     SAMEFIELDS: { value_len value } per master field
//!            otherwise:  count { field_len field value_len value } * count
//!   backlen  byte length of the entry up to here, as a varint written
//!            back to front, so a reverse walk can find the entry start
//! ```
//!
//! The master is the first entry ever added to the node: its ID is the node's
//! key in the stream's `BTreeMap`, and its field names are the template that
//! later entries with the same names reuse (they store values only).
//!
//! # Source
//! The listpack node layout described at the top of redis/src/t_stream.c
//! (master entry, `STREAM_ITEM_FLAG_DELETED`, `STREAM_ITEM_FLAG_SAMEFIELDS`,
//! lp-count back pointer), re-expressed with varints.

use bytes::Bytes;

use super::StreamId;

const FLAG_DELETED: u8 = 1;
const FLAG_SAMEFIELDS: u8 = 2;

/// A packed run of entries whose first-ever entry has ID `master_id`.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    buf: Vec<u8>,
    master_id: StreamId,
    /// ID of the physically last entry (live or tombstone); never below any live ID.
    last_id: StreamId,
    master_field_count: usize,
    /// Offset of the first entry (end of the header).
    entries_start: usize,
    live: usize,
    deleted: usize,
}

/// Where an entry sits in its node, and its decoded prefix.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryRef {
    /// Offset of the flags byte.
    pub start: usize,
    /// Offset just past the entry's back-length.
    pub end: usize,
    pub id: StreamId,
    pub deleted: bool,
    same_fields: bool,
    body: usize,
}

/// The field/value pairs of one entry, borrowed from its node
/// ([`Node::field_slices`]).
pub(crate) struct FieldSlices<'a> {
    buf: &'a [u8],
    /// SAMEFIELDS: where the next name sits in the master's header;
    /// otherwise names are inline, before each value.
    names: Option<usize>,
    /// Where the next stored field (or value) starts.
    pos: usize,
    /// Pairs not yet yielded.
    left: usize,
}

impl<'a> Iterator for FieldSlices<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let name = match &mut self.names {
            Some(m) => {
                let (f, next) = get_bytes(self.buf, *m);
                *m = next;
                f
            }
            None => {
                let (f, next) = get_bytes(self.buf, self.pos);
                self.pos = next;
                f
            }
        };
        let (v, next) = get_bytes(self.buf, self.pos);
        self.pos = next;
        Some((name, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for FieldSlices<'_> {}

impl Node {
    /// A node whose master is `(id, fields)`; the entry itself is added too.
    pub fn new(id: StreamId, fields: &[(Bytes, Bytes)]) -> Node {
        let header_bytes: usize = fields.iter().map(|(f, _)| f.len() + 2).sum::<usize>() + 2;
        let mut buf = Vec::with_capacity(header_bytes + entry_upper_bound(fields, true));
        put_varint(&mut buf, fields.len() as u64);
        for (f, _) in fields {
            put_varint(&mut buf, f.len() as u64);
            buf.extend_from_slice(f);
        }
        let entries_start = buf.len();
        let mut node = Node {
            buf,
            master_id: id,
            last_id: id,
            master_field_count: fields.len(),
            entries_start,
            live: 0,
            deleted: 0,
        };
        node.push(id, fields);
        node
    }

    /// Live (not deleted) entries.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Live plus tombstoned entries: what the entry cap counts, as in Redis.
    pub fn total_entries(&self) -> usize {
        self.live + self.deleted
    }

    /// Encoded size in bytes (what the byte cap counts).
    pub fn len_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Heap bytes owned by this node (the allocator's size class of its buffer).
    pub fn capacity_bytes(&self) -> usize {
        crate::allocation_bytes(self.buf.capacity())
    }

    /// ID of the physically last entry, live or not.
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// Gives back spare capacity; called when the node stops being the tail.
    pub fn shrink(&mut self) {
        self.buf.shrink_to_fit();
    }

    /// Appends `(id, fields)`; `id` must exceed every live ID in the node.
    pub fn push(&mut self, id: StreamId, fields: &[(Bytes, Bytes)]) {
        let same = self.same_as_master(fields);
        let start = self.buf.len();
        self.buf.reserve(entry_upper_bound(fields, same));
        self.buf.push(if same { FLAG_SAMEFIELDS } else { 0 });
        let ms_delta = id.ms - self.master_id.ms;
        put_varint(&mut self.buf, ms_delta);
        put_varint(
            &mut self.buf,
            if ms_delta == 0 {
                id.seq - self.master_id.seq
            } else {
                id.seq
            },
        );
        if same {
            for (_, v) in fields {
                put_bytes(&mut self.buf, v);
            }
        } else {
            put_varint(&mut self.buf, fields.len() as u64);
            for (f, v) in fields {
                put_bytes(&mut self.buf, f);
                put_bytes(&mut self.buf, v);
            }
        }
        let entry_len = (self.buf.len() - start) as u64;
        put_varint_reversed(&mut self.buf, entry_len);
        self.live += 1;
        self.last_id = id;
    }

    fn same_as_master(&self, fields: &[(Bytes, Bytes)]) -> bool {
        if fields.len() != self.master_field_count {
            return false;
        }
        let mut pos = varint_len_at(&self.buf, 0);
        for (f, _) in fields {
            let (name, next) = get_bytes(&self.buf, pos);
            if name != &f[..] {
                return false;
            }
            pos = next;
        }
        true
    }

    /// The entry starting at `start` (an offset from `first_pos` or a previous `end`).
    pub fn entry_at(&self, start: usize) -> EntryRef {
        let flags = self.buf[start];
        let (ms_delta, p) = get_varint(&self.buf, start + 1);
        let (seq_raw, body) = get_varint(&self.buf, p);
        let id = if ms_delta == 0 {
            StreamId::new(self.master_id.ms, self.master_id.seq + seq_raw)
        } else {
            StreamId::new(self.master_id.ms + ms_delta, seq_raw)
        };
        let same_fields = flags & FLAG_SAMEFIELDS != 0;
        let mut p = body;
        let pairs = if same_fields {
            for _ in 0..self.master_field_count {
                p = skip_bytes(&self.buf, p);
            }
            0
        } else {
            let (n, q) = get_varint(&self.buf, p);
            p = q;
            n
        };
        for _ in 0..pairs * 2 {
            p = skip_bytes(&self.buf, p);
        }
        let end = p + varint_len((p - start) as u64);
        EntryRef {
            start,
            end,
            id,
            deleted: flags & FLAG_DELETED != 0,
            same_fields,
            body,
        }
    }

    /// The entry ending at `end` (exclusive); walks backwards via the back-length.
    pub fn entry_before(&self, end: usize) -> EntryRef {
        let (len, size) = get_varint_reversed(&self.buf, end);
        self.entry_at(end - size - len as usize)
    }

    /// Where a forward walk looking for entries with IDs `>= start` may
    /// begin: an entry start before which no live entry is `>= start`.
    ///
    /// A node holds no index, so finding `start` means walking entries.
    /// This walks back from the end when `start` lies nearer the node's
    /// last ID than its master ID (by ID distance, as IDs mostly follow
    /// time): a consumer reading the stream's tail then steps over the few
    /// newest entries instead of the whole node.
    pub fn seek(&self, start: StreamId) -> usize {
        let key = |id: StreamId| (u128::from(id.ms) << 64) | u128::from(id.seq);
        let (s, first, last) = (key(start), key(self.master_id), key(self.last_id));
        if s <= first || s - first <= last.saturating_sub(s) {
            return self.first_pos();
        }
        // The walk stops at the first entry below `start`: every live entry
        // before it was added before it, so has a lower ID. (IDs need not
        // grow along the node: XSETID can lower last_id below a tombstone,
        // and later entries then sit after it with lower IDs.)
        let mut pos = self.end_pos();
        while pos > self.first_pos() {
            let e = self.entry_before(pos);
            if e.id < start {
                break;
            }
            pos = e.start;
        }
        pos
    }

    /// Offset of the first entry; entries run up to [`Node::end_pos`].
    pub fn first_pos(&self) -> usize {
        self.entries_start
    }

    /// Offset just past the last entry.
    pub fn end_pos(&self) -> usize {
        self.buf.len()
    }

    /// Copies out the field/value pairs of `e`.
    pub fn fields(&self, e: &EntryRef) -> Vec<(Bytes, Bytes)> {
        self.field_slices(e)
            .map(|(f, v)| (Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)))
            .collect()
    }

    /// The field/value pairs of `e` as slices of the node, in order, with no
    /// copy: a SAMEFIELDS entry takes its names from the master.
    pub fn field_slices(&self, e: &EntryRef) -> FieldSlices<'_> {
        if e.same_fields {
            FieldSlices {
                buf: &self.buf,
                names: Some(varint_len_at(&self.buf, 0)),
                pos: e.body,
                left: self.master_field_count,
            }
        } else {
            let (n, pos) = get_varint(&self.buf, e.body);
            FieldSlices {
                buf: &self.buf,
                names: None,
                pos,
                left: n as usize,
            }
        }
    }

    /// Tombstones the live entry at `e.start`.
    pub fn mark_deleted(&mut self, e: &EntryRef) {
        debug_assert!(!e.deleted);
        self.buf[e.start] |= FLAG_DELETED;
        self.live -= 1;
        self.deleted += 1;
    }

    /// Finds the live entry `id`, if present.
    pub fn find_live(&self, id: StreamId) -> Option<EntryRef> {
        let mut pos = self.first_pos();
        while pos < self.end_pos() {
            let e = self.entry_at(pos);
            if !e.deleted {
                if e.id == id {
                    return Some(e);
                }
                if e.id > id {
                    return None;
                }
            }
            pos = e.end;
        }
        None
    }

    /// The first live entry, if any.
    pub fn first_live(&self) -> Option<EntryRef> {
        let mut pos = self.first_pos();
        while pos < self.end_pos() {
            let e = self.entry_at(pos);
            if !e.deleted {
                return Some(e);
            }
            pos = e.end;
        }
        None
    }

    /// The last live entry, if any.
    pub fn last_live(&self) -> Option<EntryRef> {
        let mut end = self.end_pos();
        while end > self.first_pos() {
            let e = self.entry_before(end);
            if !e.deleted {
                return Some(e);
            }
            end = e.start;
        }
        None
    }
}

/// Bytes an entry can take at most (varints counted at their widest).
fn entry_upper_bound(fields: &[(Bytes, Bytes)], same: bool) -> usize {
    let data: usize = fields
        .iter()
        .map(|(f, v)| v.len() + 10 + if same { 0 } else { f.len() + 10 })
        .sum();
    1 + 10 + 10 + 10 + data + 10
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Writes the varint bytes in reverse order: the byte nearest the end holds
/// the low 7 bits, and a set high bit means "more bytes before me".
fn put_varint_reversed(buf: &mut Vec<u8>, v: u64) {
    let mut tmp = [0u8; 10];
    let mut n = 0;
    let mut v = v;
    while v >= 0x80 {
        tmp[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    tmp[n] = v as u8;
    n += 1;
    buf.extend(tmp[..n].iter().rev());
}

fn get_varint(buf: &[u8], mut pos: usize) -> (u64, usize) {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[pos];
        pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return (v, pos);
        }
        shift += 7;
    }
}

/// Reads a reversed varint ending at `end`; returns (value, size in bytes).
fn get_varint_reversed(buf: &[u8], end: usize) -> (u64, usize) {
    let mut v = 0u64;
    let mut shift = 0;
    let mut i = end;
    loop {
        i -= 1;
        let b = buf[i];
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return (v, end - i);
        }
        shift += 7;
    }
}

fn varint_len_at(buf: &[u8], pos: usize) -> usize {
    get_varint(buf, pos).1
}

fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    put_varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

fn get_bytes(buf: &[u8], pos: usize) -> (&[u8], usize) {
    let (len, p) = get_varint(buf, pos);
    let end = p + len as usize;
    (&buf[p..end], end)
}

fn skip_bytes(buf: &[u8], pos: usize) -> usize {
    let (len, p) = get_varint(buf, pos);
    p + len as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[(&str, &str)]) -> Vec<(Bytes, Bytes)> {
        pairs
            .iter()
            .map(|(f, v)| {
                (
                    Bytes::copy_from_slice(f.as_bytes()),
                    Bytes::copy_from_slice(v.as_bytes()),
                )
            })
            .collect()
    }

    #[test]
    fn reversed_varint_roundtrip() {
        for v in [0u64, 1, 127, 128, 300, 16383, 16384, u64::MAX] {
            let mut buf = vec![9u8; 3];
            put_varint_reversed(&mut buf, v);
            let (got, size) = get_varint_reversed(&buf, buf.len());
            assert_eq!((got, size), (v, varint_len(v)));
        }
    }

    #[test]
    fn walk_both_ways_with_mixed_fields() {
        let master = StreamId::new(10, u64::MAX - 1);
        let a = kv(&[("f", "1"), ("g", "2")]);
        let mut n = Node::new(master, &a);
        let ids = [
            StreamId::new(10, u64::MAX),
            StreamId::new(11, 0),
            StreamId::new(u64::MAX, u64::MAX),
        ];
        let bodies = [
            kv(&[("f", "x"), ("g", "")]),
            kv(&[("other", &"v".repeat(300))]),
            kv(&[]),
        ];
        for (id, f) in ids.iter().zip(&bodies) {
            n.push(*id, f);
        }
        let mut fwd = vec![];
        let mut pos = n.first_pos();
        while pos < n.end_pos() {
            let e = n.entry_at(pos);
            fwd.push((e.id, n.fields(&e)));
            pos = e.end;
        }
        let mut back = vec![];
        let mut end = n.end_pos();
        while end > n.first_pos() {
            let e = n.entry_before(end);
            back.push((e.id, n.fields(&e)));
            end = e.start;
        }
        back.reverse();
        assert_eq!(fwd, back);
        assert_eq!(fwd[0], (master, a));
        assert_eq!(fwd[3], (ids[2], vec![]));
        assert_eq!(fwd[2].1, bodies[1]);
        let e = n.find_live(ids[1]).unwrap();
        n.mark_deleted(&e);
        assert!(n.find_live(ids[1]).is_none());
        assert_eq!((n.live(), n.total_entries()), (3, 4));
        assert_eq!(n.last_live().unwrap().id, ids[2]);
    }
}
