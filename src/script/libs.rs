//! The Lua libraries Redis exposes to scripts besides the standard ones:
//! `bit` (LuaBitOp's API), `struct` (binary packing), `cjson` (JSON) and
//! `cmsgpack` (MessagePack). Our own implementations of those APIs.
//!
//! # Source
//! "Runtime libraries", Redis's Lua API reference (redis.io); LuaBitOp,
//! lua-struct, lua-cjson and lua-cmsgpack's documented behaviour.

use mlua::{LightUserData, Lua, MultiValue, Table, Value, Variadic};

type LResult<T> = mlua::Result<T>;

/// `msg` as a Lua error raised at the calling script line
/// (`user_script:1: msg`), as `luaL_error` in the C libraries reports it.
fn located(lua: &Lua, e: mlua::Error) -> mlua::Error {
    let msg = match &e {
        mlua::Error::RuntimeError(m) => m.clone(),
        other => other.to_string(),
    };
    let place = lua
        .inspect_stack(1, |d| {
            let src = d.source().short_src.map(|s| s.into_owned());
            (src, d.current_line())
        })
        .and_then(|(src, line)| Some(format!("{}:{}: ", src?, line?)));
    mlua::Error::runtime(format!("{}{msg}", place.unwrap_or_default()))
}

/// Run a level of a recursive conversion, moving to a fresh heap-allocated
/// stack segment when little is left (nested input must not overflow a
/// shard thread's stack, whatever the build's frame sizes).
pub fn grow<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(64 * 1024, 1024 * 1024, f)
}

/// Deepest MessagePack nesting `cmsgpack.unpack` reads (a bound on its
/// recursion on a shard thread's stack).
const MAX_DECODE_DEPTH: usize = 200;

fn num(v: &Value) -> LResult<f64> {
    match v {
        Value::Integer(n) => Ok(*n as f64),
        Value::Number(n) => Ok(*n),
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| mlua::Error::runtime("bad argument (number expected, got string)")),
        other => Err(mlua::Error::runtime(format!(
            "bad argument (number expected, got {})",
            other.type_name()
        ))),
    }
}

/// LuaBitOp's normalisation of a number to a signed 32-bit integer.
fn tobit(n: f64) -> i32 {
    let n = n.trunc();
    (n.rem_euclid(4_294_967_296.0) as u64 as u32) as i32
}

fn bits(args: &MultiValue) -> LResult<Vec<i32>> {
    args.iter().map(|v| num(v).map(tobit)).collect()
}

fn first_bits(args: &MultiValue) -> LResult<i32> {
    bits(args)?
        .first()
        .copied()
        .ok_or_else(|| mlua::Error::runtime("bad argument #1 (number expected, got no value)"))
}

/// `bit`: tobit, tohex, bnot, band, bor, bxor, lshift, rshift, arshift, rol, ror, bswap.
pub fn bit(lua: &Lua) -> LResult<Table> {
    let t = lua.create_table()?;
    t.set(
        "tobit",
        lua.create_function(|_, a: MultiValue| first_bits(&a))?,
    )?;
    t.set(
        "bnot",
        lua.create_function(|_, a: MultiValue| Ok(!first_bits(&a)?))?,
    )?;
    let fold = |lua: &Lua, f: fn(i32, i32) -> i32| {
        lua.create_function(move |_, a: MultiValue| {
            let v = bits(&a)?;
            let Some((&first, rest)) = v.split_first() else {
                return Err(mlua::Error::runtime(
                    "bad argument #1 (number expected, got no value)",
                ));
            };
            Ok(rest.iter().fold(first, |acc, &x| f(acc, x)))
        })
    };
    t.set("band", fold(lua, |a, b| a & b)?)?;
    t.set("bor", fold(lua, |a, b| a | b)?)?;
    t.set("bxor", fold(lua, |a, b| a ^ b)?)?;
    let shift = |lua: &Lua, f: fn(i32, u32) -> i32| {
        lua.create_function(move |_, (x, n): (Value, Value)| {
            let x = tobit(num(&x)?);
            let n = (tobit(num(&n)?) & 31) as u32;
            Ok(f(x, n))
        })
    };
    t.set("lshift", shift(lua, |x, n| ((x as u32) << n) as i32)?)?;
    t.set("rshift", shift(lua, |x, n| ((x as u32) >> n) as i32)?)?;
    t.set("arshift", shift(lua, |x, n| x >> n)?)?;
    t.set("rol", shift(lua, |x, n| (x as u32).rotate_left(n) as i32)?)?;
    t.set("ror", shift(lua, |x, n| (x as u32).rotate_right(n) as i32)?)?;
    t.set(
        "bswap",
        lua.create_function(|_, a: MultiValue| Ok(first_bits(&a)?.swap_bytes()))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|_, (x, n): (Value, Option<Value>)| {
            let x = tobit(num(&x)?) as u32;
            let n = match n {
                Some(v) => tobit(num(&v)?),
                None => 8,
            };
            let upper = n < 0;
            let digits = n.unsigned_abs().min(8) as usize;
            let full = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            Ok(full[8 - digits..].to_string())
        })?,
    )?;
    Ok(t)
}

