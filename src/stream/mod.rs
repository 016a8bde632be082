//! Streams: pure data.
pub mod id;
