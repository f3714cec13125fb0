-- Extends the leases of many held locks in one call (the watchdog's batch).
--
-- KEYS[i]      lock hash
-- ARGV[2i-1]   owner expected in KEYS[i]
-- ARGV[2i]     lease in milliseconds
--
-- A lease is extended only while its owner still holds the lock: a renewal
-- never takes a lock that was lost. Returns 1 (renewed) or 0 (gone) per key.
--
-- A shared hold (share.lua) is its field '=' .. owner, whose lease end is
-- set from Redis's time, while it has not ended.
local res = {}
local now
for i, key in ipairs(KEYS) do
  local o = ARGV[2 * i - 1]
  local h = redis.call('HMGET', key, 'o', 'n', '=' .. o)
  res[i] = 0
  if h[1] == o and h[2] and h[2] ~= '0' then -- held (see acquire.lua)
    redis.call('PEXPIRE', key, ARGV[2 * i])
    res[i] = 1
  elseif h[3] then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local head, u = string.match(h[3], '^(%a %d+ %d+) (%d+)$')
    if u and tonumber(u) >= now then
      local lease = tonumber(ARGV[2 * i])
      if redis.call('PTTL', key) < lease then
        redis.call('PEXPIRE', key, lease)
      end
      redis.call('HSET', key, '=' .. o, head .. ' ' .. (now + lease))
      res[i] = 1
    end
  end
end
return res
