-- Releases one hold level of owner ARGV[1] on KEYS[1].
--
-- KEYS[1]  lock hash: owner -> hold count
-- KEYS[2]  release channel
-- ARGV[1]  owner
-- ARGV[2]  hold count this call moves the owner to
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Only the release that drops the count to zero deletes the key, and it
-- announces the release on KEYS[2] so waiters try at once. A retried command
-- finds the count already at the target and changes nothing.
--
-- Returns 1 when the count is at the target, 0 when the owner's hold is gone.
local n = tonumber(ARGV[2])
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if cur == n then
  return 1
end
if cur ~= n + 1 then
  return 0
end
if n > 0 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  return 1
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], KEYS[2], '')
return 1
