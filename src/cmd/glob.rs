//! Glob-style pattern matching for KEYS, SCAN MATCH and CONFIG GET.
//!
//! Supported syntax, as Redis understands it:
//! * `*` any run of bytes (but, like Redis, never matches an empty text on its own:
//!   callers special-case the pattern `*` as "everything"),
//! * `?` exactly one byte,
//! * `[abc]`, `[^abc]`, `[a-z]` (reversed ranges such as `[z-a]` work too), an
//!   unterminated `[...` is closed at the end of the pattern,
//! * `\x` matches `x` literally, inside and outside brackets; a trailing `\`
//!   matches a backslash.

/// How deep `*` may recurse before the match is given up (Redis uses the same bound).
const MAX_NESTING: usize = 1000;

/// Whether `text` matches the glob `pattern`; `nocase` folds ASCII case.
///
/// # Source
/// `stringmatchlen`, redis/src/util.c (7.x): same syntax and the same results,
/// including the "no longer match can succeed" shortcut that bounds backtracking.
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let mut give_up = false;
    match_from(pattern, text, nocase, &mut give_up, 0)
}

/// Whether the pattern is `*`, which matches every key (even the empty one).
pub fn is_match_all(pattern: &[u8]) -> bool {
    pattern == b"*"
}

fn same(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

fn match_from(mut p: &[u8], mut s: &[u8], nocase: bool, give_up: &mut bool, depth: usize) -> bool {
    if depth > MAX_NESTING {
        return false;
    }
    while let (Some(&pc), Some(&sc)) = (p.first(), s.first()) {
        match pc {
            b'*' => {
                while p.get(1) == Some(&b'*') {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                let rest = &p[1..];
                while !s.is_empty() {
                    if match_from(rest, s, nocase, give_up, depth + 1) {
                        return true;
                    }
                    if *give_up {
                        return false;
                    }
                    s = &s[1..];
                }
                // The rest of the pattern failed against every suffix, so no
                // outer `*` can succeed by consuming more text either.
                *give_up = true;
                return false;
            }
            b'?' => {}
            b'[' => {
                let (consumed, matched) = match_class(p, sc, nocase);
                if !matched {
                    return false;
                }
                // leave `p` on the class's last byte; the common advance below skips it
                p = &p[consumed - 1..];
            }
            b'\\' => {
                if p.len() >= 2 {
                    p = &p[1..];
                }
                if !same(p[0], sc, nocase) {
                    return false;
                }
            }
            _ => {
                if !same(pc, sc, nocase) {
                    return false;
                }
            }
        }
        s = &s[1..];
        p = &p[1..];
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

/// Match byte `c` against the class starting at `p[0] == b'['`. Returns how many
/// pattern bytes the class spans (through its `]`, or to the pattern's end) and
/// whether `c` is in it.
fn match_class(p: &[u8], c: u8, nocase: bool) -> (usize, bool) {
    let mut i = 1;
    let negate = p.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    loop {
        let rem = p.len().saturating_sub(i);
        if rem == 0 {
            // unterminated class: it ends with the pattern
            return (p.len(), hit != negate);
        }
        let b = p[i];
        if b == b'\\' && rem >= 2 {
            i += 1;
            if p[i] == c {
                hit = true;
            }
        } else if b == b']' {
            return (i + 1, hit != negate);
        } else if rem >= 3 && p[i + 1] == b'-' {
            let (mut lo, mut hi, mut ch) = (b, p[i + 2], c);
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            if nocase {
                lo = lo.to_ascii_lowercase();
                hi = hi.to_ascii_lowercase();
                ch = ch.to_ascii_lowercase();
            }
            if (lo..=hi).contains(&ch) {
                hit = true;
            }
            i += 2;
        } else if same(b, c, nocase) {
            hit = true;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes(), false)
    }

    #[test]
    fn stars_and_questions() {
        assert!(m("*", "abc"));
        assert!(!m("*", ""));
        assert!(m("", ""));
        assert!(m("a*", "a"));
        assert!(m("*a", "a"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("**x**", "x"));
        assert!(!m("a", "ab"));
    }

    #[test]
    fn classes() {
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("[\\]]", "]"));
        assert!(!m("[]", "a"));
        assert!(m("a[bc", "ab"));
        assert!(!m("a[", "ab"));
        assert!(!m("a[", "a"));
        assert!(glob_match(b"H[A-B]LLO", b"hbllo", true));
        assert!(!glob_match(b"H[A-B]LLO", b"hbllo", false));
    }

    #[test]
    fn escapes() {
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "aXb"));
        assert!(m("a\\", "a\\"));
        assert!(m("\\?", "?"));
        assert!(!m("\\?", "x"));
    }

    #[test]
    fn pathological_backtracking_terminates() {
        let p = "a*".repeat(30) + "b";
        assert!(!m(&p, &"a".repeat(60)));
    }
}
