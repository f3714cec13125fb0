-- Takes KEYS[1] for owner ARGV[1], or enters it once more.
--
-- KEYS[1]  lock hash: owner -> hold count
-- KEYS[2]  fence hash: token -> last fencing token (never expires)
-- ARGV[1]  owner
-- ARGV[2]  lease in milliseconds (used for a first acquisition only)
-- ARGV[3]  hold count this call moves the owner to
--
-- The count is set to the target, not incremented, so a command retried
-- after its reply was lost changes nothing more.
--
-- Returns {count, token} on success, {0, remaining lease in ms} when another
-- owner holds the lock, {-1, 0} when the owner's hold is gone (lost).
local n = tonumber(ARGV[3])
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
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('HINCRBY', KEYS[2], 'token', 1)
redis.call('HSET', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token}
