-- shardstream's Lua sandbox, built once per Lua state (one per shard thread).
-- It runs with the full base library and hands back what the Rust side needs;
-- scripts only ever see the environment `E` built here.
--
-- E is empty: reads fall through to G (the allowed globals), writes fail as
-- Redis 7+'s read-only globals do, and reading an unknown name fails with
-- Redis's "nonexistent global variable" error. Library tables are read-only
-- views of the real ones.
local rs = ...
local real_rawset, real_setmetatable, real_loadstring, real_load, real_setfenv =
  rawset, setmetatable, loadstring, load, setfenv
local type, error, select, unpack, xpcall, pairs, ipairs, tostring =
  type, error, select, unpack, xpcall, pairs, ipairs, tostring

local G = {}
local E = {}
local holder = rs.holder
local views = real_setmetatable({}, { __mode = 'k' })

local function readonly()
  error('Attempt to modify a readonly table', 2)
end

local function view(t)
  local v = real_setmetatable({}, { __index = t, __newindex = readonly, __metatable = false })
  views[v] = true
  return v
end

for _, name in ipairs({ 'assert', 'collectgarbage', 'error', 'gcinfo', 'getmetatable', 'ipairs',
  'next', 'pairs', 'pcall', 'rawequal', 'rawget', 'select', 'setmetatable', 'tonumber',
  'tostring', 'type', 'unpack', 'xpcall', '_VERSION' }) do
  G[name] = _G[name]
end
G.rawset = function(t, k, v)
  if t == E or views[t] then
    error('Attempt to modify a readonly table', 2)
  end
  return real_rawset(t, k, v)
