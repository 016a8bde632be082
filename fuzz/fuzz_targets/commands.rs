//! Fuzz target `commands`: every command's argument parser and shard code,
//! fed arbitrary argv.
//!
//! Input: lines separated by `\n`; each line is one command. Its first byte
//! picks a command (or subcommand) name from the table, the rest is split on
//! spaces into arguments. All lines run in order on one fresh `ShardDb`
//! (clock advancing 1 ms per command), so later commands see the state
//! earlier ones built. After each command the streams named in its argv must
//! satisfy `Stream::check_invariants`.
#![no_main]

mod common;

use std::sync::OnceLock;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use shardstream::route::slot::ShardId;
use shardstream::shard::db::ShardDb;

fn names() -> &'static [Vec<&'static str>] {
    static NAMES: OnceLock<Vec<Vec<&'static str>>> = OnceLock::new();
    NAMES.get_or_init(common::command_names)
}

fuzz_target!(|data: &[u8]| {
    let mut db = ShardDb::new(ShardId(0), 1, 16);
    let mut now = 1_700_000_000_000u64;
    for line in data.split(|&b| b == b'\n').take(64) {
        let Some((&pick, rest)) = line.split_first() else {
            continue;
        };
        let name = &names()[usize::from(pick) % names().len()];
        let mut argv: Vec<Bytes> = name
            .iter()
            .map(|n| Bytes::from_static(n.as_bytes()))
            .collect();
        argv.extend(
            rest.split(|&b| b == b' ')
                .map(Bytes::copy_from_slice)
                .take(64),
        );
        now += 1;
        if common::run(&mut db, now, &argv).is_none() {
            continue;
        }
        for key in argv.iter().skip(1) {
            if let Ok(Some(s)) = db.get_stream(0, key, now) {
                if let Err(e) = s.check_invariants() {
                    panic!("after {argv:?}: key {key:?}: {e}");
                }
            }
        }
    }
});
