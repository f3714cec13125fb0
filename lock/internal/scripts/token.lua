-- The fencing token of a lock, inserted into acquire.lua, release.lua,
-- leave.lua and force.lua where the line --[[token.lua]] is: before
-- queue.lua, whose hand-offs use it too.

-- next_token returns the token after last (nil when the hash is gone), as
-- a number and as the string stored.
local function next_token(last)
  local tok
  if last then
    tok = tonumber(last) + 1
  else
    local t = redis.call('TIME')
    tok = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return tok, string.format('%.0f', tok)
end
