//! x87 80-bit extended precision numbers ("long double" on x86-64 Linux),
//! done exactly in software: what Redis computes `INCRBYFLOAT` in.
//!
//! Redis parses both the stored string and the increment with `strtold`,
//! adds them as `long double` and stores the sum printed with `%.17Lf` and
//! its trailing zeros cut. An `f64` gives different answers (11.1 + 0x10,
//! 1e308 + 1e308, 2^64-scale integers), so this module reproduces the three
//! steps bit for bit: a 64-bit significand, round-to-nearest-even after
//! every operation, exponents of the x87 format (normal numbers from
//! 2^-16382 up to below 2^16384, subnormals down to 2^-16445), and glibc's
//! exact decimal printing. The arithmetic is done on big integers
//! (`num-bigint`), so every result is the exactly rounded one.
//!
//! Pure data, no IO: unit tests below, differential tests in
//! `tests/strings.rs`.
//!
//! # Source
//! `string2ld` and `ld2string` (`LD_STR_HUMAN`), redis/src/util.c;
//! `incrbyfloatCommand`, redis/src/t_string.c (7.0; the same in 8.x).

use num_bigint::BigUint;
use num_integer::Integer;

/// Bits in the significand (the x87 format stores its integer bit).
const MANT_BITS: u64 = 64;
/// Binary exponent of the least significant significand bit of the
/// smallest subnormal: 2^-16445.
const MIN_LSB_EXP: i64 = -16445;
/// Finite values are below 2^16384.
const MAX_EXP_EXCLUSIVE: i64 = 16384;
/// Redis refuses longer numbers (`MAX_LONG_DOUBLE_CHARS`).
const MAX_CHARS: usize = 5 * 1024;

/// A finite 80-bit extended value `(-1)^neg * mant * 2^exp`, or infinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LongDouble {
    /// `mant` has at most 64 bits; zero is `mant == 0`.
    Finite { neg: bool, mant: u64, exp: i64 },
    /// Positive or negative infinity.
    Inf { neg: bool },
}

/// The value `num / den * 2^bin_exp` rounded to nearest-even at 64
/// significant bits (fewer below the normal range). `None` on overflow.
fn round(neg: bool, num: BigUint, den: &BigUint, bin_exp: i64) -> Option<LongDouble> {
    let zero = LongDouble::Finite {
        neg,
        mant: 0,
        exp: 0,
    };
    if num.bits() == 0 {
        return Some(zero);
    }
    // Estimate the exponent of the result's LSB, then correct it by one.
    let mut e = num.bits() as i64 - den.bits() as i64 + bin_exp - MANT_BITS as i64;
    loop {
        e = e.max(MIN_LSB_EXP);
        // q = floor(num / den / 2^(e - bin_exp)), r its remainder over `d`.
        let shift = e - bin_exp;
        let (n, d) = if shift >= 0 {
            (num.clone(), den << shift as u64)
        } else {
            (&num << (-shift) as u64, den.clone())
        };
        let (mut q, r) = n.div_rem(&d);
        if q.bits() > MANT_BITS {
            e += 1;
            continue;
        }
        if q.bits() < MANT_BITS && e > MIN_LSB_EXP {
            e -= 1;
            continue;
        }
        let twice = r << 1u8;
        if twice > d || (twice == d && q.bit(0)) {
            q += 1u8;
        }
        if q.bits() > MANT_BITS {
            q >>= 1u8;
            e += 1;
        }
        if e + MANT_BITS as i64 > MAX_EXP_EXCLUSIVE {
            return None;
        }
        let mant = q.iter_u64_digits().next().unwrap_or(0);
        return Some(LongDouble::Finite { neg, mant, exp: e });
    }
}

impl LongDouble {
    /// Zero.
    pub const ZERO: LongDouble = LongDouble::Finite {
        neg: false,
        mant: 0,
        exp: 0,
    };

    /// Parse a number as Redis's `string2ld` does: `strtold` syntax
    /// (decimal with optional fraction and `e` exponent, hexadecimal `0x...`
    /// with optional `p` exponent, `inf`/`infinity`, an optional sign), the
    /// whole string, no leading space, shorter than 5 KiB.
    ///
    /// # Reply
    /// `None` for anything else, for NaN, for a value too large for the
    /// format and for a nonzero value that rounds to zero (Redis refuses
    /// `strtold`'s ERANGE results that are infinite or zero).
    pub fn parse(text: &[u8]) -> Option<LongDouble> {
        if text.is_empty() || text.len() >= MAX_CHARS {
            return None;
        }
        let (neg, body) = match text[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(LongDouble::Inf { neg });
        }
        let parsed = match body {
            [b'0', b'x' | b'X', rest @ ..] => parse_hex(neg, rest),
            _ => parse_decimal(neg, body),
        };
        match parsed? {
            // Overflow: strtold gives HUGE_VAL with ERANGE.
            Rounded::Overflow => None,
            // A nonzero number that underflowed to zero: ERANGE with zero.
            Rounded::Value(LongDouble::Finite { mant: 0, .. }, true) => None,
            Rounded::Value(v, _) => Some(v),
        }
    }

