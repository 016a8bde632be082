//! shardstream: a Redis-compatible server for Redis Streams, built as a
//! shared-nothing sharded engine.
//!
//! # Layout
//! * [`shard`]: shard threads — one event loop per core that owns its
//!   connections and its data ([`shard::db::ShardDb`]); what crosses between
//!   them ([`shard::msg`]); blocked readers ([`shard::blocking`]).
//! * [`io`]: connections: RESP decoding ([`io::codec`]), Redis's
//!   pre-execution checks ([`io::gates`]), the in-order reply queue
//!   ([`io::conn`]), the acceptor ([`io::acceptor`]).
//! * [`route`]: hash slots and shards ([`route::slot`]); where a command runs
//!   and how split replies merge ([`route::router`]).
//! * [`cmd`]: the command table ([`cmd::table`]) and one file per command family.
//! * [`stream`]: the stream data structure, pure data; [`list`] and [`set`]:
//!   the list and set values; [`delayed`]: entries waiting for their due
//!   time (XSCHEDULE), delivered on the shard's timer ([`shard::delayed`]).
//! * [`aof`]: per-shard append-only files (effects, group commit, rewrite, load).
//! * [`script`]: Lua scripting: the server-wide registry of scripts and
//!   function libraries, and each shard thread's sandboxed Lua 5.1 state.
//! * [`server`]: spawning threads, shared state; [`config`]: settings.
//! * [`cluster`]: Redis Cluster: the slot map, nodes.conf, the cluster bus.
//! * [`migrate`]: MIGRATE's outgoing connections to target instances,
//!   cached per shard.
//!
//! # Threads
//! One shard thread per core (`--shards`), each a Redis-like event loop over
//! the connections the acceptor hands it, plus the acceptor, which sleeps
//! between connections, and in cluster mode the cluster bus thread
//! ([`cluster::bus`]). A shard thread runs the commands on keys it owns
//! inline and sends the others to their owner, one batch per destination per
//! loop iteration.
//!
//! # Life of a command
//! On the connection's shard thread: `io::codec` decodes → `io::gates::admit`
//! (table lookup, arity, NOAUTH, redirection, MISCONF, OOM, MULTI) →
//! `route::router::route` (the family's `parse_*`, then `slot_of(key)` → shard)
//! → this iteration's batch for that shard: run inline when the shard is this
//! thread's own, else `ShardMsg::Batch` to its owner → `apply_*` on the owner's
//! `ShardDb` → AOF group commit → replies released (`ShardMsg::Replies` back
//! to the connection's thread when it hopped) → written in request order.

pub mod alloc_stats;
pub mod aof;
pub mod cluster;
pub mod cmd;
pub mod cmdline;
pub mod config;
pub mod config_rewrite;
pub mod ctype;
pub mod delayed;
pub mod error;
pub mod io;
pub mod ldouble;
pub mod list;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod migrate;
pub mod monitor;
pub mod nofile;
pub mod rdb;
pub mod reply;
pub mod route;
pub mod script;
pub mod server;
pub mod set;
pub mod shard;
pub mod slowlog;
pub mod stream;
pub mod zset;

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
