-- Reads what Redis holds about one lock and changes nothing (Inspect, Held
-- and the lockkit command; keys: see queue.lua).
--
-- KEYS[1..3]  lock hash, queue list, waits hash
-- ARGV[1]     how many waiters from the front of the queue to return
--
-- Returns {Redis's time in ms, the hash's PTTL, o, n, t, r, open,
-- open_until, queue length}, then owner, deadline and the time it joined
-- for each of the first waiters; a missing field is ''.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'r', 'open', 'open_until')
local res = {now, redis.call('PTTL', KEYS[1])}
for i = 1, 6 do
  res[#res + 1] = h[i] or ''
end
res[#res + 1] = redis.call('LLEN', KEYS[2])
local max = tonumber(ARGV[1])
if max > 0 then
  for _, w in ipairs(redis.call('LRANGE', KEYS[2], 0, max - 1)) do
    local v = redis.call('HMGET', KEYS[3], w, '>' .. w)
    res[#res + 1] = w
    res[#res + 1] = v[1] or ''
    res[#res + 1] = v[2] or ''
  end
end
return res
