-- Takes waiter ARGV[1], which stopped waiting, out of the queue (keys: see
-- queue.lua, whose helpers are inserted below). If the lock was handed to
-- it, or the free lock's turn was its own, the lock goes to the next waiter
-- at once. Any other waiter's turn is left as it is, so waiters leaving
-- never extend a turn; when the lock was handed to another waiter that has
-- not confirmed yet, the watchers of that hand-off are told again (the one
-- leaving may have been one), and when the lock is free, waiters at the
-- front that missed their turns are dropped (see next_turn).
--
-- ARGV[1]  owner
-- ARGV[2]  claim window in milliseconds
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  linger: how long (ms) the hash of a free lock stays
--
-- Returns 1 when the waiter was queued or held the lock, else 0; -3 when
-- the key has shared holds (see acquire.lua), left untouched.

--[[token.lua]]
--[[queue.lua]]

if redis.call('HEXISTS', KEYS[1], 'k') == 1 then
  return -3 -- shared holds (see acquire.lua)
end

local queued = unwait(ARGV[1])
local head = false
if queued then
  head = redis.call('LINDEX', KEYS[2], 0) == ARGV[1]
  redis.call('LREM', KEYS[2], 1, ARGV[1])
end
local h = redis.call('HMGET', KEYS[1], 'o', 'n', 't')
local count = tonumber(h[2] or '0')
local holds = h[1] == ARGV[1] and count > 0
local claim = tonumber(ARGV[2])
if holds or (head and count == 0) then
  -- No releasing Client checks this hand-off after the window: every
  -- Client with a queued waiter is told to.
  if not hand_off(ARGV[1], h[3], claim, ARGV[3], true) and holds then
    let_go(ARGV[1], ARGV[4])
  end
elseif queued and count > 0 then
  -- If the lock was handed to h[1], which has not confirmed, the waiter
  -- leaving may have been told to watch that hand-off, so the watchers now
  -- are told instead (see watch).
  local msg, now = unconfirmed(h, ARGV[1])
  if msg then
    watch(h[1], msg, now, claim, ARGV[3])
  end
elseif queued then
  -- The lock is free: a hand-off or turn of the waiter at the front may
  -- have lapsed unnoticed, and the waiter leaving may have been told to
  -- check it. It checks now.
  next_turn(now_ms(), claim, ARGV[3], ARGV[1])
end
if queued or holds then
  return 1
end
return 0
