-- Takes the lock for owner ARGV[1], or enters it once more (keys: see the
-- queue part above).
--
-- ARGV[1]  owner
-- ARGV[2]  lease in milliseconds (used for a first acquisition only)
-- ARGV[3]  hold count this call moves the owner to
-- ARGV[4]  claim window in milliseconds; 0 leaves the queue alone
-- ARGV[5]  1 when the caller waits: a failed attempt joins the queue
-- ARGV[6]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- The count is set to the target, not incremented, so a command retried
-- after its reply was lost changes nothing more. A free lock with queued
-- waiters is taken only by the one whose turn it is.
--
-- Returns {count, token} on success, {0, ms until it is worth trying again}
-- when another owner holds the lock, {-2, ms} when the lock is free but
-- kept for the waiter whose turn it is, {-1, 0} when the owner's hold is
-- gone (lost).
local n = tonumber(ARGV[3])
local claim = tonumber(ARGV[4])
local waits = claim > 0 and ARGV[5] == '1'
if redis.call('EXISTS', KEYS[1]) == 1 then
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
  if cur > 0 then
    if cur ~= n then
      redis.call('HSET', KEYS[1], ARGV[1], n)
    end
    return {n, tonumber(redis.call('HGET', KEYS[2], 'token') or '0')}
  end
  if n > 1 then
    return {-1, 0}
  end
  local pttl = redis.call('PTTL', KEYS[1])
  if waits then
    local now = now_ms()
    enqueue(ARGV[1], now + math.max(pttl, 1000) + claim, now)
  end
  return {0, pttl}
end
if n > 1 then
  return {-1, 0}
end
if claim > 0 and redis.call('EXISTS', KEYS[3]) == 1 then
  local now = now_ms()
  local o, d, dropped = first(now)
  if dropped and o then
    -- The waiters before o missed their turns: o's begins now. Their
    -- process is most likely dead, and so may be the processes of the
    -- waiters behind them: after a grace of a tenth of the window, which
    -- lets a live o take its turn, the key goes to the first queued waiter
    -- that asks until o's turn ends, so that dead processes do not hold it
    -- up one claim window each.
    d = announce(o, now, claim, ARGV[6], ARGV[1])
    redis.call('HSET', KEYS[2], 'open', now + math.floor(claim / 10), 'open_until', d)
  end
  local from = tonumber(redis.call('HGET', KEYS[2], 'open') or '0')
  local open = from > 0 and now < tonumber(redis.call('HGET', KEYS[2], 'open_until') or '0')
  if o == ARGV[1] or (o and waits and open and from <= now) then
    redis.call('LREM', KEYS[3], 1, ARGV[1])
    redis.call('HDEL', KEYS[4], ARGV[1])
    if from > 0 then
      redis.call('HDEL', KEYS[2], 'open', 'open_until')
    end
  elseif o then
    if waits then
      enqueue(ARGV[1], d + claim, now)
    end
    if open and from > now then
      return {-2, from - now} -- come back when the turn opens
    end
    return {-2, d - now}
  end
end
local token = redis.call('HINCRBY', KEYS[2], 'token', 1)
redis.call('HSET', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token}
