//! Micro-bench of the consumer-group hot path (harness = false): XREADGROUP
//! `>` deliveries (`Stream::deliver_new`) and XACKs of every delivered entry,
//! on pure data. Meant for instruction counts, which are repeatable on a
//! noisy machine:
//!
//! ```sh
//! cargo bench --bench group_deliver_ack --no-run
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/deps/group_deliver_ack-* 200000
//! callgrind_annotate /tmp/cg.out | head -30
//! ```
//!
//! Argument: entries (default 1 000 000). Prints deliveries and acks per second.

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use shardstream::stream::group::ConsumerGroup;
use shardstream::stream::{IdSpec, NodeLimits, Stream, StreamId};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let limits = NodeLimits::default();
    let mut s = Stream::new();
    let base_ms = 1_700_000_000_000u64;
    for i in 0..n {
        let fields = [(Bytes::from_static(b"p"), Bytes::from_static(b"payload"))];
        s.append(
            IdSpec::Explicit(StreamId::new(base_ms + i / 10, i % 10 + 1)),
            &fields,
            0,
            limits,
        )
        .expect("append");
    }
    s.groups_mut().insert(
        Bytes::from_static(b"g"),
        ConsumerGroup::new(StreamId::MIN, Some(0)),
    );
    let consumer = Bytes::from_static(b"c");
    let t = Instant::now();
    let mut delivered = 0u64;
    let mut acked = 0u64;
    let mut now_ms = base_ms;
    loop {
        now_ms += 1;
        // Each delivered entry's fields are read, as a reply writes them.
        let mut field_bytes = 0usize;
        let read = |e: &shardstream::stream::EntryView<'_>| {
            field_bytes += e.fields().map(|(f, v)| f.len() + v.len()).sum::<usize>();
            true
        };
        let Some(d) = s.deliver_new(b"g", &consumer, 10, false, now_ms, read) else {
            break;
        };
        black_box(field_bytes);
        if d.ids.is_empty() {
            break;
        }
        delivered += d.ids.len() as u64;
        let g = s.group_mut(b"g").expect("group");
        for &id in &d.ids {
            acked += u64::from(ack(g, id, now_ms + 2));
        }
        black_box(&d);
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "delivered {delivered} acked {acked} in {secs:.3} s: {:.2} M entries/s (deliver + ack)",
        delivered as f64 / secs / 1e6
    );
}

/// XACK of one entry as `apply_xack` does it.
fn ack(g: &mut ConsumerGroup, id: StreamId, now_ms: u64) -> bool {
    g.ack_recording(id, now_ms)
}
