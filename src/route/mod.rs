//! Routing: hash slots and shards ([`slot`]), and where each command runs and
//! how split replies merge ([`router`]).
pub mod router;
pub mod slot;
