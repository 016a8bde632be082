//! Stream IDs: `<ms>-<seq>`, both `u64`, ordered by `(ms, seq)`.
//!
//! Parsing follows Redis byte for byte, quirks included, because clients see
//! the difference: Redis copies the argument into a C buffer (so it stops at
//! the first NUL byte and rejects arguments longer than 127 bytes), splits at
//! the first `-`, and reads each half with `string2ull`, which first tries a
//! strict signed parse and then falls back to libc `strtoull` (so leading
//! whitespace, a `+` sign, leading zeros and even `-0` are accepted).
//!
//! # Source
//! `streamGenericParseIDOrReply`, `streamParseIntervalIdOrReply`,
//! `streamIncrID`/`streamDecrID`, redis/src/t_stream.c (7.x); `string2ull`.

use std::fmt;

use bytes::Bytes;

use crate::error::CmdError;

/// A stream entry ID. Ordering is `(ms, seq)`, which is the stream order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// Milliseconds part (by convention ms since the Unix epoch for auto IDs).
    pub ms: u64,
    /// Sequence number within `ms`.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`: the smallest ID (`-` in XRANGE). Never a valid entry ID.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// `18446744073709551615-18446744073709551615` (`+` in XRANGE).
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// `ms-seq`.
    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    /// The ID as a bulk-string payload (`ms-seq`).
    pub fn to_bytes(&self) -> Bytes {
        let mut ms = itoa::Buffer::new();
        let mut seq = itoa::Buffer::new();
        let (ms, seq) = (ms.format(self.ms), seq.format(self.seq));
        let mut out = Vec::with_capacity(ms.len() + 1 + seq.len());
        out.extend_from_slice(ms.as_bytes());
        out.push(b'-');
        out.extend_from_slice(seq.as_bytes());
        Bytes::from(out)
    }

    /// The smallest ID greater than `self`: `5-3` → `5-4`, `5-MAX` → `6-0`;
    /// `None` for [`StreamId::MAX`].
    ///
    /// # Source
    /// `streamIncrID` (which reports the MAX case as an error).
    pub fn next(&self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The greatest ID smaller than `self`: `6-0` → `5-MAX`; `None` for `0-0`.
    ///
    /// # Source
    /// `streamDecrID`.
    pub fn prev(&self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// The ID argument of XADD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdSpec {
    /// `*`: the server picks `now_ms-0`, or `last_id + 1` if the clock did not advance.
    Auto,
    /// `<ms>-*`: the server picks the sequence (`0`, or last seq + 1 within the same ms).
    AutoSeq {
        /// The requested milliseconds part.
        ms: u64,
    },
    /// `<ms>-<seq>` or `<ms>` (seq 0): exactly this ID.
    Explicit(StreamId),
}

/// `XADD key ... <id> field value ...`: parses the ID argument.
///
/// `*` → [`IdSpec::Auto`], `<ms>-*` → [`IdSpec::AutoSeq`], else a strict ID
/// (`-` and `+` are not accepted; `<ms>` alone means `<ms>-0`).
///
/// # Errors
/// `InvalidStreamId` for anything else. `0-0` parses fine here; rejecting it
/// (`StreamIdZero`) is [`super::Stream::next_id`]'s job.
/// # Source
/// `streamParseAddOrTrimArgsOrReply` + `streamParseStrictIDOrReply` with `seq_given`.
pub fn parse_xadd_id(arg: &[u8]) -> Result<IdSpec, CmdError> {
    match parse_generic(arg, true, 0, true)? {
        Parsed::Auto => Ok(IdSpec::Auto),
        Parsed::AutoSeq(ms) => Ok(IdSpec::AutoSeq { ms }),
        Parsed::Id(id) => Ok(IdSpec::Explicit(id)),
    }
}

/// Strict ID as XDEL, XSETID, XACK, XCLAIM take it: `<ms>-<seq>` or `<ms>` (seq 0).
/// `-`, `+`, `*` and `<ms>-*` are rejected.
///
/// # Errors
/// `InvalidStreamId`.
/// # Source
/// `streamParseStrictIDOrReply(c, o, id, 0, NULL)`.
pub fn parse_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_strict_id(arg, 0)
}

