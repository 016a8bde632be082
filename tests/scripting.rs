//! Scripting over real sockets: EVAL/EVALSHA/SCRIPT and FUNCTION/FCALL
//! compared reply for reply with a real redis-server, sandbox refusals,
//! scripts on the shard owning their keys, blocked readers served after a
//! script, -BUSY and SCRIPT KILL, functions surviving a restart through the
//! AOF, and a delayed-message script driven by redis-py's `register_script`.
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    assert_same_replies, eventually, test_config, RedisServer, RespClient, ScratchDir, TestServer,
};
use shardstream::config::Config;

/// Send each argv to both servers and assert identical replies.
fn same_argv(ours: &mut RespClient, theirs: &mut RespClient, cmds: &[&[&str]]) {
    for (n, argv) in cmds.iter().enumerate() {
        let a = ours.raw(argv);
        let b = theirs.raw(argv);
        assert_eq!(a, b, "command {n}: {argv:?}\n ours: {a:?}\nredis: {b:?}");
    }
}

#[test]
fn eval_replies_conversions_and_errors_match_redis() {
    let srv = TestServer::start(1);
    let mut ours = srv.client();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    assert_same_replies(
        &mut ours,
        &mut theirs,
        r##"
        # Lua -> RESP conversions
        EVAL "return 1" 0
        EVAL "return 3.99" 0
        EVAL "return -3.99" 0
        EVAL "return 'x'" 0
        EVAL "return true" 0
        EVAL "return false" 0
        EVAL "return nil" 0
        EVAL "return {1,2,3.7,'x',false,true,nil,5}" 0
        EVAL "return {1,{2,{3,{'four'}}}}" 0
        EVAL "return {ok='fine'}" 0
        EVAL "return {err='My err'}" 0
        EVAL "return {err='MYCODE with code'}" 0
        EVAL "return redis.error_reply('E2 x')" 0
        EVAL "return redis.error_reply('-E3 y')" 0
        EVAL "return redis.error_reply()" 0
        EVAL "return redis.error_reply('FAIL')" 0
        EVAL "return redis.error_reply('')" 0
        EVAL "return redis.error_reply('-')" 0
        EVAL "return redis.error_reply('-CODE two\r\n')" 0
        EVAL "return redis.error_reply('\r\nlead')" 0
        EVAL "return redis.error_reply('x\0y')" 0
        EVAL "return redis.error_reply('- x')" 0
        EVAL "return redis.error_reply(5)" 0
        EVAL "error({err=5})" 0
        EVAL "error({err=2.5})" 0
        EVAL "error(1e20)" 0
        EVAL "error(0.1)" 0
        EVAL "error(7)" 0
        EVAL "return {err='x\0y'}" 0
        EVAL "return {ok='a\0b'}" 0
        EVAL "return redis.status_reply('a\0b')" 0
        EVAL "return {err='X y\n'}" 0
        EVAL "return {err='-CODE two\r\n'}" 0
        EVAL "return {err='A\r\nB'}" 0
        SET {t}str abc
        EVAL "local ok, err = pcall(redis.call, 'incr', KEYS[1]) if not ok then return redis.error_reply(err) end" 1 {t}str
        EVAL "local ok, err = pcall(redis.call, 'incr', KEYS[1]) return {type(err), err}" 1 {t}str
        EVAL "local ok, err = pcall(error, {err='X y'}) return err" 0
        EVAL "local ok, v = pcall(function() return 7 end) return {ok and 1 or 0, v}" 0
        EVAL "error('boom\0hidden')" 0
        EVAL "return redis.status_reply('S')" 0
        EVAL "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2]}" 2 a b c d
        EVAL "return #ARGV" 0 x y z
        # RESP -> Lua conversions
        SET str v
        EVAL "return redis.call('get', 'str')" 0
        EVAL "return redis.call('get', 'nosuch')" 0
        EVAL "return type(redis.call('get', 'nosuch'))" 0
        # Stream entries (written straight from the nodes) read by a script
        XADD sx 1-1 a 1 b 2
        XADD sx 1-2 a 3 c 4
        EVAL "return redis.call('XRANGE', KEYS[1], '-', '+')" 1 sx
        EVAL "return redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)" 1 sx
        EVAL "return redis.call('XREAD', 'COUNT', 5, 'STREAMS', KEYS[1], '0')" 1 sx
        XGROUP CREATE sx g 0
        EVAL "return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', KEYS[1], '>')" 1 sx
        EVAL "return redis.call('XRANGE', KEYS[1], '-', '+')[2][2][3]" 1 sx
        EVAL "return redis.pcall('XrEaD', 'BLOCK', 0, 'STREAMS', KEYS[1], '$')" 1 sx
        EVAL "return redis.pcall('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', 0, 'STREAMS', KEYS[1], '>')" 1 sx
        EVAL "return redis.call('set', 'k', 'v')" 0
        EVAL "return redis.call('set', 'k', 'v')['ok']" 0
        EVAL "return redis.call('incr', 'n')" 0
        EVAL "return redis.call('ping')" 0
        EVAL "return redis.call('echo', 1.5)" 0
        EVAL "return redis.call('echo', 10)" 0
        EVAL "return redis.call('echo', 1e20)" 0
        EVAL "return redis.call('xadd', 's', '1-1', 'f', 'v')" 0
        EVAL "return redis.call('xrange', 's', '-', '+')" 0
        EVAL "return redis.call('xlen', 's')" 0
        EVAL "return redis.call('exists', 'k', 's', 'nosuch')" 0
        EVAL "return redis.call('type', 's')['ok']" 0
        EVAL "redis.call('del', 'n'); return redis.call('incrbyfloat', 'n', '1.5')" 0
        # Stream commands from scripts
        EVAL "return redis.call('xgroup', 'create', 's', 'g', '0')" 0
        EVAL "return redis.call('xgroup', 'create', 's', 'g', '0')" 0
        EVAL "return redis.call('xreadgroup', 'group', 'g', 'c', 'count', '10', 'streams', 's', '>')" 0
        EVAL "return redis.call('xreadgroup', 'group', 'g', 'c', 'streams', 's', '>')" 0
        EVAL "return redis.call('xpending', 's', 'g')" 0
        EVAL "return redis.call('xack', 's', 'g', '1-1')" 0
        EVAL "return redis.pcall('xreadgroup', 'group', 'nog', 'c', 'streams', 's', '>')" 0
        EVAL "return redis.call('xadd', 's', '1-1', 'f', 'v')" 0
        EVAL "return redis.pcall('xadd', 's', 'bad', 'f', 'v')" 0
        EVAL "return redis.call('xread', 'count', '1', 'streams', 's', '0')" 0
        EVAL "return redis.call('xrevrange', 's', '+', '-', 'count', '1')" 0
        EVAL "return redis.call('xtrim', 's', 'maxlen', '0')" 0
        EVAL "return redis.call('expire', 's', '100')" 0
        EVAL "return redis.call('ttl', 's')" 0
        SET src v
        EVAL "return redis.call('rename', 'src', 'dst')" 0
        EVAL "return redis.call('renamenx', 'dst', 'str')" 0
        EVAL "return redis.call('rename', 'nosuch', 'x')" 0
        EVAL "return redis.call('copy', 'dst', 'dst2')" 0
        EVAL "return redis.call('copy', 'dst', 'dst2')" 0
        EVAL "return redis.call('copy', 'dst', 'dst2', 'REPLACE')" 0
        EVAL "return redis.call('copy', 'dst', 'dst3', 'DB', 1)" 0
        EVAL "return redis.call('copy', 'dst', 'dst3', 'BOGUS')" 0
        EVAL "redis.call('select', 1) return redis.call('get', 'dst3')" 0
        EVAL "return redis.call('get', 'dst3')" 0
        # Errors of redis.call / pcall
        EVAL "return redis.call('nosuch')" 0
        EVAL "return redis.call()" 0
        EVAL "return redis.call('get')" 0
        EVAL "return redis.call('get', {})" 0
        EVAL "return redis.call('multi')" 0
        EVAL "return redis.call('eval', 'return 1', 0)" 0
        EVAL "return redis.call('incr', 'str')" 0
        EVAL "return redis.pcall('incr', 'str')" 0
        EVAL "return redis.pcall('nosuch')['err']" 0
        EVAL "local t = redis.pcall('get', 'a', 'b'); return t['err']" 0
        EVAL "return redis.pcall('xgroup', 'create')['err']" 0
        EVAL "return redis.pcall('xgroup', 'nosuch')['err']" 0
        EVAL "return redis.pcall('object', 'encoding')['err']" 0
        EVAL "return redis.pcall('xgroup')['err']" 0
        EVAL "return redis.call('object', 'encoding', 'str')" 0
        EVAL "return redis.call('xread', 'block', '0', 'streams', 's', '0')" 0
        EVAL "redis.call('incr', 'str')" 0
        EVAL "\n\nreturn redis.call('nosuch')" 0
        # Script errors
        EVAL "error('boom')" 0
        EVAL "error('MYERR x', 0)" 0
        EVAL "error({err='MYERR x'})" 0
        EVAL "error(5)" 0
        EVAL "return 'x' .. nil" 0
        EVAL "local a = {} ; a.b.c = 1" 0
        EVAL "return 1 +" 0
        EVAL "x(" 0
        # numkeys
        EVAL "return 1" x
        EVAL "return 1" -1
        EVAL "return 1" 2 a
        EVAL "return 1"
        # redis.* helpers
        EVAL "return redis.sha1hex('')" 0
        EVAL "return redis.sha1hex('abc')" 0
        EVAL "return redis.sha1hex()" 0
        EVAL "return redis.setresp(4)" 0
        EVAL "redis.setresp(2.5) return 1" 0
        EVAL "redis.setresp('3') return {1, 2}" 0
        EVAL "redis.setresp('x') return 1" 0
        EVAL "redis.setresp(1/0) return 1" 0
        EVAL "redis.log('x', 'y')" 0
        EVAL "redis.log(3.9, 'x') return 1" 0
        EVAL "redis.log(-0.5, 'x') return 1" 0
        EVAL "redis.log('2', 'x') return 1" 0
        EVAL "redis.log(redis.LOG_WARNING, 'from a test')" 0
        EVAL "return redis.LOG_NOTICE" 0
        EVAL "return redis.REPL_ALL" 0
        EVAL "return redis.replicate_commands()" 0
        EVAL "return redis.breakpoint()" 0
        EVAL "return _VERSION" 0
        # Libraries
        EVAL "return cjson.encode({1,2,{a=1}})" 0
        EVAL "return cjson.encode({})" 0
        EVAL "return cjson.decode('[1,2.5]')[2] * 2" 0
        EVAL "return bit.band(7, 3)" 0
        EVAL "return bit.bor(1, 2, 4)" 0
        EVAL "return bit.tohex(255)" 0
        EVAL "return bit.tohex(-1, -4)" 0
        EVAL "return bit.lshift(1, 31)" 0
        EVAL "return struct.pack('>I2', 258)" 0
        EVAL "return {struct.unpack('>I2', struct.pack('>I2', 258))}" 0
        EVAL "return cmsgpack.pack({1,2})" 0
        EVAL "return cmsgpack.pack({1, 'two', 3.5, true})" 0
        EVAL "return cmsgpack.unpack(cmsgpack.pack({7, 'x'}))" 0
        EVAL "return string.rep('x', 3)" 0
        EVAL "return table.concat({1, 2}, ',')" 0
        EVAL "return math.floor(7.9)" 0
        EVAL "return type(coroutine)" 0
        EVAL "return tostring(1e20)" 0
        # Sandbox
        EVAL "x = 1" 0
        EVAL "return y" 0
        EVAL "return _G.y" 0
        EVAL "redis = nil" 0
        EVAL "redis.call = nil" 0
        EVAL "string.rep = nil" 0
        EVAL "return io" 0
        EVAL "return debug" 0
        EVAL "return require" 0
        EVAL "return dofile" 0
        EVAL "return loadfile" 0
        EVAL "return print" 0
        EVAL "return getfenv" 0
        EVAL "return setfenv" 0
        EVAL "return newproxy" 0
        EVAL "return module" 0
        EVAL "return type(loadstring)" 0
        EVAL "return loadstring('return redis.call(1)')()" 0
        EVAL "return loadstring('return nosuch')()" 0
        EVAL "return type(pcall)" 0
        # Shebang flags
        EVAL "#!lua flags=no-writes\nreturn redis.call('set','a','b')" 0
        EVAL "#!lua flags=no-writes\nreturn redis.call('get','str')" 0
        EVAL "#!lua flags=bad\nreturn 1" 0
        EVAL "#!lu\nreturn 1" 0
        EVAL "#!lua\nreturn 1" 0
        EVAL "#!lua name=x\nreturn 1" 0
        EVAL_RO "#!lua\nreturn 1" 0
        EVAL_RO "return redis.call('get', 'str')" 1 str
        EVAL_RO "return redis.call('set', 'str', 'x')" 1 str
        EVAL_RO "return redis.call('del', 'str')" 0
        "##
        .replace("\\n", "\n")
        .as_str(),
    );
    same_argv(
        &mut ours,
        &mut theirs,
        &[
            &["EVAL", r#"return cjson.encode('a/b"c')"#, "0"],
            &[
                "EVAL",
                r#"return cjson.decode('[1,2.5,{"a":7}]')[3]['a']"#,
                "0",
            ],
            &[
                "EVAL",
                r#"return cjson.encode(cjson.decode('{"a":[1,2,{"b":null}]}'))"#,
                "0",
            ],
            &[
                "EVAL",
                r#"return cjson.decode('{"a":null}')['a'] == cjson.null"#,
                "0",
            ],
            &["EVAL", "return redis.call('echo', 'a\r\nb')", "0"],
        ],
    );
}

/// Numbers a script passes to `redis.call` keep every digit, as Redis
/// 7.2+ writes them (`double2ll`, else `fpconv_dtoa`): before, they went
/// through Lua's `%.14g` (`3.1415926535898`). Redis 7.0 printed `%.17g`,
/// so this is checked against the 8.x texts, not the installed server.
#[test]
fn redis_call_number_arguments_keep_their_digits() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    for (expr, want) in [
        ("3.141592653589793", "3.141592653589793"),
        ("1/3", "0.3333333333333333"),
        ("2^63", "9223372036854776000"),
        ("1e20", "1e+20"),
        ("-0.5", "-0.5"),
        ("100", "100"),
        ("-0", "0"),
        ("2^53", "9007199254740992"),
    ] {
        let script =
            format!("redis.call('set', KEYS[1], {expr}); return redis.call('get', KEYS[1])");
        let got = c.raw(&["EVAL", &script, "1", "num"]);
        assert_eq!(got, format!("${}\r\n{want}", want.len()), "{expr}");
    }
}

