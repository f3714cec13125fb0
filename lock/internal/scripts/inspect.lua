-- Reads what Redis holds about one lock, semaphore or read-write lock and
-- changes nothing (Inspect, Held and the lockkit command; keys: see
-- queue.lua; a shared key's fields: see share.lua).
--
-- KEYS[1..3]  lock hash, queue list, waits hash
-- ARGV[1]     how many waiters from the front of the queue to return
-- ARGV[2]     how many holders of a shared key to return
--
-- Returns {Redis's time in ms, the hash's PTTL, o, n, t, r, open,
-- open_until, k, queue length, live holders of a shared key, holders
-- returned}, then owner and field value ('<p|r|w> <hold count> <token>
-- <lease end>') of each holder returned (the first live ones the hash
-- yields), then owner, deadline, the time it joined and the reader mark
-- ('1' for a queued reader) of each of the first waiters; a missing field
-- is ''. Holders whose lease ended are counted out but stay in the hash
-- until share.lua's next call drops them. The cost grows with the number
-- of holders, as share.lua's own calls do.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'r', 'open', 'open_until', 'k')
local res = {now, redis.call('PTTL', KEYS[1])}
for i = 1, 7 do
  res[#res + 1] = h[i] or ''
end
res[#res + 1] = redis.call('LLEN', KEYS[2])

local live, listed = {}, 0
if h[7] then
  local most = tonumber(ARGV[2])
  local raw = redis.call('HGETALL', KEYS[1])
  for i = 1, #raw, 2 do
    if string.byte(raw[i], 1) == 61 then -- '=': a holder
      local u = tonumber(string.match(raw[i + 1], ' (%d+)$') or '0')
      if u >= now then
        live[#live + 1] = i
      end
    end
  end
  res[#res + 1] = #live
  listed = math.min(#live, most)
  res[#res + 1] = listed
  for j = 1, listed do
    local i = live[j]
    res[#res + 1] = string.sub(raw[i], 2)
    res[#res + 1] = raw[i + 1]
  end
else
  res[#res + 1] = 0
  res[#res + 1] = 0
end

local max = tonumber(ARGV[1])
if max > 0 then
  for _, w in ipairs(redis.call('LRANGE', KEYS[2], 0, max - 1)) do
    local v = redis.call('HMGET', KEYS[3], w, '>' .. w, '~' .. w)
    res[#res + 1] = w
    res[#res + 1] = v[1] or ''
    res[#res + 1] = v[2] or ''
    res[#res + 1] = v[3] or ''
  end
end
return res
