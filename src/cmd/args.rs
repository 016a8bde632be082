//! Typed reads of command arguments with Redis-exact errors.
//!
//! Numbers follow Redis's `string2ll` / `string2ull` / `strtold` rules: no
//! leading `+`, no spaces, no leading zeros on multi-digit numbers, no overflow.

use bytes::Bytes;

use crate::error::CmdError;

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

/// A blocking command's timeout in seconds (a float) as ms, 0 = forever.
///
/// # Errors
/// `ERR timeout is not a float or out of range`, `ERR timeout is out of
/// range` (too large), `ERR timeout is negative`.
/// # Source
/// `getTimeoutFromObjectOrReply` (UNIT_SECONDS), redis/src/timeout.c:
/// seconds × 1000 rounded up.
pub fn parse_timeout_s(arg: &[u8]) -> Result<u64, CmdError> {
    let s = parse_f64(arg).ok_or(CmdError::msg("ERR timeout is not a float or out of range"))?;
    let ms = (s * 1000.0).ceil();
    if ms > i64::MAX as f64 {
        return Err(CmdError::msg("ERR timeout is out of range"));
    }
    if ms < 0.0 {
        return Err(CmdError::msg("ERR timeout is negative"));
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
        let arg = self.argv.get(self.pos).ok_or(CmdError::Syntax)?;
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
