-- Holds that several owners share: the permits of a semaphore, and the
-- read holds and the write hold of a read-write lock (keys: see
-- queue.lua, whose helpers are inserted below; the protocol:
-- docs/protocol.md, "Permits").
--
-- ARGV[1]   owner
-- ARGV[2]   op: a an attempt (hold count 1) or a re-entry; c a
--           confirmation; k a check; r a release; l a waiter leaving
-- ARGV[3]   kind of hold: p a permit, r a read hold, w the write hold
-- ARGV[4]   the semaphore's limit (p); 0 otherwise
-- ARGV[5]   lease in milliseconds
-- ARGV[6]   hold count this call moves the owner to (a, r)
-- ARGV[7]   claim window in milliseconds
-- ARGV[8]   1: a failed attempt joins the wait queue
-- ARGV[9]   publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[10]  linger: how long (ms) the hash of a free key stays
--
-- The hash (KEYS[1]) holds k, the kind: 's' and the limit for a semaphore,
-- 'rw' for a read-write lock; t, the last fencing token; r, the owner of
-- the last full release; and a field '=' .. owner per holder: '<p|r|w>
-- <hold count> <token> <lease end, ms of Redis's clock>', the kind in
-- capitals while a hold handed over is not confirmed. A holder whose
-- lease ended is dropped by the next call, so a permit comes back within
-- a lease of its holder's death. The hash's TTL covers the latest lease.
--
-- Waiters queue first come, first served, as for a lock (queue.lua); a
-- reader is marked in the waits hash ('~' .. owner). Every call hands free
-- room to the waiters at the front while they fit, in order: a writer at
-- the front holds up the readers behind it, and readers behind a writer
-- go in together when it leaves. A waiter handed a hold leaves the queue
-- and keeps the hold for the claim window (its lease end), with the next
-- token, unconfirmed, and is told on its Client's channel ("<from> <owner>
-- <token> <ms>", as a lock's hand-off).
--
-- A Lock's hash (acquire.lua) met by a read hold becomes a read-write
-- lock's, its holder the writer and its waiters writers; met by a permit,
-- it does so only when free with no queue.
--
-- Replies as acquire.lua and release.lua: {count, token}; {0, ms until a
-- lease ends, Redis's time in ms, place in the queue}; {-1, 0} when the
-- owner's hold is gone; {1} and {0} for a release and a leave; {0, 0} for
-- a check. Refusals: {-3, 1} the key is a lock, {-3, 2, limit} a
-- semaphore, {-3, 3} a read-write lock; {-4, limit} a semaphore whose
-- holders use another limit.

--[[token.lua]]

local owner, op, mode = ARGV[1], ARGV[2], ARGV[3]
local lease, claim = tonumber(ARGV[5]), tonumber(ARGV[7])
local publish = ARGV[9]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

-- The hash: meta fields, and the holders whose lease is on. A hand-off
-- that lapsed unconfirmed tells that its Client is most likely dead: its
-- queued waiters are dropped (lapsed; see first in queue.lua).
local meta, holders = {}, {}
local live, writer, soonest, unclaimed = 0, false, nil, {}
local raw = redis.call('HGETALL', KEYS[1])
for i = 1, #raw, 2 do
  local f, v = raw[i], raw[i + 1]
  if string.byte(f, 1) == 61 then -- '='
    local m, c, t, u = string.match(v, '^(%a) (%d+) (%d+) (%d+)$')
    u = tonumber(u)
    if u and u >= now then
      holders[string.sub(f, 2)] = {m = m, c = c, t = t, u = u}
      live = live + 1
      writer = writer or string.lower(m) == 'w'
      soonest = math.min(soonest or u, u)
    else
      if m and m ~= string.lower(m) then
        unclaimed[#unclaimed + 1] = string.sub(f, 2)
      end
      redis.call('HDEL', KEYS[1], f)
    end
  else
    meta[f] = v
  end
end

-- keep has the hash live at least ms more (before a write: see write_lock).
local function keep(ms)
  if redis.call('PTTL', KEYS[1]) < ms then
    redis.call('PEXPIRE', KEYS[1], ms)
  end
end

-- put writes holder o, and the last token as well when it is a new one.
local function put(o, m, c, t, u, new)
  local was = holders[o]
  if not was then
    live = live + 1
    writer = writer or string.lower(m) == 'w'
  end
  holders[o] = {m = m, c = c, t = t, u = u}
  soonest = math.min(soonest or u, u)
  local v = m .. ' ' .. c .. ' ' .. t .. ' ' .. u
  if new then
    meta.t = t
    redis.call('HSET', KEYS[1], '=' .. o, v, 't', t)
  else
    redis.call('HSET', KEYS[1], '=' .. o, v)
  end
end

local function drop(o)
  local was = holders[o]
  holders[o] = nil
  live = live - 1
  if string.lower(was.m) == 'w' then
    writer = false
  end
  redis.call('HDEL', KEYS[1], '=' .. o)
end

-- The room a hold of kind m needs.
local limit = 0
local function fits(m)
  if m == 'p' then
    return live < limit
  elseif m == 'r' then
    return not writer
  end
  return live == 0
end

-- again is a call of a holder, me: a re-entry or release of a level (the
-- count to ARGV[6]), or, at 1, a retried attempt or the confirmation of a
-- hand-off (the lease set from now). It answers the target, as
-- acquire.lua does.
local function again(me)
  if ARGV[6] == '1' then
    keep(lease)
    put(owner, string.lower(me.m), me.c, me.t, now + lease)
  elseif me.c ~= ARGV[6] then
    put(owner, me.m, ARGV[6], me.t, me.u)
  end
  return {tonumber(ARGV[6]), tonumber(me.t)}
end

-- take_new gives the caller, a new owner, a hold of its kind with the
-- next token.
local function take_new()
  local tok, s = next_token(meta.t)
  keep(lease)
  put(owner, mode, '1', s, now + lease, true)
  return {1, tok}
end

-- end_hold ends the caller's hold, noting it as the last to release.
local function end_hold()
  drop(owner)
  redis.call('HSET', KEYS[1], 'r', owner)
end

-- The common cases, before queue.lua's helpers are defined (each
-- definition costs every call that runs it): a holder's re-entry or
-- confirmation, queue or not; and with no queue (q is 1 while one may
-- exist), an attempt on a key of the caller's kind with room, and a last
-- release.
if (op == 'a' or op == 'c') and holders[owner] then
  return again(holders[owner])
end
if meta.q ~= '1' and not meta.o then
  local me = holders[owner]
  if op == 'a' and ARGV[6] == '1' and meta.k == (mode == 'p' and 's' .. ARGV[4] or 'rw') then
    if mode == 'p' then
      limit = tonumber(ARGV[4])
    end
    if fits(mode) then
      return take_new()
    end
  elseif op == 'r' and me and ARGV[6] == '0' then
    end_hold()
    if live == 0 then
      redis.call('PEXPIRE', KEYS[1], ARGV[10])
    end
    return {1}
  end
end

--[[queue.lua]]

-- The Clients of hand-offs that lapsed unclaimed, but the caller's (it
-- lives): see fill.
local lapsed = nil
for _, o in ipairs(unclaimed) do
  local c = client_of(o)
  if c ~= client_of(owner) then
    lapsed = lapsed or {}
    lapsed[c] = true
  end