#[test]
fn hostile_scripts_get_errors_and_the_server_lives() {
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    same_argv(
        &mut ours,
        &mut theirs,
        &[
            &["EVAL", "local function f() return pcall(f) end return f()", "0"],
            &["EVAL", "local function f() local ok, e = pcall(f) return e end return f()", "0"],
            &["EVAL", "local t = setmetatable({}, {}) getmetatable(t).__index = function(t, k) return t[k] end return t.x", "0"],
            &["EVAL", "local function f(n) return f(n+1) + 1 end return f(1)", "0"],
            &["EVAL", "local t = {} t[1] = t return cjson.encode(t)", "0"],
            &["PING"],
        ],
    );
    let deep = ours.raw(&[
        "EVAL",
        "return cmsgpack.unpack(string.rep(string.char(0x91), 100000) .. string.char(1))",
        "0",
    ]);
    assert!(deep.starts_with("-ERR user_script:1: "), "{deep}");
    // cjson.decode's error names the place, not lua-cjson's token names.
    let bad = ours.raw(&["EVAL", "return cjson.decode('[1,')", "0"]);
    assert!(
        bad.starts_with("-ERR user_script:1: Expected value but found "),
        "{bad}"
    );
    // A cyclic table: Redis nests arrays until its Lua stack runs out
    // (7995 levels) and ends with this error; so do we.
    let cyclic = ["EVAL", "local t = {} t[1] = t return t", "0"];
    assert_eq!(ours.raw(&cyclic), theirs.raw(&cyclic));
    assert_eq!(ours.raw(&["PING"]), "+PONG");
}

#[test]
fn scripts_over_maxmemory_match_redis() {
    let srv = TestServer::start(1);
    let mut ours = srv.client();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    same_argv(
        &mut ours,
        &mut theirs,
        &[
            &["SET", "k", "v"],
            &["CONFIG", "SET", "maxmemory", "1"],
            &["EVAL", "return redis.call('set','k','v')", "0"],
            &["EVAL", "return redis.pcall('set','k','v')", "0"],
            &["EVAL", "return redis.call('get','k')", "0"],
            &["EVAL", "#!lua\nreturn redis.call('get','k')", "0"],
            &[
                "EVAL",
                "#!lua flags=allow-oom\nreturn redis.call('set','k','v2')",
                "0",
            ],
            &[
                "EVAL",
                "#!lua flags=no-writes\nreturn redis.call('get','k')",
                "0",
            ],
            &["CONFIG", "SET", "maxmemory", "0"],
            &["EVAL", "return redis.call('set','k','v3')", "0"],
        ],
    );
}

