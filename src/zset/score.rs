//! Scores and ranges of sorted sets: parsing with Redis's rules, and the
//! text Redis prints for a double.
//!
//! # Source
//! redis/src/util.c `string2d` / `d2string` (Redis 7.2+: `fast_float` to
//! parse, integers printed as integers, otherwise the shortest text that
//! reads back as the same double), t_zset.c `zslParseRange` /
//! `zslParseLexRangeItem`.

use std::cmp::Ordering;

use bytes::Bytes;

/// Parse a score as Redis's `string2d` does (Redis 7.2+, `fast_float`):
/// the whole argument must be a decimal float (`1`, `-2.5`, `1e3`, `.5`),
/// `inf` / `infinity` with an optional sign (any case); no leading space,
/// never NaN. Out-of-range values saturate (`1e400` is `inf`, `1e-400` is
/// 0), as `fast_float` returns them without `ERANGE`.
///
/// `None` means Redis's `ERR value is not a valid float`.
pub fn parse_score(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let first = *b.first()?;
    if first.is_ascii_whitespace() {
        return None;
    }
    // Rust's grammar is that of fast_float's general format, plus a few
    // spellings fast_float refuses: `nan` (refused below anyway).
    let v: f64 = s.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Parse a range bound's number: like [`parse_score`], except that an empty
/// text reads as 0 (Redis's `zslParseRange` only checks that the parser
/// stopped at the end of the argument, and an empty one is at its end).
fn parse_bound_number(b: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return Some(0.0);
    }
    parse_score(b)
}

/// One end of a score interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreBound {
    pub value: f64,
    /// Written `(value`: the bound itself is out of the interval.
    pub exclusive: bool,
}

/// A score interval `[min, max]`, each end inclusive or exclusive
/// (ZRANGEBYSCORE, ZCOUNT, ZREMRANGEBYSCORE).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: ScoreBound,
    pub max: ScoreBound,
}

/// Parse `min` / `max` of a score range: a float, `-inf` / `+inf`, each
/// optionally prefixed by `(` for an exclusive end.
///
/// `None` means Redis's `ERR min or max is not a float`.
pub fn parse_score_range(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
    fn bound(b: &[u8]) -> Option<ScoreBound> {
        match b.strip_prefix(b"(") {
            Some(rest) => Some(ScoreBound {
                value: parse_bound_number(rest)?,
                exclusive: true,
            }),
            None => Some(ScoreBound {
                value: parse_bound_number(b)?,
                exclusive: false,
            }),
        }
    }
    Some(ScoreRange {
        min: bound(min)?,
        max: bound(max)?,
    })
}

impl ScoreRange {
    /// Whether `score` is at or above the lower end.
    pub fn above_min(&self, score: f64) -> bool {
        if self.min.exclusive {
            score > self.min.value
        } else {
            score >= self.min.value
        }
    }

    /// Whether `score` is at or below the upper end.
    pub fn below_max(&self, score: f64) -> bool {
        if self.max.exclusive {
            score < self.max.value
        } else {
            score <= self.max.value
        }
    }

    /// Whether no score can be in the interval (min above max, or equal
    /// ends with one of them exclusive).
    pub fn is_empty(&self) -> bool {
        self.min.value > self.max.value
            || (self.min.value == self.max.value && (self.min.exclusive || self.max.exclusive))
    }
}

/// One end of a lexicographic interval (ZRANGEBYLEX, ZLEXCOUNT,
/// ZREMRANGEBYLEX).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[member`: inclusive.
    Incl(Bytes),
    /// `(member`: exclusive.
    Excl(Bytes),
}

/// A lexicographic interval of members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

/// Parse `min` / `max` of a lexicographic range: `-`, `+`, `[member` or `(member`.
///
/// `None` means Redis's `ERR min or max not valid string range item`.
pub fn parse_lex_range(min: &Bytes, max: &Bytes) -> Option<LexRange> {
    fn bound(b: &Bytes) -> Option<LexBound> {
        match b.first()? {
            b'-' if b.len() == 1 => Some(LexBound::Min),
            b'+' if b.len() == 1 => Some(LexBound::Max),
            b'[' => Some(LexBound::Incl(b.slice(1..))),
            b'(' => Some(LexBound::Excl(b.slice(1..))),
            _ => None,
        }
    }
    Some(LexRange {
        min: bound(min)?,
        max: bound(max)?,
    })
}