end

local function mode_of(o)
  if meta.k == 'rw' then
    if redis.call('HEXISTS', KEYS[3], '~' .. o) == 1 then
      return 'r'
    end
    return 'w'
  end
  return 'p'
end

-- hand gives waiter o, first in the queue, a hold of kind m for the claim
-- window, with the next token, and tells it and the watchers of the
-- hand-off (see watch in queue.lua: they check after the window that o
-- took it, in case it is gone). It reports whether o's Client is
-- subscribed (the message reached someone).
local function hand(o, m, from)
  local _, s = next_token(meta.t)
  keep(claim)
  put(o, string.upper(m), '1', s, now + claim, true)
  local msg = hand_off_msg(from, o, s, now)
  local told = tell(publish, o, msg) > 0
  watch(o, msg, now, claim, publish)
  redis.call('LPOP', KEYS[2])
  unwait(o)
  return told
end

-- fill hands the room there is to the waiters at the front, in order,
-- while they fit, and stops at the caller (if it is one: it takes its
-- hold itself). It returns 'me' when the caller's turn came and it fits,
-- 'empty' when no live waiter is left, and 'full' otherwise. After a
-- hand-off that lapsed (a Client most likely dead), a waiter whose Client
-- is not subscribed either is dropped with its Client's waiters rather
-- than handed room for a claim window: a killed process has no
-- subscription left (a stopped one keeps it).
local function fill(caller, from)
  local suspect = lapsed ~= nil
  while true do
    local o = first(now, lapsed)
    lapsed = nil
    if not o then
      if meta.q == '1' then
        redis.call('HSET', KEYS[1], 'q', '0') -- no queue: the common cases apply again
        meta.q = '0'
      end
      return 'empty'
    end
    local m = mode_of(o)
    if not fits(m) then
      return 'full'
    end
    if o == caller then
      return 'me'
    end
    if not hand(o, m, from) and suspect then
      drop(o)
      lapsed = {[client_of(o)] = true}
    end
  end
