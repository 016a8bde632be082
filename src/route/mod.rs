//! Routing: hash slots, shards, and the IO → shard fan-out/fan-in plumbing.
pub mod slot;
