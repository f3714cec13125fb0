-- Releases one hold level of owner ARGV[1] (keys: see the queue part
-- above).
--
-- ARGV[1]  owner
-- ARGV[2]  hold count this call moves the owner to
-- ARGV[3]  claim window in milliseconds; 0 when there is no queue
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- The count is set to the target, so a retried command changes nothing
-- more. At zero the key is deleted and the owner noted as the last to
-- release; then the first queued waiter gets its turn, announced on the
-- channel. Without a queue (claim window 0) the release itself is
-- announced, with the owner, to every waiter.
--
-- Returns {1, next} when the owner's count is at the target, next being
-- the waiter given the turn (or nil); {0, nil} when the owner's hold is
-- gone: the key is missing at a count above zero, or another owner has it
-- although this owner did not release it (a retried release whose first
-- try went through finds itself noted).
local n = tonumber(ARGV[2])
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if cur == 0 then
  if n == 0 and (redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[2], 'released') == ARGV[1]) then
    return {1, false}
  end
  return {0, false}
end
if n > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], n)
  return {1, false}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'released', ARGV[1])
local claim = tonumber(ARGV[3])
if claim == 0 then
  redis.call(ARGV[4], KEYS[5], ARGV[1])
  return {1, false}
end
return {1, give_turn(claim, ARGV[4], ARGV[1]) or false}
