//! Fuzz target `codec`: the RESP2/RESP3/inline request decoder.
//!
//! Feeds arbitrary bytes to `io::codec::decode` in a loop, as a connection's
//! read buffer would be fed (with small, default and unauthenticated limits,
//! and split at an arbitrary point to exercise partial frames), plus the
//! inline splitter `split_args`. Checks that decoding never panics, always
//! makes progress or asks for more bytes than it has, and never consumes more
//! than it was given.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use shardstream::io::codec::{self, DecodeLimits, Decoded};

fn drive(data: &[u8], limits: DecodeLimits, split: usize) {
    let split = split.min(data.len());
    let mut buf = BytesMut::from(&data[..split]);
    let mut rest = &data[split..];
    // Bounded: every command consumes at least one byte, so at most len+2 rounds.
    for _ in 0..data.len() + 2 {
        let before = buf.len();
        match codec::decode(&mut buf, limits) {
            Ok(Decoded::Command(argv)) => {
                assert!(buf.len() < before, "a command consumed no bytes");
                let _ = argv;
            }
            Ok(Decoded::Incomplete { min_total }) => {
                assert_eq!(buf.len(), before, "an incomplete frame consumed bytes");
                assert!(min_total > before, "incomplete but asks for no more bytes");
                if rest.is_empty() {
                    return;
                }
                buf.extend_from_slice(rest);
                rest = &[];
            }
            Err(_) => return,
        }
        if buf.is_empty() && rest.is_empty() {
            return;
        }
    }
    panic!("decode loop did not terminate");
}

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |&b| b as usize);
    let small = DecodeLimits {
        max_bulk_bytes: 16,
        max_multibulk: 8,
        unauthenticated: false,
    };
    let default = DecodeLimits {
        max_bulk_bytes: 512 * 1024 * 1024,
        max_multibulk: codec::MULTIBULK_MAX,
        unauthenticated: false,
    };
    let unauth = DecodeLimits {
        unauthenticated: true,
        ..default
    };
    drive(data, small, usize::MAX);
    drive(data, default, usize::MAX);
    drive(data, unauth, split);
    drive(data, default, split);
    let _ = codec::split_args(data);
});
