-- The data of one lock and its wait queue, first come first served across
-- all Clients. This part is inserted into acquire.lua, release.lua,
-- leave.lua and force.lua where their queue part begins (the line
-- --[[queue.lua]]), after the common cases that need none of it and
-- after token.lua; they share this key layout:
--
-- KEYS[1]  lock hash, with the lease as TTL:
--            o  the owner (while n > 0; afterwards the last one)
--            n  its hold count, a whole number in decimal; "0" or missing
--               when the lock is free
--            t  the last fencing token handed out
--            r  the owner of the last full release
--            q  1 when a wait queue may exist; 0 or missing: none does
--            open, open_until  a turn open to any caller from open on
-- KEYS[2]  queue list: waiting owners in arrival order
-- KEYS[3]  waits hash: waiting owner -> deadline (ms of Redis's clock),
--          and '>' .. owner -> when it joined the queue (ms), for Inspect
-- KEYS[4]  channel of the lock: a Client waiting for it listens on
--          "KEYS[4]:<client id>" for hand-offs and turns of its waiters
--
-- The protocol these helpers implement (states, transitions, who is
-- told) is docs/protocol.md; lock/internal/protocol models it in Go, and
-- TestScriptsFollowTheModel checks these scripts against that model.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- client_of is the Client part of owner o ("<client id>:<seq>").
local function client_of(o)
  return string.match(o, '^(.*):') or o
end

-- unwait takes owner o out of the waits hash (its deadline, when it
-- joined, and the mark of a reader: see share.lua) and reports whether it
-- was there. The caller takes it out of the queue list.
local function unwait(o)
  return redis.call('HDEL', KEYS[3], o, '>' .. o, '~' .. o) > 0
end

-- first drops the waiters at the front whose deadline passed, with every
-- other waiter of their Clients (one of them missed its turn, so its
-- process is most likely dead, and its other waiters would each hold up
-- the queue for a claim window; a live waiter dropped by mistake queues
-- again at its next attempt), and returns the first live one (or nil),
-- its deadline, and whether any was dropped. The dropped Clients' waiters
-- further back go in one pass over the queue, so the cost grows with the
-- queue's length, not its square. lapsed, unless nil, names Clients known
-- to be dead already (share.lua: a hand-off of theirs lapsed), whose
-- waiters go too.
local function first(now, lapsed)
  local dead, dropped = lapsed or {}, lapsed ~= nil
  local o, d
  while true do
    o = redis.call('LINDEX', KEYS[2], 0)
    if not o then
      return nil, 0, dropped
    end
    d = tonumber(redis.call('HGET', KEYS[3], o) or '0')
    local c = client_of(o)
    if d > now and not dead[c] then
      break
    end
    dead[c], dropped = true, true
    redis.call('LPOP', KEYS[2])
    unwait(o)
  end
  if dropped then
    local rest = redis.call('LRANGE', KEYS[2], 0, -1)
    local keep = {}
    for _, w in ipairs(rest) do
      if dead[client_of(w)] then
        unwait(w)
      else
        keep[#keep + 1] = w
      end
    end
    if #keep < #rest then
      local ttl = redis.call('PTTL', KEYS[2])
      redis.call('DEL', KEYS[2])
      for i = 1, #keep, 1000 do
        redis.call('RPUSH', KEYS[2], unpack(keep, i, math.min(i + 999, #keep)))
      end
      if ttl > 0 then
        redis.call('PEXPIRE', KEYS[2], ttl)
      end
    end
  end
  return o, d, dropped
end

-- front is first(now) for a hand-off: it reads the first 17 waiters in
-- one call and, when the first is live (the common case), returns them as
-- well, so that watch need not read the queue again.
local function front(now)
  local head = redis.call('LRANGE', KEYS[2], 0, 16)
  if head[1] then
    local d = tonumber(redis.call('HGET', KEYS[3], head[1]) or '0')
    if d > now then
      return head[1], d, head
    end
  end
  local o, d = first(now)
  return o, d, nil
end

-- tell sends msg to the Client of owner o, on its channel of the lock,
-- and returns how many connections Redis delivered it to: 0 when that
-- Client is not subscribed (its process died, and its connection with it).
local function tell(publish, o, msg)
  return redis.call(publish, KEYS[4] .. ':' .. client_of(o), msg)
end

-- hand_off_msg is the message of a hand-off to owner o with token tok at
-- Redis's time now, by owner from: "<from> <owner> <token> <ms>".
local function hand_off_msg(from, o, tok, now)
  return from .. ' ' .. o .. ' ' .. tok .. ' ' .. now
end

-- unconfirmed returns, when the lock (h: its hash's o, n and t) was
-- handed to an owner that has not confirmed yet (it is still in the waits
-- hash), the message of that hand-off as from would tell it, and Redis's
-- time; else nil.
local function unconfirmed(h, from)
  if tonumber(h[2] or '0') == 0 or redis.call('HEXISTS', KEYS[3], h[1]) == 0 then
    return nil
  end
  local now = now_ms()
  return hand_off_msg(from, h[1], h[3], now), now
end

-- tell_queue sends msg to every Client with a queued waiter, once each,
-- but the Client skip (nil: none).
local function tell_queue(publish, msg, skip)
  local told = {}
  if skip then
    told[skip] = true
  end
  for _, w in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    local c = client_of(w)
    if not told[c] then
      told[c] = true
      tell(publish, w, msg)
    end
  end
end

-- write_lock sets fields of the lock hash and gives it a TTL of ttl ms.
-- PEXPIRE comes first: Redis never refuses it for memory, and once a
-- script wrote, its later writes are not refused either, so a full Redis
-- still hands the lock over or lets it go. When the hash was missing
-- (its lease ran out while the queue lived on), that PEXPIRE found
-- nothing and HSET creates the hash: it gets its TTL after the write, so
-- no lock hash ever lives without one.
local function write_lock(ttl, ...)
  local had = redis.call('PEXPIRE', KEYS[1], ttl) == 1
  redis.call('HSET', KEYS[1], ...)
  if not had then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end

-- watch tells the watchers of the hand-off msg at now to o, so that one
-- of them checks after the claim window that o took the lock: the rule
-- is protocol.Watchers (lock/internal/protocol/watchers.go), which this
-- follows on the first 17 and last 16 waiters.
local function watch(o, msg, now, claim, publish, head)
  head = head or redis.call('LRANGE', KEYS[2], 0, 16) -- o first, as a hand-off leaves it
  local told = {[client_of(o)] = true}
  local ws = {}
  local function consider(w)
    local c = client_of(w)
    if not told[c] then
      told[c] = true
      ws[#ws + 1] = w
    end
  end
  for i = 2, #head do
    consider(head[i])
    if #ws == 2 then
      break
    end
  end
  local tail, from = head, 2 -- the whole queue behind o, when it holds fewer than 16
  if #head == 17 then
    tail, from = redis.call('LRANGE', KEYS[2], -16, -1), 1
  end
  local before = #ws
  for i = #tail, from, -1 do -- the last waiter of a Client not told yet
    consider(tail[i])
    if #ws > before then
      break
    end
  end
  if #ws == 0 then
    return
  end
  local ds = redis.call('HMGET', KEYS[3], unpack(ws))
  for i, w in ipairs(ws) do
    if not ds[i] or tonumber(ds[i]) > now + 2 * claim then
      tell(publish, w, msg)
    end
  end
end

-- announce starts owner o's turn after waiters before it missed theirs,
-- and tells every Client with a queued waiter: o takes its turn, the
-- others try when it opens to any of them. from is the owner whose call
-- did it. Returns the turn's deadline.
local function announce(o, now, claim, publish, from)
  local d = now + claim
  redis.call('HSET', KEYS[3], o, d)
  tell_queue(publish, from .. ' ' .. o, nil)
  return d
end

-- next_turn drops the waiters at the front of the queue that missed their
-- turns (see first) and, if any was, starts the turn of the first live one
-- (see announce), open to any caller from a tenth of the window on (the
-- waiters behind a dead one may be dead too). from is the owner whose
-- call does it. Returns the first live waiter, its deadline and whether
-- any was dropped.
local function next_turn(now, claim, publish, from)
  local o, d, dropped = first(now)
  if dropped and o then
    d = announce(o, now, claim, publish, from)
    redis.call('HSET', KEYS[1], 'open', now + math.floor(claim / 10), 'open_until', d, 'q', 1)
    if redis.call('PTTL', KEYS[1]) < claim then
      redis.call('PEXPIRE', KEYS[1], claim)
    end
  end
  return o, d, dropped
end

-- hand_off gives the free lock to the first live waiter, if any, for the
-- claim window, and tells it so; from is the owner that let go of it, last
-- the last token. A waiter whose Client was subscribed when told keeps its
-- place half a window more (a silent connection finds out within that).
-- With replied set a waiter of from's Client gets no message (the
-- caller's reply tells it). The waiter stays first in the queue until it
-- confirms. With all set every other Client with a queued waiter is told
-- (no releasing Client checks this hand-off), else the watchers (see
-- watch). Returns the waiter, the token and Redis's time in ms, or nil.
local function hand_off(from, last, claim, publish, all, replied)
  local now = now_ms()
  local o, d, head = front(now)
  if not o then
    return nil
  end
  local tok, s = next_token(last)
  write_lock(claim, 'o', o, 'n', '1', 't', s, 'r', from, 'q', '1', 'open', '0')
  local msg = hand_off_msg(from, o, s, now)
  local keep = claim
  if not (replied and client_of(o) == client_of(from)) and tell(publish, o, msg) > 0 then
    keep = claim + math.floor(claim / 2)
  end
  redis.call('HSET', KEYS[3], o, now + keep)
  -- The queue lives until o's place ends: it does already when o's
  -- deadline was later (the queue keys live until the latest deadline
  -- enqueue set; 1 ms for the rounding of their TTLs).
  if d <= now + keep + 1 then
    local ttl = redis.call('PTTL', KEYS[3])
    if ttl >= 0 and ttl < keep then
      redis.call('PEXPIRE', KEYS[3], keep)
      redis.call('PEXPIRE', KEYS[2], keep)
    end
  end
  if all then
    tell_queue(publish, msg, client_of(o))
  else
    watch(o, msg, now, claim, publish, head)
  end
  return o, tok, now
end

-- let_go marks the lock free after owner's last release, with no waiter
-- left (the queue flag goes), and keeps the hash for linger ms.
local function let_go(owner, linger)
  write_lock(linger, 'n', '0', 'r', owner, 'q', '0')
end

-- enqueue puts owner at the back of the queue unless it is in it already,
-- with the given deadline, keeps both queue keys until the latest
-- deadline, and flags the queue in the lock hash (flagged tells it is
-- already), which lives at least as long as the queue when this creates it.
-- It returns owner's place in the queue (1 first) when it adds it, else 0.
local function enqueue(owner, deadline, now, flagged)
  local pos = 0
  if redis.call('HSET', KEYS[3], owner, deadline) == 1 then
    pos = redis.call('RPUSH', KEYS[2], owner)
    redis.call('HSET', KEYS[3], '>' .. owner, now)
  end
  local ttl = deadline - now
  if redis.call('PTTL', KEYS[3]) < ttl then
    redis.call('PEXPIRE', KEYS[3], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  if not flagged then
    redis.call('HSET', KEYS[1], 'q', 1)
    if redis.call('PTTL', KEYS[1]) < 0 then
      redis.call('PEXPIRE', KEYS[1], ttl)
    end
  end
  return pos
end
