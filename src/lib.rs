//! shardstream: a Redis-compatible server for Redis Streams, built as a
//! shared-nothing sharded engine.
//!
//! # Layout
//! * [`io`]: IO threads (mio): sockets, RESP decoding ([`io::codec`]), routing, in-order replies.
//! * [`route`]: hash slots and shards ([`route::slot`]).
//! * [`cmd`]: the command table ([`cmd::table`]) and one file per command family.
//! * [`shard`]: shard threads and their data ([`shard::db::ShardDb`]).
//! * [`stream`]: the stream data structure, pure data.
//! * [`aof`]: per-shard append-only files (effects, group commit, rewrite, load).
//! * [`server`]: spawning threads, shared state; [`config`]: settings.
//! * [`cluster`]: the static multi-node topology (which node serves which slots).
//!
//! # Life of a command
//! `io::codec` decodes → `cmd::table::lookup` + arity → the family's `parse_*`
//! → `slot_of(key)` → `ShardMsg::Batch` → `apply_*` on the shard's `ShardDb`
//! → `IoMsg::Replies` + `Waker::wake` → the connection writes replies in request order.

pub mod aof;
pub mod cluster;
pub mod cmd;
pub mod cmdline;
pub mod config;
pub mod error;
pub mod io;
pub mod listener;
pub mod logging;
pub mod reply;
pub mod route;
pub mod server;
pub mod shard;
pub mod stream;

/// jemalloc is the global allocator of every program linking this library
/// (default feature `jemalloc`), so INFO's `used_memory` is jemalloc's
/// allocated-bytes count in the server binary and in tests alike.
/// Bytes the allocator really reserves for a request of `requested` bytes
/// (jemalloc rounds up to its size classes), so MEMORY USAGE matches INFO
/// `used_memory`. Without jemalloc, `requested` itself.
pub fn allocation_bytes(requested: usize) -> usize {
    #[cfg(feature = "jemalloc")]
    {
        if requested == 0 {
            return 0;
        }
        // SAFETY: nallocx only computes a size class; it touches no memory.
        let real = unsafe { tikv_jemalloc_sys::nallocx(requested, 0) };
        if real > 0 {
            return real;
        }
    }
    requested
}

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
