//! Routing: hash slots and shards ([`slot`]), and where each command runs and
//! how split replies merge ([`router`]), and atomic work over several
//! shards ([`held`]), and commands on a slot being migrated ([`transit`]).
pub mod held;
pub mod router;
pub mod slot;
pub mod transit;
