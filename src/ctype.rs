//! C's `<ctype.h>` byte classes in the "C" locale, as Redis's own parsers
//! (`sdssplitargs`, `strtoull`) see bytes.

/// C's `isspace`: space, `\t`, `\n`, `\v` (0x0B), `\f` (0x0C), `\r`. Rust's
/// `u8::is_ascii_whitespace` leaves out the vertical tab.
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}