impl LexRange {
    /// Whether `member` is at or above the lower end.
    pub fn above_min(&self, member: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Incl(m) => member >= &m[..],
            LexBound::Excl(m) => member > &m[..],
        }
    }

    /// Whether `member` is at or below the upper end.
    pub fn below_max(&self, member: &[u8]) -> bool {
        match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Incl(m) => member <= &m[..],
            LexBound::Excl(m) => member < &m[..],
        }
    }

    /// Whether no member can be in the interval.
    ///
    /// # Source
    /// `zslIsInLexRange`'s first check: `min > max`, or equal with either end exclusive.
    pub fn is_empty(&self) -> bool {
        let rank = |b: &LexBound| match b {
            LexBound::Min => 0,
            LexBound::Incl(_) | LexBound::Excl(_) => 1,
            LexBound::Max => 2,
        };
        let (a, b) = (&self.min, &self.max);
        match rank(a).cmp(&rank(b)) {
            Ordering::Greater => true,
            Ordering::Less => false,
            Ordering::Equal => match (a, b) {
                (LexBound::Min, _) | (LexBound::Max, _) => true,
                (x, y) => {
                    let (xm, xe) = lex_parts(x);
                    let (ym, ye) = lex_parts(y);
                    match xm.cmp(ym) {
                        Ordering::Greater => true,
                        Ordering::Less => false,
                        Ordering::Equal => xe || ye,
                    }
                }
            },
        }
    }
}

fn lex_parts(b: &LexBound) -> (&[u8], bool) {
    match b {
        LexBound::Incl(m) => (m, false),
        LexBound::Excl(m) => (m, true),
        _ => (&[], false),
    }
}

/// The text Redis prints for a double (scores in replies, RESP3 doubles,
/// ZSCAN): `nan`, `inf`, `-inf`, `0` / `-0`; an integral value whose
/// magnitude is at most `i64::MAX / 2` as a plain integer (`3`,
/// `1000000000000000000`); anything else as the shortest digits that read
/// back as the same double, laid out as Redis's `fpconv_dtoa` lays them out
/// (`0.1`, `1.5`, `0.00001`, `1e-7`, `1e+20`, `1.2345e+30`).
///
/// Redis's digit generation is Grisu2, which in rare cases emits one more
/// digit than the shortest; this function always emits the shortest.
///
/// # Source
/// `d2string`, redis/src/util.c and `emit_digits`, deps/fpconv (Redis 7.2+).
pub fn format_score(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    const HALF_MAX: f64 = (i64::MAX / 2) as f64;
    if (-HALF_MAX..=HALF_MAX).contains(&d) && d.fract() == 0.0 {
        return (d as i64).to_string();
    }
    // Shortest round-trip digits and decimal exponent, from Rust's `{:e}`
    // (`1.2345e-7`): digits "12345", exponent of the first digit -7.
    let sci = format!("{:e}", d.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let ndigits = digits.len() as i32;
    // fpconv's K: the value is digits × 10^k.
    let k = exp - (ndigits - 1);
    let abs_exp = (k + ndigits - 1).abs();
    let mut out = String::with_capacity(24);
    if d < 0.0 {
        out.push('-');
    }
    if k >= 0 && abs_exp < ndigits + 7 {
        // Plain integer with trailing zeros.
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', k as usize));
    } else if k < 0 && (k > -7 || abs_exp < 4) {
        // Plain decimal.
        let offset = ndigits + k;
        if offset <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-offset) as usize));
            out.push_str(digits);
        } else {
            out.push_str(&digits[..offset as usize]);
            out.push('.');
            out.push_str(&digits[offset as usize..]);
        }
    } else {
        // Scientific: d[.ddd]e±X (no zero padding of the exponent).
        out.push_str(&digits[..1]);
        if ndigits > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&exp.abs().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_redis_8() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (-3.0, "-3"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e-5, "0.00001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (123.456, "123.456"),
            (1e20, "1e+20"),
            (1.2345e30, "1.2345e+30"),
            (1e18, "1000000000000000000"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (0.0, "0"),
            (-0.0, "-0"),
            (2.5e-3, "0.0025"),
            (12345678.9, "12345678.9"),
        ];
        for (d, want) in cases {
            assert_eq!(format_score(*d), *want, "{d:e}");
            if d.is_finite() {
                assert_eq!(format_score(*d).parse::<f64>().unwrap(), *d);
            }
        }
    }

    #[test]
    fn parses_like_string2d() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_score(b".5"), Some(0.5));
        for bad in [&b""[..], b" 1", b"nan", b"1x", b"abc", b"1e"] {
            assert_eq!(parse_score(bad), None, "{bad:?}");
        }
        let r = parse_score_range(b"(1", b"+inf").unwrap();
        assert!(r.min.exclusive && !r.above_min(1.0) && r.above_min(1.1));
        assert!(parse_score_range(b"(", b"1").is_some());
        assert!(parse_score_range(b"nan", b"1").is_none());
        let lex = parse_lex_range(&Bytes::from("[a"), &Bytes::from("(a")).unwrap();
        assert!(lex.is_empty());
        assert!(parse_lex_range(&Bytes::from("a"), &Bytes::from("+")).is_none());
        assert!(parse_lex_range(&Bytes::from("+x"), &Bytes::from("+")).is_none());
    }
}