    /// `self + other`, rounded as the x87 FPU rounds (to nearest, ties to
    /// even). `None` when the result is infinite or NaN.
    pub fn add(&self, other: &LongDouble) -> Option<LongDouble> {
        let (
            &LongDouble::Finite {
                neg: an,
                mant: am,
                exp: ae,
            },
            &LongDouble::Finite {
                neg: bn,
                mant: bm,
                exp: be,
            },
        ) = (self, other)
        else {
            return None;
        };
        let base = ae.min(be);
        let a = BigUint::from(am) << (ae - base) as u64;
        let b = BigUint::from(bm) << (be - base) as u64;
        let one = BigUint::from(1u8);
        if an == bn {
            return round(an, a + b, &one, base);
        }
        match a.cmp(&b) {
            std::cmp::Ordering::Equal => Some(LongDouble::ZERO), // x - x is +0
            std::cmp::Ordering::Greater => round(an, a - b, &one, base),
            std::cmp::Ordering::Less => round(bn, b - a, &one, base),
        }
    }

    /// `self × k`, rounded once as the x87 FPU rounds (to nearest, ties to
    /// even); infinite past the format's range.
    pub fn mul_u64(&self, k: u64) -> LongDouble {
        match *self {
            LongDouble::Inf { neg } => LongDouble::Inf { neg },
            LongDouble::Finite { neg, mant, exp } => {
                round(neg, BigUint::from(mant) * k, &BigUint::from(1u8), exp)
                    .unwrap_or(LongDouble::Inf { neg })
            }
        }
    }

    /// The least integer not below the value (`ceill`), saturated to the
    /// range of an `i128` (infinities included).
    pub fn ceil_i128(&self) -> i128 {
        let (neg, mant, exp) = match *self {
            LongDouble::Inf { neg: true } => return i128::MIN,
            LongDouble::Inf { neg: false } => return i128::MAX,
            LongDouble::Finite { neg, mant, exp } => (neg, i128::from(mant), exp),
        };
        let magnitude_floor_or_ceil = if exp >= 0 {
            // Integer already; 2^63 × 2^64 is the most an i128 holds.
            if exp > 63 && mant != 0 {
                return if neg { i128::MIN } else { i128::MAX };
            }
            mant << exp
        } else if exp <= -64 {
            // Below one (the significand has at most 64 bits): 0 < |x| < 1.
            i128::from(!neg && mant != 0)
        } else {
            let shift = -exp;
            let whole = mant >> shift;
            let has_fraction = mant & ((1i128 << shift) - 1) != 0;
            // ceil rounds a positive value's magnitude up, a negative one's down.
            whole + i128::from(has_fraction && !neg)
        };
        if neg {
            -magnitude_floor_or_ceil
        } else {
            magnitude_floor_or_ceil
        }
    }

    /// The nearest `f64` (rounded once from the 64-bit significand, then
    /// scaled exactly): infinite past `f64::MAX`, zero below its subnormals.
    pub fn to_f64(&self) -> f64 {
        match *self {
            LongDouble::Inf { neg } => {
                if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            LongDouble::Finite { neg, mant, exp } => {
                let mut v = mant as f64;
                let mut e = exp;
                while e != 0 && v != 0.0 && v.is_finite() {
                    let step = e.clamp(-1000, 1000);
                    v *= 2f64.powi(step as i32);
                    e -= step;
                }
                if neg {
                    -v
                } else {
                    v
                }
            }
        }
    }

    /// The text Redis stores and replies for INCRBYFLOAT: `%.17Lf` (exact
    /// decimal value rounded to 17 decimals, ties to even as glibc does),
    /// then trailing zeros and a trailing `.` removed; `-0` becomes `0`.
    /// Infinity prints as `inf`/`-inf` (INCRBYFLOAT never stores it).
    pub fn to_human_string(&self) -> String {
        let &LongDouble::Finite { neg, mant, exp } = self else {
            return if matches!(self, LongDouble::Inf { neg: true }) {
                "-inf".into()
            } else {
                "inf".into()
            };
        };
        let scaled = BigUint::from(mant) * BigUint::from(10u8).pow(17);
        let n = if exp >= 0 {
            scaled << exp as u64
        } else {
            let d = BigUint::from(1u8) << (-exp) as u64;
            let (mut q, r) = scaled.div_rem(&d);
            let twice = r << 1u8;
            if twice > d || (twice == d && q.bit(0)) {
                q += 1u8;
            }
            q
        };
        let digits = format!("{n:0>18}");
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let mut out = String::with_capacity(digits.len() + 2);
        if neg {
            out.push('-');
        }
        out.push_str(int);
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        if out == "-0" {
            out = "0".into();
        }
        out
    }
}

/// A parse result: a value and whether the input was nonzero, or overflow.
enum Rounded {
    Value(LongDouble, bool),
    Overflow,
}

/// Digits (`[0-9]*` or hex), an optional `.` and more digits; returns the
/// digits without the dot, how many came after it, and the rest.
fn split_mantissa(s: &[u8], is_digit: fn(&u8) -> bool) -> Option<(Vec<u8>, i64, &[u8])> {
    let int_len = s.iter().take_while(|b| is_digit(b)).count();
    let mut digits = s[..int_len].to_vec();
    let mut rest = &s[int_len..];
    let mut frac = 0i64;
    if let Some(after) = rest.strip_prefix(b".") {
        let n = after.iter().take_while(|b| is_digit(b)).count();
        digits.extend_from_slice(&after[..n]);
        frac = n as i64;
        rest = &after[n..];
    }
    (!digits.is_empty()).then_some((digits, frac, rest))
}

/// An exponent after `e`/`p`: optional sign and at least one digit, the
/// whole rest of the input. Saturates far beyond any meaningful range.
fn parse_exponent(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0i64, |v, d| (v * 10 + i64::from(d - b'0')).min(1 << 40));
    Some(if neg { -v } else { v })
}