#[test]
fn script_cache_matches_redis() {
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    assert_same_replies(
        &mut ours,
        &mut theirs,
        r#"
        EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
        SCRIPT EXISTS e0e1f9fabfc9d4800c877a703b823ac0578ff8db nothex
        SCRIPT LOAD "return 1"
        SCRIPT EXISTS e0e1f9fabfc9d4800c877a703b823ac0578ff8db nothex
        EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
        EVALSHA E0E1F9FABFC9D4800C877A703B823AC0578FF8DB 0
        EVALSHA_RO e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
        SCRIPT LOAD "x("
        EVAL "return 'cached by eval'" 0
        EVALSHA 5a8d0cbd5d1d9a1eaa0ab87bd0d82d8b0caa3f3b 0
        EVAL "return 2 +" 0
        SCRIPT FLUSH foo
        SCRIPT FLUSH
        SCRIPT EXISTS e0e1f9fabfc9d4800c877a703b823ac0578ff8db
        EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
        SCRIPT FLUSH ASYNC
        SCRIPT KILL
        FUNCTION KILL
        SCRIPT NOPE
        SCRIPT LOAD
        EVAL
        EVALSHA x
        EVALSHA abc 5 k
        EVALSHA_RO abc x
        EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db x
        "#,
    );
}

const LIB: &str = "#!lua name=lib1
redis.register_function('f1', function(keys, args) return redis.call('nosuch') end)
redis.register_function{function_name='f2', callback=function(keys, args) error('boom') end, flags={'no-writes'}, description='desc'}
redis.register_function('f3', function(keys, args) return {keys[1], args[1]} end)
redis.register_function{function_name='f4', callback=function(keys, args) return redis.call('set', keys[1], args[1]) end, flags={'no-writes'}}";

#[test]
fn functions_match_redis() {
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    let one = |name: &'static str, body: &'static str| -> String {
        format!("#!lua name={name}\nredis.register_function('{name}_f', function(keys, args) {body} end)")
    };
    let lib2 = one("lib2", "return 2");
    let lib2_again = "#!lua name=lib2\nredis.register_function('lib2_f', function() return 22 end)";
    let clash = "#!lua name=lib3\nredis.register_function('f1', function() return 1 end)";
    same_argv(
        &mut ours,
        &mut theirs,
        &[
            &["FUNCTION", "FLUSH"],
            &["FUNCTION", "LOAD", LIB],
            &["FUNCTION", "LOAD", LIB],
            &["FCALL", "f1", "0"],
            &["FCALL", "f2", "0"],
            &["FCALL", "f3", "1", "k", "a"],
            &["FCALL", "f4", "1", "k", "a"],
            &["FCALL_RO", "f3", "0"],
            &["FCALL_RO", "f2", "0"],
            &["FCALL", "nosuch", "0"],
            &["FCALL", "f3", "x"],
            &["FCALL", "f3", "-1"],
            &["FCALL", "f3", "5", "a"],
            &["FUNCTION", "LOAD", &lib2],
            &["FCALL", "lib2_f", "0"],
            &["FUNCTION", "LOAD", lib2_again],
            &["FUNCTION", "LOAD", "REPLACE", lib2_again],
            &["FCALL", "lib2_f", "0"],
            &["FUNCTION", "LOAD", clash],
            &["FUNCTION", "LOAD", "BOGUS", clash],
            &["FUNCTION", "LIST", "LIBRARYNAME", "lib2", "WITHCODE"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "nolib*"],
            &["FUNCTION", "DELETE", "lib2"],
            &["FUNCTION", "DELETE", "lib2"],
            &["FCALL", "lib2_f", "0"],
            &["FUNCTION", "LOAD", "#!lua name=x\nreturn 1"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.call('ping')"],
            &["FUNCTION", "LOAD", "#!lua\nx"],
            &["FUNCTION", "LOAD", "lua name=x"],
            &["FUNCTION", "LOAD", "#!lua name=x"],
            &["FUNCTION", "LOAD", "#!lua name=x foo=bar\n"],
            &["FUNCTION", "LOAD", "#!nosuch name=x\nreturn 1"],
            &["FUNCTION", "LOAD", "#!lua name=bad-name\nreturn 1"],
            &["FUNCTION", "LOAD", "#!lua name=x\nx ="],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('f', function() end, 'x')"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{function_name='f', callback=function() end, flags={'bad'}}"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('f-9!', function() end)"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('g', function() end)\nredis.register_function('g', function() end)"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{function_name='g'}"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{callback=function() end}"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function{function_name='g', callback=function() end, bogus=1}"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function(1, function() end)"],
            &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('g', 1)"],
            &["FUNCTION", "LOAD", "#!lua name=x\ny = 1"],
            &["FUNCTION", "LOAD", "#!lua name=loop\nwhile true do end"],
            &["FUNCTION", "STATS"],
            &["FUNCTION", "RESTORE", "bogus"],
            &["FUNCTION", "RESTORE", "bogus", "NOPE"],
            &["FUNCTION", "FLUSH", "SYNC"],
            &["FUNCTION", "LIST"],
            &["FCALL", "f3", "0"],
        ],
    );
}

#[test]
fn function_dump_restores_here_and_on_redis() {
    let srv = TestServer::start(1);
    let mut ours = srv.client();
    let mut redis_conn = srv.redis();
    let _: () = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIB)
        .query(&mut redis_conn)
        .unwrap();
    let payload: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut redis_conn)
        .unwrap();
    assert_eq!(
        ours.raw(&[&b"FUNCTION"[..], b"RESTORE", &payload]),
        "-ERR Library lib1 already exists"
    );
    assert_eq!(
        ours.raw(&[&b"FUNCTION"[..], b"RESTORE", &payload, b"REPLACE"]),
        "+OK"
    );
    assert_eq!(ours.raw(&["FUNCTION", "FLUSH"]), "+OK");
    assert_eq!(ours.raw(&[&b"FUNCTION"[..], b"RESTORE", &payload]), "+OK");
    assert_eq!(
        ours.raw(&["FCALL", "f3", "1", "k", "a"]),
        "*2\r\n$1\r\nk\r\n$1\r\na"
    );
    // Our payload restores on Redis, and Redis's (LZF-compressed) on ours.
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    let big = format!(
        "#!lua name=big\n{}redis.register_function('big', function() return 'big' end)",
        "-- padding padding padding padding\n".repeat(40)
    );
    assert_eq!(theirs.raw(&["FUNCTION", "LOAD", &big]), "$3\r\nbig");
    let mut theirs_conn = redis::Client::open(format!("redis://{}/", redis.addr))
        .and_then(|c| c.get_connection())
        .unwrap();
    let theirs_payload: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut theirs_conn)
        .unwrap();
    assert_eq!(
        ours.raw(&[&b"FUNCTION"[..], b"RESTORE", &theirs_payload]),
        "+OK"
    );
    assert_eq!(ours.raw(&["FCALL", "big", "0"]), "$3\r\nbig");
    assert_eq!(theirs.raw(&[&b"FUNCTION"[..], b"RESTORE", &payload]), "+OK");
    assert_eq!(
        theirs.raw(&["FCALL", "f3", "1", "k", "a"]),
        "*2\r\n$1\r\nk\r\n$1\r\na"
    );
}

#[test]
fn resp3_conversions_match_redis() {
    let srv = TestServer::start(1);
    let mut ours = srv.client();
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    assert_same_replies(
        &mut ours,
        &mut theirs,
        r##"
        ~HELLO 3
        EVAL "return true" 0
        EVAL "return false" 0
        EVAL "return nil" 0
        EVAL "return {1, true, false, 'x'}" 0
        EVAL "return {double=1.5}" 0
        EVAL "return {double=3}" 0
        EVAL "return {map={a=1}}" 0
        EVAL "return {set={a=true}}" 0
        EVAL "return {ok='fine'}" 0
        EVAL "return {err='E x'}" 0
        EVAL "return redis.call('get', 'nosuch')" 0
        EVAL "redis.setresp(3); return redis.call('get', 'nosuch')" 0
        EVAL "redis.setresp(3); return redis.call('get', 'nosuch') == nil" 0
        EVAL "return redis.call('get', 'nosuch') == false" 0
        SET s 1
        EVAL "redis.setresp(3); return redis.call('incrbyfloat', 's', '0.5')" 0
        EVAL "redis.setresp(3); return redis.call('config', 'get', 'maxmemory')" 0
        EVAL "redis.setresp(3); return true" 0
        EVAL "redis.setresp(3); return {1, true, false}" 0
        XADD sx 1-1 a 1
        EVAL "redis.setresp(3); return redis.call('XREAD', 'STREAMS', KEYS[1], '0')" 1 sx
        XREAD STREAMS sx 0
        XRANGE sx - +
        ~HELLO 2
        EVAL "redis.setresp(3); return {true, false}" 0
        EVAL "return {true, false}" 0
        "##,
    );
}

