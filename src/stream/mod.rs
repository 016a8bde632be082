//! Streams: pure data.
