//! shardstream: a Redis-compatible server for Redis Streams.
pub mod error;
pub mod stream;