#[test]
fn resp3_conversions() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    c.raw(&["HELLO", "3"]);
    assert_eq!(c.raw(&["EVAL", "return true", "0"]), ":1");
    assert_eq!(c.raw(&["EVAL", "redis.setresp(3) return false", "0"]), "#f");
    assert_eq!(c.raw(&["EVAL", "return {double=1.5}", "0"]), ",1.5");
    assert_eq!(
        c.raw(&["EVAL", "return {map={a=1}}", "0"]),
        "%1\r\n$1\r\na\r\n:1"
    );
    assert_eq!(
        c.raw(&[
            "EVAL",
            "redis.setresp(3); return redis.call('get', 'nosuch') == nil",
            "0"
        ]),
        "#t"
    );
    assert_eq!(
        c.raw(&["EVAL", "return redis.call('get', 'nosuch') == false", "0"]),
        ":1"
    );
    // redis.log's range error as Redis 7.4+ words it (7.0: "Invalid debug level.").
    assert!(c
        .raw(&["EVAL", "redis.log(99, 'x')", "0"])
        .starts_with("-ERR Invalid log level. script: "));
    // 8.x sandbox details that redis-server 7.0 does not have: os.clock only.
    assert_eq!(
        c.raw(&["EVAL", "return type(os.clock())", "0"]),
        "$6\r\nnumber"
    );
    assert!(c
        .raw(&["EVAL", "os.exit()", "0"])
        .starts_with("-ERR user_script:1: attempt to call field 'exit' (a nil value) script: "));
    assert!(c
        .raw(&["EVAL", "os.clock = nil", "0"])
        .starts_with("-ERR user_script:1: Attempt to modify a readonly table script: "));
    // TIME is frozen for the whole script (Redis 7.0+).
    assert_eq!(
        c.raw(&[
            "EVAL",
            "local a = redis.call('time') for i = 1, 3000000 do end local b = redis.call('time') return a[1] == b[1] and a[2] == b[2]",
            "0"
        ]),
        ":1"
    );
    c.raw(&["XADD", "s", "1-1", "f", "v"]);
    assert_eq!(
        c.raw(&[
            "EVAL",
            "redis.setresp(3); local r = redis.call('xinfo', 'stream', 's'); return r['map']['length']",
            "0"
        ]),
        ":1"
    );
}

#[test]
fn scripts_run_on_the_shard_owning_their_keys() {
    let srv = TestServer::start(4);
    let mut c = srv.client();
    // One slot per script: every call lands on the keys' shard.
    assert_eq!(
        c.raw(&[
            "EVAL",
            "redis.call('set', KEYS[1], 'a'); redis.call('xadd', KEYS[2], '1-1', 'f', 'v'); return {redis.call('get', KEYS[1]), redis.call('xlen', KEYS[2])}",
            "2",
            "{user1}:name",
            "{user1}:events"
        ]),
        "*2\r\n$1\r\na\r\n:1"
    );
    assert_eq!(c.raw(&["GET", "{user1}:name"]), "$1\r\na");
    // Declared keys on different shards: the script runs with both shards
    // held (a cross-shard transaction), each call on its key's shard.
    let (a, b, other) = keys_on_three_shards();
    assert_eq!(
        c.raw(&[
            "EVAL",
            "redis.call('set', KEYS[1], ARGV[1]) redis.call('set', KEYS[2], ARGV[1] .. '!') return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2])}",
            "2",
            &a,
            &b,
            "x"
        ]),
        "*2\r\n$1\r\nx\r\n$2\r\nx!"
    );
    assert_eq!(c.raw(&["GET", &a]), "$1\r\nx");
    assert_eq!(c.raw(&["GET", &b]), "$2\r\nx!");
    // One call's own keys must stay on one shard.
    let reply = c.raw(&[
        "EVAL",
        "return redis.call('mset', KEYS[1], 1, KEYS[2], 2)",
        "2",
        &a,
        &b,
    ]);
    assert!(
        reply.starts_with(&format!(
            "-{} script: ",
            shardstream::cmd::scripting::CALL_SPANS_SHARDS
        )),
        "{reply}"
    );
    // An undeclared key of a shard the script does not hold fails inside it.
    for declared in [vec![a.as_str()], vec![a.as_str(), b.as_str()]] {
        let mut argv = vec!["EVAL", "return redis.call('set', ARGV[1], 1)"];
        let n = declared.len().to_string();
        argv.push(&n);
        argv.extend(declared.iter().copied());
        argv.push(&other);
        let reply = c.raw(&argv);
        assert!(
            reply.starts_with(&format!(
                "-{} script: ",
                shardstream::cmd::scripting::NOT_LOCAL_KEY
            )),
            "{reply}"
        );
    }
    assert_eq!(c.raw(&["EXISTS", &other]), ":0");
    // An undeclared key of a held shard is reachable.
    let shard = |k: &str| shardstream::route::slot::slot_of(k.as_bytes()).shard(4);
    let near_b = (0..200)
        .map(|i| format!("d{i}"))
        .find(|k| shard(k) == shard(&b))
        .unwrap();
    assert_eq!(c.raw(&["SET", &near_b, "nb"]), "+OK");
    assert_eq!(
        c.raw(&[
            "EVAL",
            "return redis.call('get', ARGV[1])",
            "2",
            &a,
            &b,
            &near_b
        ]),
        "$2\r\nnb"
    );
    // An undeclared key of the same shard is allowed (standalone Redis allows it).
    assert_eq!(
        c.raw(&[
            "EVAL",
            "return redis.call('set', '{user1}:other', 1)",
            "1",
            "{user1}:name"
        ]),
        "+OK"
    );
    // Keyless scripts run on the connection's shard.
    assert_eq!(c.raw(&["EVAL", "return redis.call('ping')", "0"]), "+PONG");
    // FCALL follows the same rules.
    c.raw(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=l\nredis.register_function('setk', function(keys, args) return redis.call('set', keys[1], args[1]) end)",
    ]);
    assert_eq!(c.raw(&["FCALL", "setk", "1", &b, "v"]), "+OK");
    assert_eq!(c.raw(&["GET", &b]), "$1\r\nv");
    let both = "#!lua name=l2\nredis.register_function('set2', function(keys, args) redis.call('set', keys[1], args[1]) return redis.call('incr', keys[2]) end)";
    c.raw(&["FUNCTION", "LOAD", both]);
    assert_eq!(c.raw(&["DEL", &b]), ":1");
    assert_eq!(c.raw(&["FCALL", "set2", "2", &a, &b, "w"]), ":1");
    assert_eq!(c.raw(&["GET", &a]), "$1\r\nw");
    // Inside MULTI a cross-shard script joins the transaction.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", &a, "m"]), "+QUEUED");
    assert_eq!(c.raw(&["FCALL", "set2", "2", &a, &b, "z"]), "+QUEUED");
    assert_eq!(c.raw(&["GET", &a]), "+QUEUED");
    assert_eq!(c.raw(&["EXEC"]), "*3\r\n+OK\r\n:2\r\n$1\r\nz");
    // Inside MULTI a script joins the transaction's shard.
    assert_eq!(c.raw(&["MULTI"]), "+OK");
    assert_eq!(c.raw(&["SET", "{user1}:x", "1"]), "+QUEUED");
    assert_eq!(
        c.raw(&[
            "EVAL",
            "return redis.call('incr', KEYS[1])",
            "1",
            "{user1}:x"
        ]),
        "+QUEUED"
    );
    assert_eq!(c.raw(&["EXEC"]), "*2\r\n+OK\r\n:2");
}

/// Three keys owned by three different shards of a 4-shard server.
fn keys_on_three_shards() -> (String, String, String) {
    let shard = |k: &str| shardstream::route::slot::slot_of(k.as_bytes()).shard(4);
    let a = "a".to_string();
    let b = (0..100)
        .map(|i| format!("b{i}"))
        .find(|k| shard(k) != shard(&a))
        .unwrap();
    let c = (0..100)
        .map(|i| format!("c{i}"))
        .find(|k| shard(k) != shard(&a) && shard(k) != shard(&b))
        .unwrap();
    (a, b, c)
}

#[test]
fn blocked_readers_are_served_after_the_script() {
    let srv = TestServer::start(2);
    let mut reader = srv.client();
    let mut writer = srv.client();
    reader.send(&["XREAD", "BLOCK", "5000", "STREAMS", "{q}jobs", "$"]);
    common::wait_blocked(&mut writer, 1);
    assert_eq!(
        writer.raw(&[
            "EVAL",
            "redis.call('xadd', KEYS[1], '5-1', 'n', '1'); redis.call('xadd', KEYS[1], '5-2', 'n', '2'); return redis.call('xlen', KEYS[1])",
            "1",
            "{q}jobs"
        ]),
        ":2"
    );
    // The reader sees both entries: it ran after the script, not in between.
    let got = reader.read_reply();
    assert!(got.contains("5-1") && got.contains("5-2"), "{got}");
}

