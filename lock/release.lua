-- Releases one hold level of owner ARGV[1] on KEYS[1].
--
-- KEYS[1]  lock hash: owner -> hold count
-- KEYS[2]  fence hash: released -> owner of the last release
-- KEYS[3]  release channel
-- ARGV[1]  owner
-- ARGV[2]  hold count this call moves the owner to
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- The count is set to the target, so a retried command changes nothing
-- more. At zero the key is deleted, the owner noted as the last to release,
-- and the release announced on KEYS[3] with the owner, so waiters try at
-- once (and its own Client's waiters know they were told already).
--
-- Returns 1 when the owner's count is at the target, 0 when its hold is
-- gone: the key is missing at a count above zero, or another owner has it
-- although this owner did not release it (a retried release whose first
-- try went through finds itself noted).
local n = tonumber(ARGV[2])
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if cur == 0 then
  if n == 0 and (redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[2], 'released') == ARGV[1]) then
    return 1
  end
  return 0
end
if n > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], n)
  return 1
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'released', ARGV[1])
redis.call(ARGV[3], KEYS[3], ARGV[1])
return 1
