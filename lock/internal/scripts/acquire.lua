-- Takes the lock for owner ARGV[1], or enters it once more (keys: see
-- queue.lua, whose helpers are inserted where the queue part begins; the
-- protocol: docs/protocol.md).
--
-- ARGV[1]  owner
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  hold count this call moves the owner to
-- ARGV[4]  claim window in milliseconds; 0 leaves the queue alone
-- ARGV[5]  mode: 0 one attempt; 1 the caller waits: a failed attempt
--          joins the queue; 2 a confirmation, which never takes the lock;
--          3 a check, which never takes the lock either but drops waiters
--          that missed their turn (see the queue part) and returns {0, ms
--          until the first waiter's turn or place ends}, 0 when the lock
--          is held or nobody waits; 4 a watch: the
--          caller, a Client that closes, will not check a hand-off it made,
--          so every Client with a queued waiter is told to (see watch)
-- ARGV[6]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- The count is set to the target, not incremented, so a command retried
-- after its reply was lost changes nothing more. An acquisition or a
-- confirmation (target 1) that finds the owner in place (the lock was
-- handed to it, or this is a retry) sets the lease from now, takes the
-- owner out of the queue and leaves the count as it is. A free lock with
-- queued waiters is taken only by the one whose turn it is.
--
-- Returns {count, token} on success; {0, ms until it is worth trying
-- again} when another owner holds the lock, {-2, ms} when the lock is free
-- but kept for the waiter whose turn it is, both with Redis's time in ms
-- and the caller's place in the queue (1 first; 0 when it was queued
-- already) as third and fourth elements when the caller waits; {-1, 0} when the owner's hold
-- is gone (lost); {-3, 0} when the key has shared holds (k is set: see
-- share.lua), for which the caller runs share.lua instead.
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'q', 'k')
if h[5] then
  return {-3, 0} -- shared holds: share.lua
end
-- Hold counts are whole numbers in decimal, as Redis writes a Lua number
-- and the caller its target: the common cases compare them as strings,
-- for tonumber and a number passed to redis.call each cost Redis a
-- strtod or an snprintf.
local held = h[2] and h[2] ~= '0'
local flagged = h[4] == '1'

-- The owner in place with no queue (a re-entry, a confirmation, a retry):
-- two redis.calls.
if held and h[1] == ARGV[1] and not flagged then
  if ARGV[3] == '1' then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  elseif h[2] ~= ARGV[3] then
    redis.call('HSET', KEYS[1], 'n', ARGV[3])
  end
  return {tonumber(ARGV[3]), tonumber(h[3])}
end

--[[token.lua]]

-- An attempt on a free lock that no queue holds up takes it at the end:
-- three redis.calls when the hash is left from the last release, five
-- when it is gone and so is the queue. Only the other cases define the
-- queue's helpers (each definition costs every call that runs it).
local free = not held and not flagged and ARGV[3] == '1' and (ARGV[5] == '0' or ARGV[5] == '1')
-- A queue may exist only if the hash says so or is gone.
local queued = free and not h[1] and ARGV[4] ~= '0' and redis.call('EXISTS', KEYS[2]) == 1
if not free or queued then
  --[[queue.lua]]

  local n = tonumber(ARGV[3])
  local count = tonumber(h[2] or '0')
  if ARGV[5] == '4' then
    local msg = unconfirmed(h, ARGV[1])
    if msg then
      tell_queue(ARGV[6], msg, client_of(h[1]))
    end
    return {0, 0}
  end
  local claim = tonumber(ARGV[4])
  local waits = claim > 0 and ARGV[5] == '1'
  local check = ARGV[5] == '3'
  local only_mine = n > 1 or ARGV[5] == '2' -- never take the lock
  if count > 0 then
    if h[1] == ARGV[1] then
      if n == 1 then
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        if flagged and unwait(ARGV[1]) then
          redis.call('LREM', KEYS[2], 1, ARGV[1])
        end
      elseif count ~= n then
        redis.call('HSET', KEYS[1], 'n', n)
      end
      return {n, tonumber(h[3])}
    end
    if only_mine then
      return {-1, 0}
    end
    if check then
      return {0, 0} -- taken: nothing left to check
    end
    local pttl = redis.call('PTTL', KEYS[1])
    if waits then
      local now = now_ms()
      local pos = enqueue(ARGV[1], now + math.max(pttl, 1000) + claim, now, flagged)
      return {0, pttl, now, pos}
    end
    return {0, pttl}
  end
  if only_mine then
    return {-1, 0}
  end
  -- Free. A queue may exist only if the hash says so or is gone (queued
  -- may tell already).
  queued = queued or (claim > 0 and (flagged or not h[1]) and redis.call('EXISTS', KEYS[2]) == 1)
  if queued then
    local now = now_ms()
    local o, d = next_turn(now, claim, ARGV[6], ARGV[1])
    if check then
      -- o's turn or place is still on: check again when it ends.
      return {0, o and math.max(d - now, 0) or 0}
    end
    local open = redis.call('HMGET', KEYS[1], 'open', 'open_until')
    local from = tonumber(open[1] or '0')
    local is_open = from > 0 and now < tonumber(open[2] or '0')
    if o == ARGV[1] or (o and is_open and from <= now) then
      redis.call('LREM', KEYS[2], 1, ARGV[1])
      unwait(ARGV[1])
      if from > 0 then
        redis.call('HDEL', KEYS[1], 'open', 'open_until')
      end
    elseif o then
      local back = d - now
      if is_open and from > now then
        back = from - now -- come back when the turn opens
      end
      if waits then
        local pos = enqueue(ARGV[1], d + claim, now, true)
        return {-2, back, now, pos}
      end
      return {-2, back}
    end
  end
  if check then
    return {0, 0}
  end
end
local tok, s = next_token(h[3])
-- The queue flag stays while a queue may exist, and goes with the queue.
if queued or flagged then
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', '1', 't', s, 'q', queued and '1' or '0')
else
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', '1', 't', s)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, tok}