#[test]
fn busy_script_answers_busy_and_script_kill_stops_it() {
    let srv = TestServer::start(2);
    let mut admin = srv.client();
    assert_eq!(
        admin.raw(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
        "+OK"
    );
    assert_eq!(
        admin.raw(&["CONFIG", "GET", "lua-time-limit"]),
        "*2\r\n$14\r\nlua-time-limit\r\n$3\r\n100"
    );
    // The acceptor hands a new connection to the thread serving the fewest:
    // the looping client gets the other thread (its own thread is busy in Lua).
    let mut looper = srv.client();
    looper.send(&["EVAL", "local i = 0 while true do i = i + 1 end", "0"]);
    assert!(eventually(10, || admin.raw(&["PING"]).starts_with("-BUSY")));
    assert_eq!(
        admin.raw(&["PING"]),
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    );
    assert_eq!(
        admin.raw(&["FUNCTION", "KILL"]),
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    );
    assert!(admin.raw(&["FUNCTION", "STATS"]).contains("duration_ms"));
    // A refused EXEC is a discarded transaction (redis-server 7.0.15's text).
    assert_eq!(
        admin.raw(&["EXEC"]),
        "-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    );
    assert_eq!(admin.raw(&["SCRIPT", "KILL"]), "+OK");
    let killed = looper.read_reply();
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
        "{killed}"
    );
    assert!(eventually(5, || admin.raw(&["PING"]) == "+PONG"));
    assert_eq!(
        admin.raw(&["SCRIPT", "KILL"]),
        "-NOTBUSY No scripts in execution right now."
    );
    // A script that wrote cannot be killed. It writes a key of the looper's
    // own shard (a keyless script runs there).
    let local_key = (0..100)
        .map(|i| format!("w{i}"))
        .find(|k| looper.raw(&["EVAL", "return redis.call('set', ARGV[1], 1)", "0", k]) == "+OK")
        .expect("a key of the looper's shard");
    looper.send(&[
        "EVAL",
        "redis.call('set', ARGV[1], 2) local i = 0 while i < 30000000 do i = i + 1 end return i",
        "0",
        &local_key,
    ]);
    assert!(eventually(10, || admin.raw(&["PING"]).starts_with("-BUSY")));
    assert!(admin.raw(&["SCRIPT", "KILL"]).starts_with("-UNKILLABLE"));
    assert_eq!(looper.read_reply(), ":30000000");
    assert_eq!(admin.raw(&["GET", &local_key]), "$1\r\n2");
}

#[test]
fn shutdown_stops_a_runaway_script_on_the_only_shard() {
    // With one shard the looping script holds the only thread: no client
    // can send SCRIPT KILL, but shutting down (SIGTERM) still ends it.
    let srv = TestServer::start(1);
    let mut looper = srv.client();
    looper.send(&["EVAL", "while true do end", "0"]);
    std::thread::sleep(Duration::from_millis(200));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(srv);
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(20)).is_ok(),
        "shutdown waited for the script"
    );
    let reply = looper.read_reply();
    assert!(
        reply.starts_with("-ERR Script stopped: the server is shutting down script: "),
        "{reply}"
    );
}

#[test]
fn functions_survive_a_restart_through_the_aof_and_its_rewrite() {
    let dir = ScratchDir::new("lua-functions");
    let cfg = Config {
        shards: 2,
        dir: dir.to_path_buf(),
        appendonly: true,
        ..test_config()
    };
    let written;
    let shard = |k: &str| shardstream::route::slot::slot_of(k.as_bytes()).shard(2);
    let x = "x".to_string();
    let y = (0..100)
        .map(|i| format!("y{i}"))
        .find(|k| shard(k) != shard(&x))
        .unwrap();
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        assert_eq!(c.raw(&["FUNCTION", "LOAD", LIB]), "$4\r\nlib1");
        let lib2 = "#!lua name=lib2\nredis.register_function('g', function(keys, args) return redis.call('incr', keys[1]) end)";
        assert_eq!(c.raw(&["FUNCTION", "LOAD", lib2]), "$4\r\nlib2");
        assert_eq!(c.raw(&["FCALL", "g", "1", "counter"]), ":1");
        let lib2b = "#!lua name=lib2\nredis.register_function('g', function(keys, args) return redis.call('incrby', keys[1], 10) end)";
        assert_eq!(c.raw(&["FUNCTION", "LOAD", "REPLACE", lib2b]), "$4\r\nlib2");
        let tmp = "#!lua name=tmp\nredis.register_function('t', function() return 1 end)";
        assert_eq!(c.raw(&["FUNCTION", "LOAD", tmp]), "$3\r\ntmp");
        assert_eq!(c.raw(&["FUNCTION", "DELETE", "tmp"]), "+OK");
        // Scripts are not persisted (as in Redis)...
        c.raw(&["SCRIPT", "LOAD", "return 1"]);
        // ...but what they wrote is, as the effects of each command.
        let xadd = "redis.call('incr', KEYS[1]) return redis.call('xadd', KEYS[2], '*', 'n', redis.call('get', KEYS[1]))";
        for _ in 0..3 {
            c.raw(&["EVAL", xadd, "2", "{s}:n", "{s}:events"]);
        }
        written = c.raw(&["XRANGE", "{s}:events", "-", "+"]);
        assert!(written.starts_with("*3\r\n"), "{written}");
        // A script over both shards (a cross-shard transaction) persists whole.
        assert_eq!(
            c.raw(&[
                "EVAL",
                "redis.call('set', KEYS[1], 'one') return redis.call('set', KEYS[2], 'two')",
                "2",
                &x,
                &y
            ]),
            "+OK"
        );
    }
    let list_before;
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        assert_eq!(c.raw(&["XRANGE", "{s}:events", "-", "+"]), written);
        assert_eq!(c.raw(&["MGET", &x, &y]), "*2\r\n$3\r\none\r\n$3\r\ntwo");
        assert_eq!(c.raw(&["GET", "{s}:n"]), "$1\r\n3");
        assert_eq!(c.raw(&["FCALL", "g", "1", "counter"]), ":11");
        assert_eq!(c.raw(&["FCALL", "t", "0"]), "-ERR Function not found");
        assert_eq!(
            c.raw(&[
                "SCRIPT",
                "EXISTS",
                "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
            ]),
            "*1\r\n:0"
        );
        list_before = c.raw(&["FUNCTION", "LIST", "WITHCODE"]);
        assert!(list_before.contains("lib1") && list_before.contains("incrby"));
        assert_eq!(
            c.raw(&["BGREWRITEAOF"]),
            "+Background append only file rewriting started"
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !c
            .raw(&["INFO", "persistence"])
            .contains("aof_rewrite_in_progress:0")
        {
            assert!(Instant::now() < deadline, "rewrite did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    {
        let srv = TestServer::with_config(cfg.clone());
        let mut c = srv.client();
        assert_eq!(c.raw(&["FUNCTION", "LIST", "WITHCODE"]), list_before);
        assert_eq!(c.raw(&["FCALL", "g", "1", "counter"]), ":21");
        assert_eq!(c.raw(&["FUNCTION", "FLUSH"]), "+OK");
    }
    let srv = TestServer::with_config(cfg);
    let mut c = srv.client();
    assert_eq!(c.raw(&["FUNCTION", "LIST"]), "*0");
    c.raw(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=one\nredis.register_function('one', function() return 1 end)",
    ]);
    c.raw(&["EVAL", "return 1", "0"]);
    let info = c.raw(&["INFO", "memory"]);
    for want in [
        "number_of_cached_scripts:1",
        "number_of_functions:1",
        "number_of_libraries:1",
    ] {
        assert!(info.contains(want), "{want} in {info}");
    }
}

/// Whether python3 with redis-py is here; with `SHARDSTREAM_REQUIRE_REDIS`
/// set (CI) its absence is a failure.
fn have_redis_py() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import redis"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("SHARDSTREAM_REQUIRE_REDIS").is_none(),
            "redis-py is required (pip install redis)"
        );
        eprintln!("python3 with redis-py not available: skipping");
    }
    ok
}

