-- Extends the leases of many held locks in one call (the watchdog's batch).
--
-- KEYS[i]      lock hash
-- ARGV[2i-1]   owner expected in KEYS[i]
-- ARGV[2i]     lease in milliseconds
--
-- A lease is extended only while its owner still holds the lock: a renewal
-- never takes a lock that was lost. Returns 1 (renewed) or 0 (gone) per key.
local res = {}
for i, key in ipairs(KEYS) do
  local h = redis.call('HMGET', key, 'o', 'n')
  if h[1] == ARGV[2 * i - 1] and h[2] and h[2] ~= '0' then -- held (see acquire.lua)
    redis.call('PEXPIRE', key, ARGV[2 * i])
    res[i] = 1
  else
    res[i] = 0
  end
end
return res