fn parse_decimal(neg: bool, s: &[u8]) -> Option<Rounded> {
    let (digits, frac, rest) = split_mantissa(s, u8::is_ascii_digit)?;
    let exp10 = match rest {
        [] => 0,
        [b'e' | b'E', e @ ..] => parse_exponent(e)?,
        _ => return None,
    };
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Some(Rounded::Value(
            LongDouble::Finite {
                neg,
                mant: 0,
                exp: 0,
            },
            false,
        ));
    };
    let digits = &digits[first..];
    let k = exp10 - frac; // value = digits * 10^k
    let sci = digits.len() as i64 - 1 + k; // decimal exponent of the first digit
    if sci > 4933 {
        return Some(Rounded::Overflow);
    }
    if sci < -4952 {
        let zero = LongDouble::Finite {
            neg,
            mant: 0,
            exp: 0,
        };
        return Some(Rounded::Value(zero, true));
    }
    let d = BigUint::parse_bytes(digits, 10)?;
    let ten = BigUint::from(10u8);
    let rounded = if k >= 0 {
        round(neg, d * ten.pow(k as u32), &BigUint::from(1u8), 0)
    } else {
        round(neg, d, &ten.pow((-k) as u32), 0)
    };
    Some(rounded.map_or(Rounded::Overflow, |v| Rounded::Value(v, true)))
}