/// One item of a `struct` format.
struct Item {
    kind: u8,
    size: usize,
}

/// Parse a `struct` format into items and the byte order (`true` = little endian).
fn struct_format(fmt: &[u8]) -> LResult<Vec<(Item, bool)>> {
    let mut out = Vec::new();
    let mut little = cfg!(target_endian = "little");
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        let mut digits = 0usize;
        let mut has_digits = false;
        while i < fmt.len() && fmt[i].is_ascii_digit() {
            digits = digits
                .saturating_mul(10)
                .saturating_add(usize::from(fmt[i] - b'0'));
            has_digits = true;
            i += 1;
        }
        let size = match c {
            b'<' => {
                little = true;
                continue;
            }
            b'>' => {
                little = false;
                continue;
            }
            b'=' => {
                little = cfg!(target_endian = "little");
                continue;
            }
            b'!' | b' ' => continue,
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' => 8,
            b'i' | b'I' => {
                if has_digits {
                    digits
                } else {
                    4
                }
            }
            b'f' => 4,
            b'd' => 8,
            b's' => 0,
            b'c' => digits,
            other => {
                return Err(mlua::Error::runtime(format!(
                    "invalid format option '{}'",
                    other as char
                )))
            }
        };
        if matches!(c, b'i' | b'I') && !(1..=8).contains(&size) {
            return Err(mlua::Error::runtime(format!(
                "integral size {size} is larger than limit of 8"
            )));
        }
        out.push((Item { kind: c, size }, little));
    }
    Ok(out)
}

fn put_int(out: &mut Vec<u8>, v: i64, size: usize, little: bool) {
    let bytes = v.to_le_bytes();
    let mut b: Vec<u8> = bytes[..size].to_vec();
    if !little {
        b.reverse();
    }
    out.extend_from_slice(&b);
}

fn get_int(data: &[u8], signed: bool, little: bool) -> i64 {
    let mut v: u64 = 0;
    let n = data.len();
    for k in 0..n {
        let byte = if little { data[n - 1 - k] } else { data[k] };
        v = (v << 8) | u64::from(byte);
    }
    if signed && n < 8 && n > 0 && (v >> (n * 8 - 1)) & 1 == 1 {
        v |= !0u64 << (n * 8);
    }
    v as i64
}

