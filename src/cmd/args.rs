//! Typed reads of command arguments with Redis-exact errors.
//!
//! Numbers follow Redis's `string2ll` / `string2ull` / `strtold` rules: no
//! leading `+`, no spaces, no leading zeros on multi-digit numbers, no overflow.

use bytes::Bytes;

use crate::error::CmdError;
use crate::ldouble::LongDouble;

/// `argv[i]`, or `ERR syntax error` (arity is checked before parsing, so
/// only a command table mistake reaches the error).
///
/// A `match` rather than `ok_or(CmdError::Syntax)`: the eagerly built error
/// would be dropped on every success, and this runs once per keyed command.
pub fn key_at(argv: &[Bytes], i: usize) -> Result<Bytes, CmdError> {
    match argv.get(i) {
        Some(k) => Ok(k.clone()),
        None => Err(CmdError::Syntax),
    }
}

/// Parse a signed 64-bit integer as Redis's `string2ll` does.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits.len() > 1 && digits[0] == b'0')
        || (digits == b"0" && b.len() > 1)
    {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Parse an unsigned 64-bit integer as Redis's `string2ull` does.
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if b.len() > 1 && b[0] == b'0' {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Parse a float as Redis does for `INCRBYFLOAT` and friends (no spaces, not NaN).
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.trim() != s {
        return None;
    }
    let v: f64 = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => s.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// A blocking command's timeout in seconds, as Redis reads it: any
/// `strtold` number (`1.5`, `.5`, `1e-3`, hexadecimal `0x1p-3`), × 1000 in
/// long double and rounded up to whole ms. 0 (and a negative value that
/// rounds up to 0) blocks forever.
///
/// # Errors
/// `ERR timeout is not a float or out of range`; `ERR timeout is out of
/// range` (past `i64::MAX` ms, or a deadline past it); `ERR timeout is
/// negative`.
/// # Source
/// `getTimeoutFromObjectOrReply` (UNIT_SECONDS), redis/src/timeout.c, with
/// `string2ld` (redis/src/util.c); the deadline check is Redis 7.2+.
pub fn parse_timeout_s(arg: &[u8]) -> Result<u64, CmdError> {
    let s = LongDouble::parse(arg)
        .ok_or(CmdError::msg("ERR timeout is not a float or out of range"))?;
    let ms = s.mul_u64(1000).ceil_i128();
    if ms > i128::from(i64::MAX) {
        return Err(CmdError::msg(TIMEOUT_OUT_OF_RANGE));
    }
    timeout_deadline_fits(ms)
}

/// A blocking command's timeout in milliseconds (XREAD / XREADGROUP
/// `BLOCK`, WAIT): an integer, 0 = forever.
///
/// # Errors
/// `ERR timeout is not an integer or out of range`; `ERR timeout is
/// negative`; `ERR timeout is out of range` (a deadline past `i64::MAX` ms).
/// # Source
/// `getTimeoutFromObjectOrReply` (UNIT_MILLISECONDS), redis/src/timeout.c;
/// the deadline check is Redis 7.2+.
pub fn parse_timeout_ms(arg: &[u8]) -> Result<u64, CmdError> {
    let ms = parse_i64(arg).ok_or(CmdError::msg(
        "ERR timeout is not an integer or out of range",
    ))?;
    timeout_deadline_fits(i128::from(ms))
}

const TIMEOUT_OUT_OF_RANGE: &str = "ERR timeout is out of range";

/// The last checks of `getTimeoutFromObjectOrReply`: a negative timeout is
/// refused, and so is one whose deadline (now + timeout, ms since the Unix
/// epoch) would not fit in an `i64`.
fn timeout_deadline_fits(ms: i128) -> Result<u64, CmdError> {
    if ms < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let now = i128::from(crate::shard::now_ms());
    if ms > 0 && ms > i128::from(i64::MAX) - now {
        return Err(CmdError::msg(TIMEOUT_OUT_OF_RANGE));
    }
    Ok(ms as u64)
}

/// `parse_i64`, or `ERR value is not an integer or out of range`.
pub fn int_arg(b: &[u8]) -> Result<i64, CmdError> {
    parse_i64(b).ok_or(CmdError::NotInteger)
}

/// Case-insensitive comparison of an argument with an (uppercase or lowercase) keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// Lossy text of an argument, for error messages.
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

pub use crate::error::c_str;

/// A cursor over `argv[1..]` for option parsing.
pub struct Args<'a> {
    argv: &'a [Bytes],
    pos: usize,
}

impl<'a> Args<'a> {
    /// Start after the command name (`argv[0]`).
    pub fn new(argv: &'a [Bytes]) -> Self {
        Args { argv, pos: 1 }
    }

    /// Arguments not yet consumed.
    pub fn remaining(&self) -> usize {
        self.argv.len().saturating_sub(self.pos)
    }

    /// Whether every argument was consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Look at the next argument without consuming it.
    pub fn peek(&self) -> Option<&'a Bytes> {
        self.argv.get(self.pos)
    }

    /// The next argument, or `ERR syntax error` when there is none.
    pub fn next_arg(&mut self) -> Result<&'a Bytes, CmdError> {
        // A match, not `ok_or`: see `key_at`.
        let Some(arg) = self.argv.get(self.pos) else {
            return Err(CmdError::Syntax);
        };
        self.pos += 1;
        Ok(arg)
    }

    /// The next argument if there is one.
    pub fn next_opt(&mut self) -> Option<&'a Bytes> {
        let arg = self.argv.get(self.pos)?;
        self.pos += 1;
        Some(arg)
    }

    /// The next argument as an i64 (`ERR value is not an integer or out of range`).
    pub fn next_i64(&mut self) -> Result<i64, CmdError> {
        int_arg(self.next_arg()?)
    }

    /// Consume the next argument if it equals `keyword` (any case).
    pub fn eat(&mut self, keyword: &str) -> bool {
        match self.peek() {
            Some(a) if is(a, keyword) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// All remaining arguments.
    pub fn rest(&mut self) -> &'a [Bytes] {
        let r = &self.argv[self.pos.min(self.argv.len())..];
        self.pos = self.argv.len();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_string2ll() {
        assert_eq!(parse_i64(b"123"), Some(123));
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_i64(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"+1",
            b" 1",
            b"01",
            b"-0",
            b"1.0",
            b"9223372036854775808",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
    }
}
