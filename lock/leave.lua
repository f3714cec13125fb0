-- Takes waiter ARGV[1], which stopped waiting, out of the queue (keys: see
-- the queue part above). If the lock is free, the turn that may have been
-- the waiter's goes to the next one at once.
--
-- ARGV[1]  owner
-- ARGV[2]  claim window in milliseconds
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Returns 1 when the waiter was queued, else 0.
if redis.call('HDEL', KEYS[4], ARGV[1]) == 0 then
  return 0
end
redis.call('LREM', KEYS[3], 1, ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  give_turn(tonumber(ARGV[2]), ARGV[3], ARGV[1])
end
return 1
