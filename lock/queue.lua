-- The wait queue of one lock, first come first served across all Clients.
-- It is prepended to acquire.lua, release.lua and leave.lua, which share
-- this key layout:
--
-- KEYS[1]  lock hash: owner -> hold count, with the lease as TTL
-- KEYS[2]  fence hash: fencing token and last releasing owner
-- KEYS[3]  queue list: waiting owners in arrival order
-- KEYS[4]  waits hash: waiting owner -> deadline (ms of Redis's clock)
-- KEYS[5]  release channel
--
-- A Lock call whose attempt fails joins the queue and stays in it while it
-- tries again before its deadline: the holder's remaining lease (or the
-- time the waiter was told to come back after) plus the claim window. When
-- the lock becomes free the first live waiter gets its turn: the lock is
-- kept for it for the claim window and the turn is announced on the
-- channel as "<from> <owner>". A waiter that misses its turn is dropped,
-- with every other waiter of its Client, and the next one gets the turn;
-- from a tenth of the window into that turn the key goes to whichever
-- queued waiter asks first (fields 'open' and 'open_until' of the fence
-- hash), so that waiters of several dead processes stall a free key about
-- one claim window in all, not one each.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- client_of is the Client part of owner o ("<client id>:<seq>").
local function client_of(o)
  return string.match(o, '^(.*):') or o
end

-- drop_client takes every queued waiter of client c out of the queue: one
-- of them missed its turn, so its process is most likely dead, and its
-- other waiters would each hold up the queue for a claim window. A live
-- waiter dropped by mistake queues again at its next attempt.
local function drop_client(c)
  for _, o in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
    if client_of(o) == c then
      redis.call('LREM', KEYS[3], 1, o)
      redis.call('HDEL', KEYS[4], o)
    end
  end
end

-- first drops the waiters at the front whose deadline passed, with every
-- other waiter of their Clients, and returns the first live one (or nil),
-- its deadline, and whether any was dropped.
local function first(now)
  local dropped = false
  while true do
    local o = redis.call('LINDEX', KEYS[3], 0)
    if not o then
      return nil, 0, dropped
    end
    local d = tonumber(redis.call('HGET', KEYS[4], o) or '0')
    if d > now then
      return o, d, dropped
    end
    drop_client(client_of(o))
    dropped = true
  end
end

-- announce starts owner o's turn and tells it so; from is the owner whose
-- call did it. Returns the turn's deadline.
local function announce(o, now, claim, publish, from)
  local d = now + claim
  redis.call('HSET', KEYS[4], o, d)
  redis.call(publish, KEYS[5], from .. ' ' .. o)
  return d
end

-- give_turn gives the free lock's turn to the first live waiter, if any,
-- and returns that waiter.
local function give_turn(claim, publish, from)
  if redis.call('EXISTS', KEYS[3]) == 0 then
    return nil
  end
  local now = now_ms()
  local o = first(now)
  if o then
    announce(o, now, claim, publish, from)
  end
  return o
end

-- enqueue puts owner at the back of the queue unless it is in it already,
-- with the given deadline, and keeps both keys until the latest deadline.
local function enqueue(owner, deadline, now)
  if redis.call('HSET', KEYS[4], owner, deadline) == 1 then
    redis.call('RPUSH', KEYS[3], owner)
  end
  local ttl = deadline - now
  if redis.call('PTTL', KEYS[4]) < ttl then
    redis.call('PEXPIRE', KEYS[4], ttl)
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
end
