-- Takes waiter ARGV[1], which stopped waiting, out of the queue (keys: see
-- the queue part above). If it was first and the lock is free, the turn
-- was its own: it goes to the next waiter at once. Any other waiter's turn
-- is left as it is, so waiters leaving never extend a turn.
--
-- ARGV[1]  owner
-- ARGV[2]  claim window in milliseconds
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Returns 1 when the waiter was queued, else 0.
if redis.call('HDEL', KEYS[4], ARGV[1]) == 0 then
  return 0
end
local head = redis.call('LINDEX', KEYS[3], 0) == ARGV[1]
redis.call('LREM', KEYS[3], 1, ARGV[1])
if head and redis.call('EXISTS', KEYS[1]) == 0 then
  give_turn(tonumber(ARGV[2]), ARGV[3], ARGV[1])
end
return 1