/// `struct`: pack, unpack, size (formats `<>=!`, `b B h H l L T i[n] I[n] f d s c[n] x`).
pub fn structlib(lua: &Lua) -> LResult<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, (fmt, args): (mlua::LuaString, Variadic<Value>)| {
            let mut out = Vec::new();
            let mut next = args.into_iter();
            let mut arg = |n: usize| {
                next.next().ok_or_else(|| {
                    mlua::Error::runtime(format!("bad argument #{n} to 'pack' (no value)"))
                })
            };
            for (n, (item, little)) in struct_format(&fmt.as_bytes())?.into_iter().enumerate() {
                match item.kind {
                    b'x' => out.push(0),
                    b'f' => {
                        let v = num(&arg(n + 2)?)? as f32;
                        let b = if little {
                            v.to_le_bytes()
                        } else {
                            v.to_be_bytes()
                        };
                        out.extend_from_slice(&b);
                    }
                    b'd' => {
                        let v = num(&arg(n + 2)?)?;
                        let b = if little {
                            v.to_le_bytes()
                        } else {
                            v.to_be_bytes()
                        };
                        out.extend_from_slice(&b);
                    }
                    b's' | b'c' => {
                        let v = arg(n + 2)?;
                        let s = lua.coerce_string(v)?.ok_or_else(|| {
                            mlua::Error::runtime("bad argument (string expected)")
                        })?;
                        let bytes = s.as_bytes();
                        if item.kind == b's' {
                            out.extend_from_slice(&bytes);
                            out.push(0);
                        } else {
                            let size = if item.size == 0 {
                                bytes.len()
                            } else {
                                item.size
                            };
                            if bytes.len() < size {
                                return Err(mlua::Error::runtime("string too short"));
                            }
                            out.extend_from_slice(&bytes[..size]);
                        }
                    }
                    _ => {
                        let v = num(&arg(n + 2)?)?;
                        put_int(&mut out, v as i64, item.size, little);
                    }
                }
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(
            |lua, (fmt, data, start): (mlua::LuaString, mlua::LuaString, Option<i64>)| {
                let data = data.as_bytes();
                let mut pos = usize::try_from(start.unwrap_or(1).max(1) - 1).unwrap_or(0);
                let mut out = Vec::new();
                let too_short = || mlua::Error::runtime("data string too short");
                for (item, little) in struct_format(&fmt.as_bytes())? {
                    match item.kind {
                        b'x' => pos = pos.saturating_add(1),
                        b's' => {
                            let rest = data.get(pos..).ok_or_else(too_short)?;
                            let end = rest.iter().position(|&b| b == 0).ok_or_else(too_short)?;
                            out.push(Value::String(lua.create_string(&rest[..end])?));
                            pos += end + 1;
                        }
                        b'c' => {
                            let size = if item.size == 0 {
                                match out.pop() {
                                    Some(Value::Number(n)) if n >= 0.0 => n as usize,
                                    Some(Value::Integer(n)) => usize::try_from(n).unwrap_or(0),
                                    _ => 0,
                                }
                            } else {
                                item.size
                            };
                            let end = pos.checked_add(size).ok_or_else(too_short)?;
                            let b = data.get(pos..end).ok_or_else(too_short)?;
                            out.push(Value::String(lua.create_string(b)?));
                            pos = end;
                        }
                        b'f' => {
                            let b: [u8; 4] = data
                                .get(pos..pos + 4)
                                .and_then(|s| s.try_into().ok())
                                .ok_or_else(too_short)?;
                            let v = if little {
                                f32::from_le_bytes(b)
                            } else {
                                f32::from_be_bytes(b)
                            };
                            out.push(Value::Number(f64::from(v)));
                            pos += 4;
                        }
                        b'd' => {
                            let b: [u8; 8] = data
                                .get(pos..pos + 8)
                                .and_then(|s| s.try_into().ok())
                                .ok_or_else(too_short)?;
                            let v = if little {
                                f64::from_le_bytes(b)
                            } else {
                                f64::from_be_bytes(b)
                            };
                            out.push(Value::Number(v));
                            pos += 8;
                        }
                        k => {
                            let b = data.get(pos..pos + item.size).ok_or_else(too_short)?;
                            let signed = k.is_ascii_lowercase();
                            out.push(Value::Number(get_int(b, signed, little) as f64));
                            pos += item.size;
                        }
                    }
                }
                out.push(Value::Number((pos + 1) as f64));
                Ok(MultiValue::from_iter(out))
            },
        )?,
    )?;
    t.set(
        "size",
        lua.create_function(|_, fmt: mlua::LuaString| {
            let mut total = 0usize;
            for (item, _) in struct_format(&fmt.as_bytes())? {
                if item.kind == b's' || (item.kind == b'c' && item.size == 0) {
                    return Err(mlua::Error::runtime(
                        "options 'c0' - 's' have undefined sizes",
                    ));
                }
                total += item.size;
            }
            Ok(total)
        })?,
    )?;
    Ok(t)
}

/// `cjson.null`: a light userdata, as lua-cjson's.
fn json_null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// A table's array length when its keys are exactly 1..n, else `None`.
fn array_len(t: &Table) -> Option<usize> {
    let mut max = 0usize;
    let mut count = 0usize;
    for (k, _) in t.pairs::<Value, Value>().flatten() {
        let n = match k {
            Value::Integer(n) if n >= 1 => n as usize,
            Value::Number(n) if n >= 1.0 && n == n.trunc() => n as usize,
            _ => return None,
        };
        max = max.max(n);
        count += 1;
    }
    (max == count).then_some(max)
}

fn json_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            b => out.push(b),
        }
    }
    out.push(b'"');
}

fn json_encode(out: &mut Vec<u8>, v: &Value, depth: usize) -> LResult<()> {
    grow(|| json_encode_at(out, v, depth))
}

