-- Takes KEYS[1] for owner ARGV[1], or enters it once more.
--
-- KEYS[1]  lock hash: owner -> hold count
-- KEYS[2]  fencing counter (never expires)
-- ARGV[1]  owner
-- ARGV[2]  lease in milliseconds (used for a first acquisition only)
-- ARGV[3]  hold count this call moves the owner to
--
-- The target count makes the script idempotent: a command retried after
-- its reply was lost finds the count already at the target and changes
-- nothing.
--
-- Returns {count, token} on success, {0, remaining lease in ms} when another
-- owner holds the lock, {-1, 0} when the owner's hold is gone (lost).
local n = tonumber(ARGV[3])
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if cur == n then
  return {n, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if cur ~= n - 1 then
  return {-1, 0}
end
if n > 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  return {n, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token}
