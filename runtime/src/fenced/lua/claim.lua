-- claim: a holder's first touch of a record, which makes it the record's holder before it
-- reads anything (leasehold::fenced::CLAIM_LUA; runs after fence_cmp.lua). The record's
-- `fence` field is raised to the holder's token, unless a newer token is there already, and
-- the record is returned as it is after the claim. From then on no older holder's write is
-- accepted (write_if_claimed.lua wants the record's token to be the writer's own, and
-- write_if_newer.lua a token not older than it), so nothing the claimer read can be
-- overwritten behind its back by a holder before it, however late that write arrives.
--
-- KEYS[1]  the hash
-- ARGV[1]  the holder's fencing token, a canonical decimal
--
-- Returns {1, field, value, field, value, ...} when claimed (every field of the hash after
--         the claim, `fence` among them), and
--         {0, newest} when refused (newest: the newer token stored in the hash, a string).
-- Fails, changing nothing, when the token is not a canonical decimal or the hash's `fence`
-- holds something else than a token.
local fence = ARGV[1]
if not leasehold_is_fence(fence) then
  return redis.error_reply('ERR fenced claim: the fencing token must be a decimal without leading zeros')
end
local stored = redis.call('HGET', KEYS[1], 'fence')
if stored then
  if not leasehold_is_fence(stored) then
    return redis.error_reply('ERR fenced claim: the hash\'s `fence` field does not hold a fencing token')
  end
  if leasehold_fence_cmp(fence, stored) < 0 then
    return {0, stored}
  end
end
if stored ~= fence then
  redis.call('HSET', KEYS[1], 'fence', fence)
end
local record = redis.call('HGETALL', KEYS[1])
table.insert(record, 1, 1)
return record