fn run_py(script: &str, port: u16) {
    let path = format!("{}/tests/py/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(&path)
        .arg(port.to_string())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{script} failed against port {port}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn delayed_messages_with_redis_py_register_script() {
    if !have_redis_py() {
        return;
    }
    let srv = TestServer::start(2);
    run_py("delayed_messages.py", srv.addr.port());
    if let Some(redis) = RedisServer::start() {
        run_py("delayed_messages.py", redis.addr.port());
    }
}

/// Library changes and the commands that read the libraries, in the order
/// one connection sent them. Each line is one command; every reply is
/// returned in order.
fn function_order_transcript(c: &mut RespClient, pipelined: bool) -> Vec<String> {
    let lib = |name: &str, f: &str, body: &str| {
        format!(
            "#!lua name={name}\nredis.register_function('{f}', function(keys, args) {body} end)"
        )
    };
    let pl_old = lib("PL", "pf", "return 'old'");
    let pl_new = lib("PL", "pf", "return 'new'");
    let l1_old = lib(
        "L1",
        "f1",
        "return redis.call('XADD', keys[1], '1-1', 'v', 'old')",
    );
    let l1_new = lib("L1", "f1", "return 'new'");
    let l2_v1 = lib("L2", "f2", "return 'v1'");
    let l2_v2 = lib("L2", "f2", "return 'v2'");
    let mut cmds: Vec<Vec<String>> = Vec::new();
    let mut add = |args: &[&str]| cmds.push(args.iter().map(|s| s.to_string()).collect());
    // Writes on every shard first, so later commands have earlier requests
    // in flight on other shards.
    add(&["DEL", "fo-stream"]);
    for k in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        add(&["SET", k, "1"]);
    }
    add(&["FUNCTION", "FLUSH"]);
    add(&["FUNCTION", "LOAD", &pl_old]);
    add(&["MULTI"]);
    add(&["FUNCTION", "FLUSH"]);
    add(&["FUNCTION", "LOAD", &pl_new]);
    add(&["FCALL", "pf", "0"]);
    add(&["FUNCTION", "LIST", "LIBRARYNAME", "PL"]);
    add(&["EXEC"]);
    add(&["FCALL", "pf", "0"]);
    add(&["FUNCTION", "LOAD", &l1_old]);
    add(&["MULTI"]);
    add(&["FUNCTION", "LOAD", "REPLACE", &l1_new]);
    add(&["FCALL", "f1", "1", "fo-stream"]);
    add(&["FUNCTION", "DELETE", "L1"]);
    add(&["FCALL", "f1", "1", "fo-stream"]);
    add(&["FCALL_RO", "pf", "0"]);
    add(&["EXEC"]);
    add(&["XLEN", "fo-stream"]);
    // The same without MULTI.
    for k in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        add(&["SET", k, "2"]);
    }
    add(&["FUNCTION", "LOAD", "REPLACE", &l2_v1]);
    add(&["FUNCTION", "LOAD", "REPLACE", &l2_v2]);
    add(&["FCALL", "f2", "0"]);
    add(&["FUNCTION", "DELETE", "L2"]);
    add(&["FCALL", "f2", "0"]);
    add(&["FUNCTION", "LOAD", &l2_v1]);
    add(&["FUNCTION", "LOAD", &l2_v2]);
    add(&["FUNCTION", "FLUSH"]);
    add(&["FUNCTION", "LOAD", &l2_v2]);
    add(&["FCALL", "f2", "0"]);
    // A transaction planned after a pipelined change sees it.
    add(&["FUNCTION", "LOAD", "REPLACE", &l2_v1]);
    add(&["MULTI"]);
    add(&["FCALL", "f2", "0"]);
    add(&["EXEC"]);
    // CONFIG SET after a read of another shard: the read sees the policy
    // it was sent under.
    add(&["SET", "h", "3"]);
    add(&["OBJECT", "FREQ", "h"]);
    add(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    add(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    add(&["FUNCTION", "FLUSH"]);
    if pipelined {
        let mut wire = Vec::new();
        for argv in &cmds {
            wire.extend(common::resp_command(argv));
        }
        c.send_raw(&wire);
        cmds.iter().map(|_| c.read_reply()).collect()
    } else {
        cmds.iter().map(|argv| c.raw(argv)).collect()
    }
}

/// Function registry changes take effect in the order a connection sent
/// them, inside MULTI and pipelined, whichever shard thread serves the
/// connection: an FCALL after FUNCTION LOAD REPLACE runs the new code, one
/// after FUNCTION DELETE finds nothing, a FUNCTION LOAD after FUNCTION
/// FLUSH loads (they once saw the libraries as they were before).
#[test]
fn function_changes_apply_in_the_order_sent() {
    let srv = TestServer::start(4);
    let expected = function_order_transcript(&mut srv.client(), false);
    // EXEC of FLUSH, LOAD, FCALL and LIST: the new library throughout.
    assert_eq!(
        expected[16],
        "*4\r\n+OK\r\n$2\r\nPL\r\n$3\r\nnew\r\n*1\r\n*6\r\n$12\r\nlibrary_name\r\n\
         $2\r\nPL\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*1\r\n*6\r\n\
         $4\r\nname\r\n$2\r\npf\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0"
    );
    assert_eq!(expected[17], "$3\r\nnew");
    assert_eq!(
        expected[25],
        "*5\r\n$2\r\nL1\r\n$3\r\nnew\r\n+OK\r\n-ERR Function not found\r\n\
         -ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(expected[26], ":0");
    // Each connection (one per shard thread and more) pipelines it all.
    for _ in 0..6 {
        let mut c = srv.client();
        assert_eq!(function_order_transcript(&mut c, true), expected);
    }
    if let Some(redis) = RedisServer::start() {
        assert_eq!(
            function_order_transcript(&mut redis.client(), true),
            expected
        );
    }
}

/// The blocking sorted-set pops run in scripts and answer at once, as the
/// list ones do (Redis 7.2+ dropped their `noscript` flag): a pop when
/// there is a member, nil (a null reply, false in Lua) when there is none.
#[test]
fn blocking_sorted_set_pops_answer_at_once_in_scripts() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    assert_eq!(c.raw(&["ZADD", "{z}a", "1", "m", "2", "n"]), ":2");
    let eval = |c: &mut RespClient, body: &str| c.raw(&["EVAL", body, "1", "{z}a"]);
    assert_eq!(
        eval(&mut c, "return redis.call('BZPOPMIN', KEYS[1], 0)"),
        "*3\r\n$4\r\n{z}a\r\n$1\r\nm\r\n$1\r\n1"
    );
    assert_eq!(
        eval(&mut c, "return redis.call('BZPOPMAX', KEYS[1], 0)"),
        "*3\r\n$4\r\n{z}a\r\n$1\r\nn\r\n$1\r\n2"
    );
    assert_eq!(
        eval(&mut c, "return redis.call('BZMPOP', 0, 1, KEYS[1], 'MIN')"),
        "$-1"
    );
    assert_eq!(
        eval(&mut c, "return redis.call('BZPOPMIN', KEYS[1], 0)"),
        "$-1"
    );
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // redis-server 7.0 already allows BZMPOP (it refuses BZPOPMIN/MAX).
    let mut theirs = redis.client();
    assert_same_replies(
        &mut c,
        &mut theirs,
        r#"
        ZADD {z}b 1 m
        EVAL "return redis.call('BZMPOP', 0, 1, KEYS[1], 'MAX', 'COUNT', 2)" 1 {z}b
        EVAL "return redis.call('BZMPOP', 0, 1, KEYS[1], 'MAX')" 1 {z}b
        "#,
    );
}

/// Function names are looked up without case (FCALL `myfunc` runs
/// `MyFunc`; error replies and FUNCTION LIST show the registered case) and
/// clash across libraries without case; library names keep their case, but
/// FUNCTION LIST LIBRARYNAME matches them without it (Redis 7.0+).
#[test]
fn function_names_are_case_insensitive_as_in_redis() {
    let srv = TestServer::start(2);
    let mut ours = srv.client();
    let lib = "#!lua name=Lib1\n\
        redis.register_function('MyFunc', function() return 1 end)\n\
        redis.register_function('MyErr', function() error('x') end)\n\
        redis.register_function('MyCall', function() return redis.call('nosuch') end)\n\
        redis.register_function{function_name='MyRo', callback=function() return 'ro' end, flags={'no-writes'}}";
    let script: &[&[&str]] = &[
        &["FUNCTION", "FLUSH"],
        &["FUNCTION", "LOAD", lib],
        &["FCALL", "myfunc", "0"],
        &["FCALL", "MYFUNC", "0"],
        &["FCALL", "MyFunc", "0"],
        &["FCALL", "myerr", "0"],
        &["FCALL", "MYCALL", "0"],
        &["FCALL_RO", "myro", "0"],
        &["FCALL_RO", "MYFUNC", "0"],
        // Another library may not hold the same name in another case.
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib2\nredis.register_function('myro', function() return 2 end)",
        ],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib2\nredis.register_function('other', function() return 2 end)\n\
             redis.register_function('MYERR', function() return 2 end)",
        ],
        &["FCALL", "other", "0"],
        // Replacing the owning library may change the case.
        &[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=Lib1\nredis.register_function('MYFUNC', function() return 3 end)",
        ],
        &["FCALL", "myfunc", "0"],
        &["FCALL", "myerr", "0"],
        // FUNCTION LIST shows the registered case, LIBRARYNAME matches
        // without case (one function, one library: Redis lists both in
        // hash order).
        &["FUNCTION", "LIST", "LIBRARYNAME", "LIB1"],
        &["FUNCTION", "LIST", "LIBRARYNAME", "l?B*", "WITHCODE"],
        // Library names are case-sensitive: lib1 and LIB1 are two more.
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib1\nredis.register_function('f_lower', function() return 'lower' end)",
        ],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=LIB1\nredis.register_function('f_upper', function() return 'upper' end)",
        ],
        &["FCALL", "F_LOWER", "0"],
        &["FCALL", "f_Upper", "0"],
        &["FUNCTION", "DELETE", "lib1"],
        &["FUNCTION", "DELETE", "lib1"],
        &["FCALL", "f_lower", "0"],
        &["FCALL", "f_upper", "0"],
        &["FUNCTION", "STATS"],
        &["FUNCTION", "DELETE", "LIB1"],
        &["FUNCTION", "DELETE", "Lib1"],
        &["FUNCTION", "LIST"],
    ];
    // Alone, then against redis-server when it is installed.
    let expected = [
        "+OK",
        "$4\r\nLib1",
        ":1",
        ":1",
        ":1",
        "-ERR user_function:3: x script: MyErr, on @user_function:3.",
        "-ERR Unknown Redis command called from script script: MyCall, on @user_function:4.",
        "$2\r\nro",
        "-ERR Can not execute a script with write flag using *_ro command.",
    ];
    for (argv, want) in script.iter().zip(expected) {
        assert_eq!(ours.raw(argv), want, "{argv:?}");
    }
    // Two functions of one library that differ only in case: Redis 7.0-8.x
    // accepts them and then crashes on FUNCTION DELETE of that library (an
    // assertion in libraryUnlink, checked on redis-server 7.0.15); we refuse
    // them as it refuses an exact repeat.
    assert_eq!(
        ours.raw(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=dup\nredis.register_function('aa', function() return 1 end)\n\
             redis.register_function('AA', function() return 2 end)"
        ]),
        "-ERR Error registering functions: ERR Function already exists in the library"
    );
    let Some(redis) = RedisServer::start() else {
        return;
    };
    same_argv(&mut srv.client(), &mut redis.client(), script);
}