end
-- pcall answers an error table by its `err` text, as Redis's own pcall
-- does (`luaRedisPcall`): `local ok, err = pcall(redis.call, ...)` gets a
-- string. A table without one is answered as it is (followed by the
-- missing field's nil, as Redis leaves it).
local real_pcall = pcall
local function pcall_result(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == 'table' then
    local text = e.err
    if type(text) == 'string' or type(text) == 'number' then return false, text end
    return false, e, text
  end
  return false, ...
end
G.pcall = function(...) return pcall_result(real_pcall(...)) end
G.loadstring = function(s, name)
  local f, e = real_loadstring(s, name)
  if f then real_setfenv(f, E) end
  return f, e
end
G.load = function(fn, name)
  local f, e = real_load(fn, name)
  if f then real_setfenv(f, E) end
  return f, e
end
G.string = view(string)
G.table = view(table)
G.math = view(math)
G.coroutine = view(coroutine)
G.bit = view(rs.bit)
G.struct = view(rs.struct)
G.cjson = view(rs.cjson)
G.cmsgpack = view(rs.cmsgpack)
-- Redis 7.4+ exposes only os.clock().
G.os = view({ clock = os.clock })
G._G = E
getmetatable('').__metatable = false

-- The redis library of scripts and functions at run time.
local redis = {}
-- C functions, so a `return redis.call(...)` keeps the caller's frame (and
-- its line for the error reply) as Redis's own C implementation does.
redis.call = rs.call
redis.pcall = rs.pcall
-- `-CODE text` keeps its code; text without one gets `ERR` (so do `''` and
-- `'-'`); the text loses CR/LF at its ends and is cut at a NUL byte, as
-- Redis reads it as a C string.
redis.error_reply = function(msg)
  if select('#', msg) ~= 1 or type(msg) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  msg = msg:match('^[^%z]*')
  if msg:sub(1, 1) ~= '-' then msg = '-' .. msg end
  local code, text
  local sp = msg:find(' ', 1, true)
  if sp then
    code, text = msg:sub(2, sp - 1), msg:sub(sp + 1)
  else
    code, text = 'ERR', msg:sub(2)
  end
  text = (text:gsub('^[\r\n]+', ''))
  text = (text:gsub('[\r\n]+$', ''))
  return { err = code .. ' ' .. text }
end
redis.status_reply = function(msg)
  if type(msg) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return { ok = msg }
end
-- Rust (C) functions: errors they raise keep the caller's line.
redis.sha1hex = rs.sha1hex
redis.log = rs.log
redis.setresp = rs.setresp
redis.set_repl = rs.set_repl
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = rs.acl_check
redis.REDIS_VERSION = rs.version
redis.REDIS_VERSION_NUM = rs.version_num
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
G.redis = view(redis)

-- FUNCTION LOAD: the library body sees a redis library with register_function.
local known_flags = { ['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
  ['no-cluster'] = true, ['allow-cross-slot-keys'] = true }
local function fail(msg) error({ err = msg }) end
local function register_function(...)
  local reg = holder.registered
  if not reg then fail('ERR redis.register_function can only be called on FUNCTION LOAD command') end
  local n = select('#', ...)
  local name, cb, flags, desc
  if n == 1 then
    local t = ...
    if type(t) ~= 'table' then
      fail('ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
    end
    for k, v in pairs(t) do
      if k == 'function_name' then name = v
      elseif k == 'callback' then cb = v
      elseif k == 'flags' then flags = v
      elseif k == 'description' then desc = v
      else fail('ERR unknown argument given to redis.register_function') end
    end
    if name == nil then fail('ERR redis.register_function must get a function name argument') end
    if cb == nil then fail('ERR redis.register_function must get a callback argument') end
  elseif n == 2 then
    name, cb = ...
    if type(name) == 'number' then name = tostring(name) end
  else
    fail('ERR wrong number of arguments to redis.register_function')
  end
  if type(name) ~= 'string' then fail('ERR function_name argument given to redis.register_function must be a string') end
  if type(cb) ~= 'function' then fail('ERR callback argument given to redis.register_function must be a function') end
  if desc ~= nil and type(desc) ~= 'string' then
    fail('ERR description argument given to redis.register_function must be a string')
  end
  if not name:match('^[%w_]+$') then
    fail('ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
  end
  local fl = {}
  if flags ~= nil then
    if type(flags) ~= 'table' then
      fail('ERR flags argument to redis.register_function must be a table representing function flags')
    end
    for _, f in pairs(flags) do
      if type(f) ~= 'string' or not known_flags[f] then fail('ERR unknown flag given') end
      fl[#fl + 1] = f
    end
  end
  -- Function names are case-insensitive (FCALL finds 'f' as 'F'), so two
  -- names differing only in case clash here. Redis 7.0-8.x compares them
  -- with case at this point and accepts the pair, which leaves a library
  -- that FUNCTION DELETE crashes on (valkey-io/valkey#3925): we refuse it.
  local lname = name:lower()
  for _, r in ipairs(reg) do
    if r.name:lower() == lname then fail('ERR Function already exists in the library') end
  end
  reg[#reg + 1] = { name = name, callback = cb, flags = fl, description = desc }
end
local load_redis = real_setmetatable({
  register_function = register_function,
  log = rs.log,
  setresp = rs.setresp,
  REDIS_VERSION = redis.REDIS_VERSION,
  REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
}, { __index = function(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end })
local GL = real_setmetatable({ redis = view(load_redis) }, { __index = G })

real_setmetatable(G, { __index = function(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end })
real_setmetatable(E, { __index = G, __newindex = readonly, __metatable = false })

local handler = rs.handler
local function run(f, ...)
  local n = select('#', ...)
  local args = { ... }
  return xpcall(function() return f(unpack(args, 1, n)) end, handler)
end

local function run0(f)
  return xpcall(f, handler)
end

return {
  run0 = run0,
  E = E,
  G = G,
  holder = holder,
  run = run,
  load_meta = { __index = GL, __newindex = readonly, __metatable = false },
  run_meta = { __index = G, __newindex = readonly, __metatable = false },
}