fn parse_hex(neg: bool, s: &[u8]) -> Option<Rounded> {
    let (digits, frac, rest) = split_mantissa(s, u8::is_ascii_hexdigit)?;
    let exp2 = match rest {
        [] => 0,
        [b'p' | b'P', e @ ..] => parse_exponent(e)?,
        _ => return None,
    };
    let h = BigUint::parse_bytes(&digits, 16)?;
    if h.bits() == 0 {
        return Some(Rounded::Value(
            LongDouble::Finite {
                neg,
                mant: 0,
                exp: 0,
            },
            false,
        ));
    }
    let e = exp2 - 4 * frac; // value = h * 2^e
    let top = h.bits() as i64 + e;
    if top > MAX_EXP_EXCLUSIVE + 1 {
        return Some(Rounded::Overflow);
    }
    if top < MIN_LSB_EXP - 1 {
        let zero = LongDouble::Finite {
            neg,
            mant: 0,
            exp: 0,
        };
        return Some(Rounded::Value(zero, true));
    }
    let rounded = round(neg, h, &BigUint::from(1u8), e);
    Some(rounded.map_or(Rounded::Overflow, |v| Rounded::Value(v, true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(cur: &str, by: &str) -> Option<String> {
        let a = LongDouble::parse(cur.as_bytes())?;
        let b = LongDouble::parse(by.as_bytes())?;
        a.add(&b).map(|v| v.to_human_string())
    }

    /// Blocking timeouts: seconds × 1000 in long double, then `ceill`
    /// (`getTimeoutFromObjectOrReply`).
    #[test]
    fn seconds_times_1000_rounded_up() {
        let ms = |s: &str| {
            LongDouble::parse(s.as_bytes())
                .unwrap()
                .mul_u64(1000)
                .ceil_i128()
        };
        assert_eq!(ms("0x1p-3"), 125);
        assert_eq!(ms("0x1"), 1000);
        assert_eq!(ms("1.5"), 1500);
        assert_eq!(ms("0.0001"), 1);
        assert_eq!(ms("0.001"), 1);
        assert_eq!(ms("0.0011"), 2);
        assert_eq!(ms("1e-4000"), 1);
        assert_eq!(ms("-0.0001"), 0);
        assert_eq!(ms("-0"), 0);
        assert_eq!(ms("-1.0005"), -1000);
        assert_eq!(ms("-2"), -2000);
        assert_eq!(ms("9223372036854775.807"), 9223372036854775807);
        assert_eq!(ms("9223372036854775.808"), 9223372036854775808);
        assert_eq!(ms("1e300"), i128::MAX);
        assert_eq!(ms("-1e300"), i128::MIN);
        assert_eq!(ms("inf"), i128::MAX);
        assert_eq!(ms("-inf"), i128::MIN);
        // The product is rounded to 64 significant bits before ceil:
        // (2^64 - 1) × 1000 needs 74 bits and rounds to the nearest
        // multiple of 2^10 (what gcc's x87 `ceill(x * 1000.0L)` gives).
        assert_eq!(ms("18446744073709551615"), 18446744073709551614976);
        // 1e4930 s is finite as a long double (the largest is about
        // 1.19e4932); × 1000 overflows to inf.
        assert_eq!(
            LongDouble::parse(b"1e4930").unwrap().mul_u64(1000),
            LongDouble::Inf { neg: false }
        );
    }

    /// Answers of redis-server 7.0.15 (x86-64) to INCRBYFLOAT.
    #[test]
    fn matches_redis_incrbyfloat() {
        assert_eq!(incr("11.1", "0x10").as_deref(), Some("27.1"));
        assert_eq!(incr("10.5", "0.1").as_deref(), Some("10.6"));
        assert_eq!(incr("5.0e3", "2.0e2").as_deref(), Some("5200"));
        assert_eq!(incr("0", "1.23e-5").as_deref(), Some("0.0000123"));
        assert_eq!(incr("-0.1", "0.1").as_deref(), Some("0"));
        assert_eq!(incr("3", "1e-20").as_deref(), Some("3"));
        assert_eq!(incr("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(incr("0", "0x1p-3").as_deref(), Some("0.125"));
        assert_eq!(incr("0", "1e-4940").as_deref(), Some("0"));
        assert_eq!(
            incr("0", "123456789012345678901234567890").as_deref(),
            Some("123456789012345678899921813504")
        );
        let once = incr("0", "1e308").unwrap();
        assert_eq!(once.len(), 308);
        assert_eq!(once, "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539320446747225054013223152134749593960583597420814430196418767959100019603190778663109604507106667939153395788938914560543563061268364901618630217086589253444881623791300855757318142424510452728255046343928578048");
        let twice = incr(&once, "1e308").unwrap();
        assert_eq!(twice.len(), 309);
        assert_eq!(twice, "199999999999999999993371759311691291321120199694831134415594095989843469737676123744200253843777078640893494450108026446304269499187921167194841628860392837535918200039206381557326219209014213335878306791577877829121087126122536729803237260434173178506889763247582601711514636284849020905456510092687857156096");
        assert_eq!(incr("0", "inf"), None);
        assert_eq!(incr("1e4932", "1e4932"), None);
    }

    #[test]
    fn to_f64_rounds_once() {
        let f = |t: &str| LongDouble::parse(t.as_bytes()).unwrap().to_f64();
        assert_eq!(f("0x10"), 16.0);
        assert_eq!(f("99.9"), 99.9);
        assert_eq!(f("-2.5"), -2.5);
        assert_eq!(f("1e400"), f64::INFINITY);
        assert_eq!(f("1e-400"), 0.0);
        assert_eq!(f("4.9406564584124654e-324"), 5e-324);
    }

    #[test]
    fn parse_refuses_what_string2ld_refuses() {
        for bad in [
            "",
            " 1",
            "1 ",
            "nan",
            "-nan",
            "1e",
            "0x",
            "1.2.3",
            "e5",
            ".",
            "1e-5000",
            "1e5000",
            "0x1p99999",
            "abc",
            "--1",
        ] {
            assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad:?}");
        }
        for good in [
            "0",
            "-0",
            ".5",
            "5.",
            "+1",
            "0x.8",
            "1E3",
            "INF",
            "-Infinity",
            "0e99999",
        ] {
            assert!(LongDouble::parse(good.as_bytes()).is_some(), "{good:?}");
        }
        assert_eq!(LongDouble::parse(b"0x.8").unwrap().to_human_string(), "0.5");
        assert_eq!(LongDouble::parse(&vec![b'1'; 6000]), None);
    }
}