/// Shebang lines of EVAL scripts and FUNCTION LOAD libraries are read as
/// Redis 7.0+ reads them: a `#!` line without a newline is an error, the
/// line is split like `sdssplitargs` (`\r` and quotes included), and every
/// error text and its checking order are Redis's.
#[test]
fn shebang_lines_are_read_as_redis_reads_them() {
    let srv = TestServer::start(1);
    let mut ours = srv.client();
    let reg = "\nredis.register_function('f', function() return 1 end)";
    let lib = |header: &str| format!("{header}{reg}");
    let script: Vec<Vec<String>> = [
        // EVAL, EVAL_RO and SCRIPT LOAD
        vec!["EVAL", "#!lua", "0"],
        vec!["EVAL", "#!lua flags=no-writes", "0"],
        vec!["EVAL", "#!notlua", "0"],
        vec!["EVAL", "#!", "0"],
        vec!["EVAL_RO", "#!lua flags=no-writes", "0"],
        vec!["SCRIPT", "LOAD", "#!lua"],
        vec!["EVAL", "#!lua\nreturn 1", "0"],
        vec!["EVAL", "#!lua\r\nreturn 2", "0"],
        vec!["EVAL", "#!lua\t flags=no-writes\r\nreturn 3", "0"],
        vec!["EVAL", "#!\"lua\" 'flags=no-writes'\nreturn 4", "0"],
        vec!["EVAL", "#!\"lua\nreturn 5", "0"],
        vec!["EVAL", "#!lua\"x\" \nreturn 6", "0"],
        vec!["EVAL", "#!notlua\nreturn 1", "0"],
        vec!["EVAL", "#!notlua flags=no-writes\nreturn 1", "0"],
        vec!["EVAL", "#!\nreturn 1", "0"],
        vec!["EVAL", "#! lua\nreturn 1", "0"],
        vec!["EVAL", "#!LUA\nreturn 1", "0"],
        vec!["EVAL", "#!lua flags=\nreturn 7", "0"],
        vec!["EVAL", "#!lua flags=no-writes,,allow-oom\nreturn 1", "0"],
        vec!["EVAL", "#!lua flags=no-writes,\nreturn 1", "0"],
        vec!["EVAL", "#!lua flags=No-writes\nreturn 1", "0"],
        vec!["EVAL", "#!lua FLAGS=no-writes\nreturn 1", "0"],
        vec!["EVAL", "#!lua name=x\nreturn 1", "0"],
        vec!["SCRIPT", "LOAD", "#!notlua\nreturn 1"],
        // FUNCTION LOAD
        vec!["FUNCTION", "LOAD", "#!lua"],
        vec!["FUNCTION", "LOAD", "#!lua name=x"],
        vec!["FUNCTION", "LOAD", "#!notlua"],
        vec!["FUNCTION", "LOAD", "#!"],
        vec!["FUNCTION", "LOAD", "#"],
        vec!["FUNCTION", "LOAD", ""],
        vec!["FUNCTION", "LOAD", "#!notlua name=x\nreturn 1"],
        vec!["FUNCTION", "LOAD", "#!notlua\nreturn 1"],
        vec!["FUNCTION", "LOAD", "#!\nx"],
        vec!["FUNCTION", "LOAD", "#!notlua name=bad-name\nx"],
        vec!["FUNCTION", "LOAD", "#!notlua foo=bar\nx"],
        vec!["FUNCTION", "LOAD", "#!lua name='x\nx"],
        vec!["FUNCTION", "LOAD", "#!lua name=z name=w\nx"],
        vec!["FUNCTION", "LOAD", "#!lua name=z foo\nx"],
        vec!["FUNCTION", "LOAD", "#!lua name=\nx"],
        vec!["FUNCTION", "LOAD", "#!lua flags=no-writes name=q\nx"],
        vec!["FUNCTION", "LOAD", &lib("#!lua name=crlf\r")],
        vec!["FUNCTION", "LOAD", &lib("#!LUA NAME=upper")],
        vec!["FUNCTION", "LOAD", &lib("#!lua\t name=\"quoted\"")],
        vec!["FUNCTION", "LIST", "LIBRARYNAME", "crlf"],
        vec!["FUNCTION", "FLUSH"],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect();
    let expected = [
        "-ERR Invalid script shebang",
        "-ERR Invalid script shebang",
        "-ERR Invalid script shebang",
        "-ERR Invalid script shebang",
        "-ERR Invalid script shebang",
        "-ERR Invalid script shebang",
        ":1",
        ":2",
        ":3",
        ":4",
        "-ERR Invalid engine in script shebang",
    ];
    for (argv, want) in script.iter().zip(expected) {
        assert_eq!(ours.raw(argv), want, "{argv:?}");
    }
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut ours = srv.client();
    let mut theirs = redis.client();
    for (n, argv) in script.iter().enumerate() {
        let a = ours.raw(argv);
        let b = theirs.raw(argv);
        assert_eq!(a, b, "command {n}: {argv:?}\n ours: {a:?}\nredis: {b:?}");
    }
}

/// The RESP3 reply tables a script may return — `big_number`,
/// `verbatim_string`, `double`, `map`, `set` — read in Redis's order of
/// fields and written for the client's protocol (RESP2: bulk strings and
/// arrays), whatever `redis.setresp` the script chose.
#[test]
fn script_resp3_reply_tables_match_redis() {
    let srv = TestServer::start(1);
    let lines = r##"
        EVAL "return {verbatim_string={format='txt', string='hello'}}" 0
        EVAL "return {verbatim_string={format='markdown', string='a\r\nb'}}" 0
        EVAL "return {verbatim_string={format='x', string='hi'}}" 0
        EVAL "return {verbatim_string={format='', string='hi'}}" 0
        EVAL "return {verbatim_string={format='t\0xt', string='nul'}}" 0
        EVAL "return {verbatim_string={format='txt'}}" 0
        EVAL "return {verbatim_string={string='s'}}" 0
        EVAL "return {verbatim_string='plain'}" 0
        EVAL "return {verbatim_string={format=1, string=2}}" 0
        EVAL "return {big_number='123456789012345678901234567890'}" 0
        EVAL "return {big_number='12\r\n34'}" 0
        EVAL "return {big_number=12}" 0
        EVAL "return {big_number='1', double=2.5}" 0
        EVAL "return {big_number='1', map={a=1}}" 0
        EVAL "return {verbatim_string={format='txt', string='v'}, map={a=1}}" 0
        EVAL "return {verbatim_string={format='txt', string='v'}, big_number='7'}" 0
        EVAL "return {set={a=true}, map={b=1}}" 0
        EVAL "return {set={a=true}, 5, 6}" 0
        EVAL "return {double=1.5}" 0
        EVAL "return {double=-2}" 0
        EVAL "return {double=1/0}" 0
        EVAL "return {double=-1/0}" 0
        EVAL "return {double='2.5'}" 0
        EVAL "return {map={a={verbatim_string={format='txt', string='in'}}}}" 0
        EVAL "return {{big_number='9'}, {double=2.5}, {verbatim_string={format='mkd', string='q'}}}" 0
        EVAL "redis.setresp(3); return {big_number='1'}" 0
        EVAL "redis.setresp(3); return {verbatim_string={format='txt', string='hello'}}" 0
        EVAL "redis.setresp(3); return {map={a=true}, set={b=true}}" 0
        EVAL "redis.setresp(3); return {set={[false]=true}}" 0
    "##;
    let mut c = srv.client();
    let eval = |c: &mut RespClient, body: &str| c.raw(&["EVAL", body, "0"]);
    let verbatim = "return {verbatim_string={format='markdown', string='a\\r\\nb'}}";
    let big = "return {big_number='12\\r\\n34'}";
    let mixed =
        "return {{big_number='9'}, {double=2.5}, {verbatim_string={format='x', string='q'}}}";
    assert_eq!(eval(&mut c, verbatim), "$4\r\na\r\nb");
    assert_eq!(eval(&mut c, big), "$6\r\n12  34");
    assert_eq!(eval(&mut c, mixed), "*3\r\n$1\r\n9\r\n$3\r\n2.5\r\n$1\r\nq");
    // Doubles as Redis 7.2+ writes them (shortest round trip; 7.0 wrote
    // %.17g, 0.10000000000000001).
    assert_eq!(eval(&mut c, "return {double=0.1}"), "$3\r\n0.1");
    c.raw(&["HELLO", "3"]);
    assert_eq!(eval(&mut c, verbatim), "=8\r\nmar:a\r\nb");
    assert_eq!(eval(&mut c, big), "(12  34");
    assert_eq!(eval(&mut c, mixed), "*3\r\n(9\r\n,2.5\r\n=5\r\nx  :q");
    assert_eq!(eval(&mut c, "return {double=0.1}"), ",0.1");
    assert_eq!(eval(&mut c, "return {double=0/0}"), ",nan");
    let Some(redis) = RedisServer::start() else {
        return;
    };
    for hello in ["2", "3"] {
        let mut ours = srv.client();
        let mut theirs = redis.client();
        ours.raw(&["HELLO", hello]);
        theirs.raw(&["HELLO", hello]);
        assert_same_replies(&mut ours, &mut theirs, lines);
    }
}

/// A Lua number returned by a script is cast to an integer as Redis's C
/// cast does on x86-64: truncated toward zero, and `i64::MIN` for NaN and
/// for anything outside the i64 range, positive values included.
#[test]
fn script_numbers_become_integers_as_redis_casts_them() {
    let srv = TestServer::start(1);
    let mut c = srv.client();
    let cases = [
        ("return 1e30", ":-9223372036854775808"),
        ("return -1e30", ":-9223372036854775808"),
        ("return 0/0", ":-9223372036854775808"),
        ("return -(0/0)", ":-9223372036854775808"),
        ("return 1/0", ":-9223372036854775808"),
        ("return -1/0", ":-9223372036854775808"),
        ("return 2^63", ":-9223372036854775808"),
        ("return 9223372036854775807", ":-9223372036854775808"),
        ("return -2^63", ":-9223372036854775808"),
        ("return 2^62", ":4611686018427387904"),
        ("return 3.99", ":3"),
        ("return -3.99", ":-3"),
        ("return -0.5", ":0"),
        (
            "return {1e30, 1/0, 0/0, 7.5}",
            "*4\r\n:-9223372036854775808\r\n:-9223372036854775808\r\n\
             :-9223372036854775808\r\n:7",
        ),
        (
            "return {map={a=1e19}}",
            "*2\r\n$1\r\na\r\n:-9223372036854775808",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(c.raw(&["EVAL", body, "0"]), want, "{body}");
    }
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut theirs = redis.client();
    for (body, _) in cases {
        let argv = ["EVAL", body, "0"];
        assert_eq!(c.raw(&argv), theirs.raw(&argv), "{body}");
    }
}

/// Replies nested as deep as Redis allows: each value is converted while
/// the Lua stack Redis's conversion would use has room (7994 nested arrays,
/// 2664 nested maps, ...); one past it is written as `ERR reached lua
/// stack limit` in its place and the rest of the reply stands, for EVAL
/// and FCALL, RESP2 and RESP3. The errors count in INFO as Redis counts
/// them, and the server lives.
#[test]
fn deep_script_replies_end_where_redis_runs_out_of_lua_stack() {
    let srv = TestServer::start(2);
    let mut c = srv.client();
    let nest = |n: usize| format!("local t = 1 for i = 1, {n} do t = {{t}} end return t");
    let limit = "-ERR reached lua stack limit";
    assert_eq!(
        c.raw(&["EVAL", &nest(7994), "0"]),
        format!("{}:1", "*1\r\n".repeat(7994))
    );
    assert_eq!(
        c.raw(&["EVAL", &nest(7995), "0"]),
        format!("{}{limit}", "*1\r\n".repeat(7995))
    );
    assert_eq!(
        c.raw(&["EVAL", &nest(100_000), "0"]),
        format!("{}{limit}", "*1\r\n".repeat(7995))
    );
    // A map's key and value, each past the limit, are both errors.
    let maps = c.raw(&[
        "EVAL",
        "local t = 1 for i = 1, 2665 do t = {map={a=t}} end return t",
        "0",
    ]);
    assert!(
        maps.ends_with(&format!("*2\r\n{limit}\r\n{limit}")),
        "{}",
        &maps[maps.len() - 100..]
    );
    assert_eq!(c.raw(&["PING"]), "+PONG");
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let lib = "#!lua name=deep\nredis.register_function('deep', function(keys, args) \
               local t = 1 for i = 1, tonumber(args[1]) do t = {t} end return t end)";
    let bodies = [
        nest(7994),
        nest(7995),
        nest(20_000),
        "local t = 1 for i = 1, 2664 do t = {map={a=t}} end return t".into(),
        "local t = 1 for i = 1, 2665 do t = {map={a=t}} end return t".into(),
        "local t = 1 for i = 1, 2665 do t = {set={[t]=true}} end return t".into(),
        "local t = 1 for i = 1, 1998 do t = {map={[t]=1}} end return t".into(),
        "local t = 1 for i = 1, 1999 do t = {map={[t]=1}} end return t".into(),
        "local t = {} t[1] = t return {1, t, 'after'}".into(),
        "local t = 1 for i = 1, 8000 do t = {t, {err='E'..i}, i} end return t".into(),
        "local t = true for i = 1, 3000 do t = {map={a=t, b={false, {double=1.5}}}} end return t"
            .into(),
    ];
    for resp in ["2", "3"] {
        let mut ours = srv.client();
        let mut theirs = redis.client();
        ours.raw(&["HELLO", resp]);
        theirs.raw(&["HELLO", resp]);
        for cmd in [
            &["FUNCTION", "LOAD", "REPLACE", lib][..],
            &["CONFIG", "RESETSTAT"],
        ] {
            assert_eq!(ours.raw(cmd), theirs.raw(cmd), "{cmd:?}");
        }
        for body in &bodies {
            let argv = ["EVAL", body.as_str(), "0"];
            let (a, b) = (ours.raw(&argv), theirs.raw(&argv));
            assert!(
                a == b,
                "RESP{resp} `{body}`: {} bytes vs {}",
                a.len(),
                b.len()
            );
        }
        for n in ["7994", "7995"] {
            let argv = ["FCALL", "deep", "0", n];
            assert_eq!(ours.raw(&argv), theirs.raw(&argv), "RESP{resp} FCALL {n}");
        }
        let stats = |c: &mut RespClient| {
            let errors = c.raw(&["INFO", "errorstats"]);
            let eval = c.raw(&["INFO", "commandstats"]);
            let eval = eval
                .split("\r\n")
                .find(|l| l.starts_with("cmdstat_eval:"))
                .map(|l| l.split(",rejected").nth(1).unwrap_or_default().to_string());
            (errors, eval)
        };
        assert_eq!(stats(&mut ours), stats(&mut theirs), "RESP{resp}");
    }
}