/// Strict ID where a missing sequence means `missing_seq` (e.g. `u64::MAX` for
/// the end of an interval).
///
/// # Errors
/// `InvalidStreamId`.
/// # Source
/// `streamParseStrictIDOrReply`.
pub fn parse_strict_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    match parse_generic(arg, true, missing_seq, false)? {
        Parsed::Id(id) => Ok(id),
        Parsed::Auto | Parsed::AutoSeq(_) => Err(CmdError::InvalidStreamId),
    }
}

/// Non-strict ID: like [`parse_strict_id`] but `-` is `0-0` and `+` is `MAX-MAX`.
///
/// # Errors
/// `InvalidStreamId`.
/// # Source
/// `streamParseIDOrReply`.
pub fn parse_loose_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    match parse_generic(arg, false, missing_seq, false)? {
        Parsed::Id(id) => Ok(id),
        Parsed::Auto | Parsed::AutoSeq(_) => Err(CmdError::InvalidStreamId),
    }
}

/// The start of an XRANGE/XREVRANGE/XPENDING interval as written by the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeStart {
    /// The ID written (`-` = `0-0`; `<ms>` = `<ms>-0`).
    pub id: StreamId,
    /// Written as `(id`: the interval starts after `id`.
    pub exclusive: bool,
}

/// The end of an XRANGE/XREVRANGE/XPENDING interval as written by the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeEnd {
    /// The ID written (`+` = `MAX-MAX`; `<ms>` = `<ms>-MAX`).
    pub id: StreamId,
    /// Written as `(id`: the interval ends before `id`.
    pub exclusive: bool,
}

/// Text Redis replies when an exclusive start cannot be incremented.
pub const ERR_INVALID_START_ID: &str = "ERR invalid start ID for the interval";
/// Text Redis replies when an exclusive end cannot be decremented.
pub const ERR_INVALID_END_ID: &str = "ERR invalid end ID for the interval";

impl RangeStart {
    /// First ID included in the interval (`(id` → `id.next()`).
    ///
    /// # Errors
    /// `Msg("ERR invalid start ID for the interval")` for `(MAX-MAX`.
    /// # Source
    /// `xrangeGenericCommand`: `streamIncrID` on an exclusive start.
    pub fn first_included(self) -> Result<StreamId, CmdError> {
        if !self.exclusive {
            return Ok(self.id);
        }
        self.id
            .next()
            .ok_or(CmdError::Msg(ERR_INVALID_START_ID.into()))
    }
}

impl RangeEnd {
    /// Last ID included in the interval (`(id` → `id.prev()`).
    ///
    /// # Errors
    /// `Msg("ERR invalid end ID for the interval")` for `(0-0`.
    /// # Source
    /// `xrangeGenericCommand`: `streamDecrID` on an exclusive end.
    pub fn last_included(self) -> Result<StreamId, CmdError> {
        if !self.exclusive {
            return Ok(self.id);
        }
        self.id
            .prev()
            .ok_or(CmdError::Msg(ERR_INVALID_END_ID.into()))
    }
}

/// Parses an interval start: `-`, `<ms>` (= `<ms>-0`), `<ms>-<seq>`, or
/// `(<id>` (exclusive; `(-` and `(+` are invalid, the part after `(` is strict).
///
/// # Errors
/// `InvalidStreamId`.
/// # Source
/// `streamParseIntervalIdOrReply(..., missing_seq = 0)`.
pub fn parse_range_start(arg: &[u8]) -> Result<RangeStart, CmdError> {
    let (id, exclusive) = parse_interval(arg, 0)?;
    Ok(RangeStart { id, exclusive })
}

