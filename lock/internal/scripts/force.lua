-- Ends the hold on a lock, whoever its owner (ForceUnlock; keys: see
-- queue.lua, whose helpers are inserted below).
--
-- ARGV[1]  who forces it: the owner noted as the last to release, after a
--          '!' that marks the release as forced
-- ARGV[2]  claim window in milliseconds; 0 when there is no queue
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  linger: how long (ms) the hash of a free lock stays
-- ARGV[5]  the owner whose hold to end; '' for any
-- ARGV[6]  'r' after share.lua's releases of the owners ARGV[7..], in the
--          same MULTI (a semaphore or read-write lock); else missing
--
-- The hand-off is told to every Client with a queued waiter, so that
-- one of them checks after the claim window that it was taken, as the
-- releasing Client does after a release (the forcing Client, often a
-- short-lived command, may be gone by then): a waiter in a frozen process
-- holds the others up one claim window at most.
--
-- The old owner's renewals and re-entries then find it gone (so its
-- watchdog ends its hold with ErrLost), and so does its unlock: r names
-- the forcing Client, not the old owner. The lock goes to the first live
-- waiter, with the next token, as a release would hand it over; without
-- one it is marked free and the hash keeps the last token, so the next
-- token is larger than the old owner's either way.
--
-- Returns {0} when no one held the lock; {2, owner} when owner held it,
-- not ARGV[5]; else {1, old owner, its token}, followed by the waiter and
-- its token when the lock was handed over.
--
-- A semaphore or read-write lock (the hash has k: see share.lua) is not
-- ended here: the reply is {3, Redis's time in ms}, then owner and field
-- value of each holder whose lease has not ended, and the caller runs
-- share.lua's release of each, then this script with ARGV[6] 'r', all in
-- one MULTI. share.lua's release names the owner in r; with 'r' this
-- script names the forcing Client there instead, as for a lock, so the
-- old owner's unlock finds its hold gone rather than released. That call
-- returns {3}.

local h = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'q', 'k')
if h[5] then
  if ARGV[6] == 'r' then
    local r = redis.call('HGET', KEYS[1], 'r')
    for i = 7, #ARGV do
      if r == ARGV[i] then
        redis.call('HSET', KEYS[1], 'r', '!' .. ARGV[1])
        break
      end
    end
    return {3}
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local res = {3, now}
  local raw = redis.call('HGETALL', KEYS[1])
  for i = 1, #raw, 2 do
    if string.byte(raw[i], 1) == 61 then -- '=': a holder
      if tonumber(string.match(raw[i + 1], ' (%d+)$') or '0') >= now then
        res[#res + 1] = string.sub(raw[i], 2)
        res[#res + 1] = raw[i + 1]
      end
    end
  end
  return res
end

--[[token.lua]]
--[[queue.lua]]

if tonumber(h[2] or '0') == 0 then
  return {0}
end
if ARGV[5] ~= '' and h[1] ~= ARGV[5] then
  return {2, h[1]}
end
local from = '!' .. ARGV[1]
local claim = tonumber(ARGV[2])
local res = {1, h[1], tonumber(h[3] or '0')}
if unwait(h[1]) then
  redis.call('LREM', KEYS[2], 1, h[1]) -- a waiter the lock was handed to
end
if claim > 0 and h[4] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then
  local o, tok = hand_off(from, h[3], claim, ARGV[3], true)
  if o then
    res[4], res[5] = o, tok
    return res
  end
end
let_go(from, ARGV[4])
if claim == 0 then
  redis.call(ARGV[3], KEYS[4], from)
end
return res