fn json_encode_at(out: &mut Vec<u8>, v: &Value, depth: usize) -> LResult<()> {
    if depth > 1000 {
        return Err(mlua::Error::runtime(
            "Cannot serialise, excessive nesting (1001)",
        ));
    }
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Number(n) => {
            if n.is_nan() || n.is_infinite() {
                return Err(mlua::Error::runtime(
                    "Cannot serialise number: must not be NaN or Inf",
                ));
            }
            out.extend_from_slice(crate::script::lua::lua_number_text(*n).as_bytes())
        }
        Value::String(s) => json_string(out, &s.as_bytes()),
        Value::Table(t) => match array_len(t) {
            Some(n) if n > 0 => {
                out.push(b'[');
                for i in 1..=n {
                    if i > 1 {
                        out.push(b',');
                    }
                    json_encode(out, &t.raw_get::<Value>(i)?, depth + 1)?;
                }
                out.push(b']');
            }
            _ => {
                out.push(b'{');
                let mut first = true;
                for (k, val) in t.pairs::<Value, Value>().flatten() {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    match &k {
                        Value::String(s) => json_string(out, &s.as_bytes()),
                        Value::Integer(n) => json_string(out, n.to_string().as_bytes()),
                        Value::Number(n) => {
                            json_string(out, crate::script::lua::lua_number_text(*n).as_bytes())
                        }
                        _ => {
                            return Err(mlua::Error::runtime(
                                "Cannot serialise table: table key must be a number or string",
                            ))
                        }
                    }
                    out.push(b':');
                    json_encode(out, &val, depth + 1)?;
                }
                out.push(b'}');
            }
        },
        other => {
            return Err(mlua::Error::runtime(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn json_to_lua(lua: &Lua, v: serde_json::Value) -> LResult<Value> {
    grow(|| json_to_lua_at(lua, v))
}

fn json_to_lua_at(lua: &Lua, v: serde_json::Value) -> LResult<Value> {
    Ok(match v {
        serde_json::Value::Null => json_null(),
        serde_json::Value::Bool(b) => Value::Boolean(b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(lua.create_string(&s)?),
        serde_json::Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, json_to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(map) => {
            let t = lua.create_table()?;
            for (k, item) in map {
                t.raw_set(k, json_to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
    })
}

/// `cjson`: encode, decode, null (and the configuration calls as no-ops).
pub fn cjson(lua: &Lua) -> LResult<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let mut out = Vec::new();
            json_encode(&mut out, &v, 0).map_err(|e| located(lua, e))?;
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, s: mlua::LuaString| {
            let v: serde_json::Value = serde_json::from_slice(&s.as_bytes()).map_err(|e| {
                located(
                    lua,
                    mlua::Error::runtime(format!(
                        "Expected value but found invalid token at character {}",
                        e.column().max(1)
                    )),
                )
            })?;
            json_to_lua(lua, v)
        })?,
    )?;
    t.set("null", json_null())?;
    for name in [
        "encode_keep_buffer",
        "encode_max_depth",
        "decode_max_depth",
        "encode_number_precision",
        "encode_invalid_numbers",
        "decode_invalid_numbers",
        "encode_sparse_array",
    ] {
        t.set(name, lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    }
    Ok(t)
}

fn mp_encode(out: &mut Vec<u8>, v: &Value, depth: usize) -> LResult<()> {
    grow(|| mp_encode_at(out, v, depth))
}

fn mp_encode_at(out: &mut Vec<u8>, v: &Value, depth: usize) -> LResult<()> {
    let int = |out: &mut Vec<u8>, n: i64| {
        if (0..128).contains(&n) {
            out.push(n as u8);
        } else if (-32..0).contains(&n) {
            out.push(n as i8 as u8);
        } else if n >= 0 {
            if n <= 0xff {
                out.push(0xcc);
                out.push(n as u8);
            } else if n <= 0xffff {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else if n <= 0xffff_ffff {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            } else {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        } else if n >= -128 {
            out.push(0xd0);
            out.push(n as i8 as u8);
        } else if n >= -32768 {
            out.push(0xd1);
            out.extend_from_slice(&(n as i16).to_be_bytes());
        } else if n >= -2_147_483_648 {
            out.push(0xd2);
            out.extend_from_slice(&(n as i32).to_be_bytes());
        } else {
            out.push(0xd3);
            out.extend_from_slice(&n.to_be_bytes());
        }
    };
    let len_header = |out: &mut Vec<u8>, n: usize, fix: u8, fix_max: usize, c16: u8, c32: u8| {
        if n <= fix_max {
            out.push(fix | n as u8);
        } else if n <= 0xffff {
            out.push(c16);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(c32);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    };
    if depth > 16 {
        out.push(0xc0);
        return Ok(());
    }
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => int(out, *n),
        Value::Number(n) if *n == n.trunc() && n.abs() < 9.2e18 => int(out, *n as i64),
        Value::Number(n) => {
            let f = *n as f32;
            if f64::from(f) == *n {
                out.push(0xca);
                out.extend_from_slice(&f.to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            if b.len() < 32 {
                out.push(0xa0 | b.len() as u8);
            } else if b.len() <= 0xff {
                out.push(0xd9);
                out.push(b.len() as u8);
            } else {
                len_header(out, b.len(), 0xa0, 31, 0xda, 0xdb);
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) => match array_len(t) {
            Some(n) if n > 0 => {
                len_header(out, n, 0x90, 15, 0xdc, 0xdd);
                for i in 1..=n {
                    mp_encode(out, &t.raw_get::<Value>(i)?, depth + 1)?;
                }
            }
            _ => {
                let pairs: Vec<(Value, Value)> = t.pairs::<Value, Value>().flatten().collect();
                len_header(out, pairs.len(), 0x80, 15, 0xde, 0xdf);
                for (k, val) in pairs {
                    mp_encode(out, &k, depth + 1)?;
                    mp_encode(out, &val, depth + 1)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

fn mp_decode(lua: &Lua, data: &[u8], pos: &mut usize, depth: usize) -> LResult<Value> {
    grow(|| mp_decode_at(lua, data, pos, depth))
}

fn mp_decode_at(lua: &Lua, data: &[u8], pos: &mut usize, depth: usize) -> LResult<Value> {
    let bad = || mlua::Error::runtime("Missing bytes in input.");
    let take = |pos: &mut usize, n: usize| -> LResult<&[u8]> {
        let s = data.get(*pos..*pos + n).ok_or_else(bad)?;
        *pos += n;
        Ok(s)
    };
    let be = |b: &[u8]| b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
    if depth > MAX_DECODE_DEPTH {
        return Err(mlua::Error::runtime("Bad data format in input."));
    }
    let c = *take(pos, 1)?.first().ok_or_else(bad)?;
    let str_of = |pos: &mut usize, n: usize| -> LResult<Value> {
        let b = take(pos, n)?;
        Ok(Value::String(lua.create_string(b)?))
    };
    let arr_of = |pos: &mut usize, n: usize| -> LResult<Value> {
        let t = lua.create_table_with_capacity(n.min(1024), 0)?;
        for i in 0..n {
            t.raw_set(i + 1, mp_decode(lua, data, pos, depth + 1)?)?;
        }
        Ok(Value::Table(t))
    };
    let map_of = |pos: &mut usize, n: usize| -> LResult<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = mp_decode(lua, data, pos, depth + 1)?;
            let v = mp_decode(lua, data, pos, depth + 1)?;
            if k != Value::Nil {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    };
    Ok(match c {
        0x00..=0x7f => Value::Number(f64::from(c)),
        0x80..=0x8f => map_of(pos, usize::from(c & 0x0f))?,
        0x90..=0x9f => arr_of(pos, usize::from(c & 0x0f))?,
        0xa0..=0xbf => str_of(pos, usize::from(c & 0x1f))?,
        0xc0 => Value::Nil,
        0xc2 => Value::Boolean(false),
        0xc3 => Value::Boolean(true),
        0xca => Value::Number(f64::from(f32::from_bits(be(take(pos, 4)?) as u32))),
        0xcb => Value::Number(f64::from_bits(be(take(pos, 8)?))),
        0xcc => Value::Number(be(take(pos, 1)?) as f64),
        0xcd => Value::Number(be(take(pos, 2)?) as f64),
        0xce => Value::Number(be(take(pos, 4)?) as f64),
        0xcf => Value::Number(be(take(pos, 8)?) as f64),
        0xd0 => Value::Number(f64::from(be(take(pos, 1)?) as u8 as i8)),
        0xd1 => Value::Number(f64::from(be(take(pos, 2)?) as u16 as i16)),
        0xd2 => Value::Number(f64::from(be(take(pos, 4)?) as u32 as i32)),
        0xd3 => Value::Number(be(take(pos, 8)?) as i64 as f64),
        0xc4 | 0xd9 => {
            let n = be(take(pos, 1)?) as usize;
            str_of(pos, n)?
        }
        0xc5 | 0xda => {
            let n = be(take(pos, 2)?) as usize;
            str_of(pos, n)?
        }
        0xc6 | 0xdb => {
            let n = be(take(pos, 4)?) as usize;
            str_of(pos, n)?
        }
        0xdc => {
            let n = be(take(pos, 2)?) as usize;
            arr_of(pos, n)?
        }
        0xdd => {
            let n = be(take(pos, 4)?) as usize;
            arr_of(pos, n)?
        }
        0xde => {
            let n = be(take(pos, 2)?) as usize;
            map_of(pos, n)?
        }
        0xdf => {
            let n = be(take(pos, 4)?) as usize;
            map_of(pos, n)?
        }
        0xe0..=0xff => Value::Number(f64::from(c as i8)),
        _ => return Err(mlua::Error::runtime("Bad data format in input.")),
    })
}

/// `cmsgpack`: pack (each argument, concatenated) and unpack (every object).
pub fn cmsgpack(lua: &Lua) -> LResult<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(mlua::Error::runtime(
                    "MessagePack pack needs input. Maybe you want to pack nil?",
                ));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                mp_encode(&mut out, v, 0).map_err(|e| located(lua, e))?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let data = s.as_bytes();
            let mut pos = 0;
            let mut out = Vec::new();
            while pos < data.len() {
                out.push(mp_decode(lua, &data, &mut pos, 0).map_err(|e| located(lua, e))?);
            }
            Ok(MultiValue::from_iter(out))
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_ops_follow_luabitop() {
        let lua = Lua::new();
        lua.globals().set("bit", bit(&lua).unwrap()).unwrap();
        let check = |code: &str, want: &str| {
            let got: String = lua.load(format!("return tostring({code})")).eval().unwrap();
            assert_eq!(got, want, "{code}");
        };
        check("bit.band(7, 3)", "3");
        check("bit.tohex(255)", "000000ff");
        check("bit.tohex(-1, -4)", "FFFF");
        check("bit.bnot(0)", "-1");
        check("bit.lshift(1, 31)", "-2147483648");
        check("bit.rshift(-1, 28)", "15");
        check("bit.arshift(-256, 4)", "-16");
        check("bit.tobit(4294967297)", "1");
    }

    #[test]
    fn struct_round_trip() {
        let lua = Lua::new();
        lua.globals()
            .set("struct", structlib(&lua).unwrap())
            .unwrap();
        let s: mlua::LuaString = lua.load("return struct.pack('>I2', 258)").eval().unwrap();
        assert_eq!(&s.as_bytes()[..], b"\x01\x02");
        let (a, b, next): (i64, String, i64) = lua
            .load("return struct.unpack('<i4s', struct.pack('<i4s', -5, 'hi'))")
            .eval()
            .unwrap();
        assert_eq!((a, b.as_str(), next), (-5, "hi", 8));
        // Hostile formats answer errors, never panic.
        for code in [
            "return struct.unpack('c99999999999999999999999', 'x')",
            "return struct.unpack('xxxxc18446744073709551615', 'abc', 9223372036854775807)",
            "return struct.pack('i9', 1)",
            "return struct.size('s')",
        ] {
            assert!(lua.load(code).exec().is_err(), "{code}");
        }
    }

    #[test]
    fn json_and_msgpack() {
        let lua = Lua::new();
        lua.globals().set("cjson", cjson(&lua).unwrap()).unwrap();
        lua.globals()
            .set("cmsgpack", cmsgpack(&lua).unwrap())
            .unwrap();
        let s: String = lua
            .load("return cjson.encode({1, 2, 'a/b', true})")
            .eval()
            .unwrap();
        assert_eq!(s, r#"[1,2,"a\/b",true]"#);
        let n: f64 = lua
            .load(r#"return cjson.decode('[1,2.5,{"a":null}]')[2]"#)
            .eval()
            .unwrap();
        assert_eq!(n, 2.5);
        let s: mlua::LuaString = lua.load("return cmsgpack.pack({1, 2})").eval().unwrap();
        assert_eq!(&s.as_bytes()[..], b"\x92\x01\x02");
        let (a, b): (i64, String) = lua
            .load("local t = cmsgpack.unpack(cmsgpack.pack({7, 'x'})) return t[1], t[2]")
            .eval()
            .unwrap();
        assert_eq!((a, b.as_str()), (7, "x"));
    }
}
