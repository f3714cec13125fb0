-- Ends the hold on a lock, whoever its owner (ForceUnlock; keys: see
-- queue.lua, whose helpers are inserted below).
--
-- ARGV[1]  who forces it: the owner noted as the last to release, after a
--          '!' that marks the release as forced
-- ARGV[2]  claim window in milliseconds; 0 when there is no queue
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  linger: how long (ms) the hash of a free lock stays
-- ARGV[5]  the owner whose hold to end; '' for any
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

--[[token.lua]]
--[[queue.lua]]

local h = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'q')
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
