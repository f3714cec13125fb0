-- Releases one hold level of owner ARGV[1] (keys: see queue.lua, whose
-- helpers are inserted where the queue part begins).
--
-- ARGV[1]  owner
-- ARGV[2]  hold count this call moves the owner to
-- ARGV[3]  claim window in milliseconds; 0 when there is no queue
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[5]  linger: how long (ms) the hash of a free lock stays
--
-- The count is set to the target, so a retried command changes nothing
-- more. At zero the lock goes to the first live queued waiter, if any (a
-- hand-off, announced on the channel); otherwise it is marked free, with
-- the owner noted as the last to release. Without a queue (claim window 0)
-- the release itself is announced, with the owner, to every waiter.
--
-- Returns {-3} when the key has shared holds (see acquire.lua).
-- Returns {1} when the owner's count is at the target, or {1, waiter,
-- token, ms} when the lock was handed to waiter with token at Redis's time
-- ms; {0} when the owner's hold is gone: it is not in the hash, and was not
-- the last to release (if it was handed the lock and lost it unconfirmed,
-- it leaves the queue, passing a free key on as leave.lua does). A retried release whose first try went through
-- finds itself noted as the last to release: {1}, or {1, waiter, token, 0}
-- while the waiter it handed the lock to holds it, so that the releasing
-- Client still wakes its own waiter, which the hand-off sent no message
-- (the time unknown, that waiter confirms before it counts on the lock).
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'r', 'q', 'k')
if h[6] then
  return {-3} -- shared holds (see acquire.lua)
end
-- Hold counts are compared as strings (see acquire.lua).
local holds = h[1] == ARGV[1] and h[2] and h[2] ~= '0'

-- The common cases, before the queue's helpers are defined (defining them
-- costs each call that needs none): a level that is not the last (two
-- redis.calls), and the last one with no queue, which marks the lock free
-- as let_go does (three).
if holds and ARGV[2] ~= '0' then
  redis.call('HSET', KEYS[1], 'n', ARGV[2])
  return {1}
end
if holds and h[5] ~= '1' and ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  redis.call('HSET', KEYS[1], 'n', '0', 'r', ARGV[1])
  return {1}
end

--[[token.lua]]
--[[queue.lua]]

local n = tonumber(ARGV[2])

if not holds then
  if n == 0 and h[4] == ARGV[1] then
    if h[1] and tonumber(h[2] or '0') > 0 then
      return {1, h[1], tonumber(h[3]), 0}
    end
    return {1}
  end
  if n == 0 and unwait(ARGV[1]) then
    -- Handed the lock, lost it unconfirmed. If it was the first waiter of
    -- a free key, the key passes on as when a waiter leaves (leave.lua);
    -- r keeps naming the last owner that released it in full.
    local head = redis.call('LINDEX', KEYS[2], 0) == ARGV[1]
    redis.call('LREM', KEYS[2], 1, ARGV[1])
    if head and tonumber(h[2] or '0') == 0 and hand_off(ARGV[1], h[3], tonumber(ARGV[3]), ARGV[4], true) then
      if h[4] then
        redis.call('HSET', KEYS[1], 'r', h[4])
      else
        redis.call('HDEL', KEYS[1], 'r')
      end
    end
  end
  return {0}
end
local claim = tonumber(ARGV[3])
if claim == 0 then
  let_go(ARGV[1], ARGV[5])
  redis.call(ARGV[4], KEYS[4], ARGV[1])
  return {1}
end
-- The queue flag is set (the common cases took the rest); the queue may
-- be gone, which hand_off finds.
if unwait(ARGV[1]) then -- handed the lock, still first in the queue
  redis.call('LREM', KEYS[2], 1, ARGV[1])
end
local o, tok, now = hand_off(ARGV[1], h[3], claim, ARGV[4], false, true)
if o then
  return {1, o, tok, now}
end
let_go(ARGV[1], ARGV[5])
return {1}
