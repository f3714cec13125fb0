-- Stores an answer of the Idempotency-Key middleware, fenced.
-- KEYS[1]: the answer's hash.
-- ARGV: fencing token (decimal, no leading zeros; 0: none), retention in
-- ms, fingerprint, status, headers, body.
-- Returns 1 when stored; 2 when an answer with our token (not 0) is
-- stored already: an earlier attempt of the same hold, which Redis ran
-- after its caller gave up on it; 0 when refused: an answer with a newer
-- token is stored (a later holder wrote it), or we have no token (0) and
-- any answer is stored. Tokens are compared as decimal strings, exact
-- past 2^53.
local stored = redis.call('HGET', KEYS[1], 'token')
if stored then
  local ours = ARGV[1]
  if stored == ours and ours ~= '0' then
    return 2
  end
  if ours == '0' or #stored > #ours or (#stored == #ours and stored > ours) then
    return 0
  end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'fp', ARGV[3], 'status', ARGV[4],
  'headers', ARGV[5], 'body', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