/// Parses an interval end: `+`, `<ms>` (= `<ms>-MAX`), `<ms>-<seq>`, or `(<id>`.
///
/// # Errors
/// `InvalidStreamId`.
/// # Source
/// `streamParseIntervalIdOrReply(..., missing_seq = UINT64_MAX)`.
pub fn parse_range_end(arg: &[u8]) -> Result<RangeEnd, CmdError> {
    let (id, exclusive) = parse_interval(arg, u64::MAX)?;
    Ok(RangeEnd { id, exclusive })
}

/// `XRANGE key start end`: both bounds resolved to inclusive IDs, with errors
/// in Redis's order (parse start, parse end, then the exclusive-bound
/// overflow checks, start first).
///
/// # Errors
/// `InvalidStreamId`, `Msg(ERR_INVALID_START_ID)`, `Msg(ERR_INVALID_END_ID)`.
/// # Source
/// `xrangeGenericCommand`.
pub fn parse_range(start: &[u8], end: &[u8]) -> Result<(StreamId, StreamId), CmdError> {
    let start = parse_range_start(start)?;
    let end = parse_range_end(end)?;
    Ok((start.first_included()?, end.last_included()?))
}

fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    // Redis looks at the full argument (not the C string) for the `(`.
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_strict_id(&arg[1..], missing_seq)?, true))
    } else {
        Ok((parse_loose_id(arg, missing_seq)?, false))
    }
}

enum Parsed {
    Auto,
    AutoSeq(u64),
    Id(StreamId),
}

/// Longest argument Redis accepts as an ID (it copies into a 128-byte buffer).
const MAX_ID_ARG_LEN: usize = 127;

fn parse_generic(
    arg: &[u8],
    strict: bool,
    missing_seq: u64,
    xadd: bool,
) -> Result<Parsed, CmdError> {
    if arg.len() > MAX_ID_ARG_LEN {
        return Err(CmdError::InvalidStreamId);
    }
    // C-string semantics: everything from the first NUL on is invisible.
    let s = match arg.iter().position(|&b| b == 0) {
        Some(nul) => &arg[..nul],
        None => arg,
    };
    if xadd && s == b"*" {
        return Ok(Parsed::Auto);
    }
    if s == b"-" || s == b"+" {
        if strict {
            return Err(CmdError::InvalidStreamId);
        }
        return Ok(Parsed::Id(if s == b"-" {
            StreamId::MIN
        } else {
            StreamId::MAX
        }));
    }
    let (ms_part, seq_part) = match s.iter().position(|&b| b == b'-') {
        Some(dash) => (&s[..dash], Some(&s[dash + 1..])),
        None => (s, None),
    };
    let ms = string2ull(ms_part).ok_or(CmdError::InvalidStreamId)?;
    let seq = match seq_part {
        Some(b"*") if xadd => return Ok(Parsed::AutoSeq(ms)),
        Some(part) => string2ull(part).ok_or(CmdError::InvalidStreamId)?,
        None => missing_seq,
    };
    Ok(Parsed::Id(StreamId::new(ms, seq)))
}

/// Redis `string2ull`: a canonical signed 64-bit integer (rejected if
/// negative), else whatever C `strtoull(s, &end, 10)` accepts in full.
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = string2ll(s) {
        return u64::try_from(v).ok();
    }
    strtoull_full(s)
}

