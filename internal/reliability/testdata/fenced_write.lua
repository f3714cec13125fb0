-- A store fenced by lock tokens: writes ARGV[2] to KEYS[1] unless a write
-- with a higher fencing token was accepted before.
--
-- KEYS[1]  store hash: "token" (highest token accepted), "value"
-- ARGV[1]  the writer's fencing token
-- ARGV[2]  value
--
-- Returns 1 when the write is accepted, 0 when the token is stale.
local token = tonumber(ARGV[1])
local highest = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if token < highest then
  return 0
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 1