end

-- settle lets a hash with no holder go after the linger time when fill
-- (its result f) left no queue.
local function settle(f)
  if live == 0 and f == 'empty' then
    redis.call('PEXPIRE', KEYS[1], ARGV[10])
  end
end

-- The kind of key an attempt wants. A Lock's hash (acquire.lua) becomes
-- a read-write lock's when a reader or writer comes, its holder the
-- writer (maybe the caller: then a re-entry), and a semaphore's only when
-- it is free with no queue.
local want = 'rw'
if mode == 'p' then
  want = 's' .. ARGV[4]
end
if op == 'a' and meta.o then
  -- A Lock's hash (acquire.lua).
  local held = meta.n and meta.n ~= '0'
  if want ~= 'rw' and (held or meta.q == '1') then
    return {-3, 1}
  end
  if held then
    -- A holder the lock was handed to that has not confirmed is still
    -- queued (queue.lua): it leaves the queue, unconfirmed.
    local m = 'w'
    if unwait(meta.o) then
      redis.call('LREM', KEYS[2], 1, meta.o)
      m = 'W'
    end
    local ttl = redis.call('PTTL', KEYS[1])
    put(meta.o, m, meta.n, meta.t or '0', now + math.max(ttl, 0))
  end
  redis.call('HDEL', KEYS[1], 'o', 'n', 'open', 'open_until')
  meta.o = nil
  if want == 'rw' then
    redis.call('HSET', KEYS[1], 'k', want)
    meta.k = want
    keep(redis.call('PTTL', KEYS[2])) -- as long as the queue, if any
  end
end

local me = holders[owner]

if op == 'a' or op == 'c' then
  if me then
    return again(me)
  end
  if op == 'c' or ARGV[6] ~= '1' then
    return {-1, 0}
  end
end

if op == 'a' then
  -- The kind of the key, for an attempt of a new owner.
  if meta.k ~= want then
    if meta.k and (live > 0 or redis.call('EXISTS', KEYS[2]) == 1) then
      if meta.k == 'rw' then
        return {-3, 3}
      elseif want == 'rw' then
        return {-3, 2, tonumber(string.sub(meta.k, 2))}
      end
      return {-4, tonumber(string.sub(meta.k, 2))}
    end
    redis.call('HSET', KEYS[1], 'k', want)
    meta.k = want
    if not raw[1] then
      redis.call('PEXPIRE', KEYS[1], math.max(lease, claim))
    end
  end
  if mode == 'p' then
    limit = tonumber(ARGV[4])
  end

  -- First come, first served: with a queue, the caller takes a hold only
  -- when its turn comes; the waiters before it that fit go in first.
  local take
  if redis.call('EXISTS', KEYS[2]) == 1 then
    local f = fill(owner, owner)
    take = f == 'me' or (f == 'empty' and fits(mode))
    if f == 'me' then
      redis.call('LPOP', KEYS[2])
      unwait(owner)
    end
  else
    take = fits(mode)
  end
  if take then
    return take_new()
  end
  local back = claim
  if soonest then
    back = math.max(soonest - now, 1)
  end
  if ARGV[8] == '1' then
    -- The hash, which says the key's kind, lives as long as the queue.
    keep(math.max(back, 1000) + claim)
    local pos = enqueue(owner, now + math.max(back, 1000) + claim, now, meta.q == '1')
    if mode == 'r' then
      redis.call('HSET', KEYS[3], '~' .. owner, 1)
    end
    return {0, back, now, pos}
  end
  return {0, back}
end

if meta.k and string.byte(meta.k, 1) == 115 then -- 's'
  limit = tonumber(string.sub(meta.k, 2))
end

if op == 'k' then
  fill(nil, owner)
  return {0, 0}
end

if op == 'r' then
  if not me then
    if ARGV[6] == '0' and meta.r == owner then
      return {1} -- a retry of a release that went through
    end
    if ARGV[6] == '0' and unwait(owner) then
      redis.call('LREM', KEYS[2], 1, owner)
      fill(nil, owner)
    end
    return {0}
  end
  if ARGV[6] ~= '0' then
    put(owner, me.m, ARGV[6], me.t, me.u)
    return {1}
  end
  end_hold()
  settle(fill(nil, owner))
  return {1}
end

-- op == 'l': a waiter stopped waiting; a hold handed to it goes on.
local queued = unwait(owner)
if queued then
  redis.call('LREM', KEYS[2], 1, owner)
end
if me then
  drop(owner)
end
if queued or me then
  settle(fill(nil, owner))
  return 1
end
return 0