/// Redis `string2ll`: `0`, or optional `-` then `[1-9][0-9]*` fitting in i64.
fn string2ll(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    if digits.len() <= 18 {
        // At most 18 digits fit in i64 whatever they are: no overflow checks.
        let mut v: i64 = 0;
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + i64::from(d);
        }
        return Some(if neg { -v } else { v });
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if neg {
        if v > 1u64 << 63 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// C `strtoull(s, &end, 10)` in the C locale, successful only if it consumed
/// all of `s`: leading isspace, optional sign (`-` negates modulo 2^64),
/// at least one digit, no overflow.
fn strtoull_full(s: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < s.len() && crate::ctype::is_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    const M: u64 = u64::MAX;

    #[test]
    fn display_and_bytes() {
        assert_eq!(id(5, 7).to_string(), "5-7");
        assert_eq!(&id(1, 0).to_bytes()[..], b"1-0");
        assert_eq!(
            StreamId::MAX.to_string(),
            "18446744073709551615-18446744073709551615"
        );
    }

    #[test]
    fn next_prev_overflow() {
        assert_eq!(id(5, M).next(), Some(id(6, 0)));
        assert_eq!(id(5, 1).next(), Some(id(5, 2)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(id(6, 0).prev(), Some(id(5, M)));
        assert_eq!(id(6, 3).prev(), Some(id(6, 2)));
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(StreamId::MIN.next(), Some(id(0, 1)));
    }

    #[test]
    fn strict_ids_accepted_like_redis() {
        // Each checked against redis-server 7.0.15 with XADD.
        assert_eq!(parse_id(b"1-0"), Ok(id(1, 0)));
        assert_eq!(parse_id(b"7"), Ok(id(7, 0)));
        assert_eq!(parse_id(b"0"), Ok(id(0, 0)));
        assert_eq!(parse_id(b" 1"), Ok(id(1, 0))); // strtoull skips spaces
        assert_eq!(parse_id(b"+1"), Ok(id(1, 0))); // strtoull takes '+'
        assert_eq!(parse_id(b"01-02"), Ok(id(1, 2))); // leading zeros
        assert_eq!(parse_id(b"1--0"), Ok(id(1, 0))); // "-0" via strtoull
        assert_eq!(parse_id(b"1--18446744073709551615"), Ok(id(1, 1))); // wraps
        assert_eq!(parse_id(b"2-\t3"), Ok(id(2, 3)));
        assert_eq!(parse_id(b"5-+7"), Ok(id(5, 7)));
        assert_eq!(parse_id(b"7\0abc"), Ok(id(7, 0))); // C string: stops at NUL
        assert_eq!(
            parse_id(b"18446744073709551615-18446744073709551615"),
            Ok(StreamId::MAX)
        );
        let long127 = format!("{}4", "0".repeat(126));
        assert_eq!(parse_id(long127.as_bytes()), Ok(id(4, 0)));
    }

    #[test]
    fn strict_ids_rejected_like_redis() {
        for bad in [
            &b"1-"[..],
            b"-1",
            b"1-2-3",
            b"1 ",
            b"",
            b"-",
            b"+",
            b"*",
            b"1-*",
            b"*-1",
            b"1-+",
            b"1--1",
            b"-0",
            b"0x10",
            b"(7",
            b"7-**",
            b"18446744073709551616",
            b"1-18446744073709551616",
            b"1-9223372036854775808x",
            b"1--9223372036854775808", // canonical negative i64 → rejected
            b" ",
            b"+",
            b"1.0",
        ] {
            assert_eq!(
                parse_id(bad),
                Err(CmdError::InvalidStreamId),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long128 = format!("{}3", "0".repeat(127));
        assert_eq!(parse_id(long128.as_bytes()), Err(CmdError::InvalidStreamId));
    }

    /// `string2ll` against its definition (`0`, or an optional `-` then
    /// `[1-9][0-9]*` that fits in i64), on both sides of its 18-digit fast
    /// path and at the i64 edges.
    #[test]
    fn string2ll_takes_canonical_i64_only() {
        let reference = |s: &str| -> Option<i64> {
            let digits = s.strip_prefix('-').unwrap_or(s);
            let canonical = s == "0"
                || (digits.starts_with(|c: char| ('1'..='9').contains(&c))
                    && digits.bytes().all(|b| b.is_ascii_digit()));
            canonical.then(|| s.parse().ok()).flatten()
        };
        let mut cases: Vec<String> = [
            "0",
            "-0",
            "00",
            "01",
            "1",
            "-1",
            "9",
            "12a",
            "1-",
            "",
            "-",
            "+1",
            " 1",
            "999999999999999999",
            "-999999999999999999",
            "1000000000000000000",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "99999999999999999999",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for len in 1..=21 {
            cases.push("7".repeat(len));
            cases.push(format!("-{}", "3".repeat(len)));
            cases.push(format!("{}x", "5".repeat(len)));
        }
        for c in &cases {
            assert_eq!(string2ll(c.as_bytes()), reference(c), "{c:?}");
        }
    }

    #[test]
    fn strtoull_negative_wraps_when_not_canonical_i64() {
        // -9223372036854775809 does not fit i64, so strtoull negates mod 2^64.
        assert_eq!(
            parse_id(b"1--9223372036854775809"),
            Ok(id(1, 9223372036854775807))
        );
    }

    #[test]
    fn xadd_ids() {
        assert_eq!(parse_xadd_id(b"*"), Ok(IdSpec::Auto));
        assert_eq!(parse_xadd_id(b"*\0z"), Ok(IdSpec::Auto));
        assert_eq!(parse_xadd_id(b"7-*"), Ok(IdSpec::AutoSeq { ms: 7 }));
        assert_eq!(parse_xadd_id(b"0-*"), Ok(IdSpec::AutoSeq { ms: 0 }));
        assert_eq!(parse_xadd_id(b"7"), Ok(IdSpec::Explicit(id(7, 0))));
        assert_eq!(parse_xadd_id(b"0-0"), Ok(IdSpec::Explicit(id(0, 0))));
        for bad in [&b"*-1"[..], b"**", b"7-**", b"+", b"-", b"-*", b"* "] {
            assert_eq!(parse_xadd_id(bad), Err(CmdError::InvalidStreamId));
        }
        // `ms-*` is XADD-only.
        assert_eq!(parse_id(b"5-*"), Err(CmdError::InvalidStreamId));
    }

    #[test]
    fn range_bounds() {
        assert_eq!(parse_range(b"-", b"+"), Ok((StreamId::MIN, StreamId::MAX)));
        assert_eq!(parse_range(b"+", b"-"), Ok((StreamId::MAX, StreamId::MIN)));
        assert_eq!(parse_range(b"5", b"5"), Ok((id(5, 0), id(5, M))));
        // Exclusive incomplete start: (5 = after 5-0 (Redis), not after 5-MAX.
        assert_eq!(parse_range(b"(5", b"(6"), Ok((id(5, 1), id(6, M - 1))));
        assert_eq!(parse_range(b"(5-1", b"(6-0"), Ok((id(5, 2), id(5, M))));
        assert_eq!(
            parse_range(b"(5-18446744073709551615", b"+"),
            Ok((id(6, 0), StreamId::MAX))
        );
        assert_eq!(parse_range(b"-", b"(0"), Ok((id(0, 0), id(0, M - 1))));
        assert_eq!(
            parse_range(b"(18446744073709551615-18446744073709551615", b"+"),
            Err(CmdError::msg(ERR_INVALID_START_ID))
        );
        assert_eq!(
            parse_range(b"-", b"(0-0"),
            Err(CmdError::msg(ERR_INVALID_END_ID))
        );
        // Start overflow is reported before end underflow.
        assert_eq!(
            parse_range(b"(18446744073709551615-18446744073709551615", b"(0-0"),
            Err(CmdError::msg(ERR_INVALID_START_ID))
        );
        // Parse errors come before overflow errors.
        assert_eq!(
            parse_range(b"(18446744073709551615-18446744073709551615", b"x"),
            Err(CmdError::InvalidStreamId)
        );
        for bad in [&b"(-"[..], b"(+", b"(", b"((5", b"5-*", b"*"] {
            assert_eq!(parse_range_start(bad), Err(CmdError::InvalidStreamId));
            assert_eq!(parse_range_end(bad), Err(CmdError::InvalidStreamId));
        }
        assert_eq!(
            parse_range_start(b"(7"),
            Ok(RangeStart {
                id: id(7, 0),
                exclusive: true
            })
        );
        assert_eq!(
            parse_range_end(b"7"),
            Ok(RangeEnd {
                id: id(7, M),
                exclusive: false
            })
        );
        assert_eq!(parse_range_start(b"-\0z").map(|b| b.id), Ok(StreamId::MIN));
    }
}
