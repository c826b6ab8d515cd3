-- write_if_newer: a blind fenced write (leasehold::fenced::WRITE_IF_NEWER_LUA; runs after
-- fence_cmp.lua). Sets fields of a hash only if the writer's fencing token is not older than
-- the one stored in the hash's `fence` field, and stores the token there, in one step. An
-- equal token is the same holder writing again, and is accepted.
--
-- Blind: it cannot tell what the writer read. A value computed from a read of the record can
-- lose an update: an older holder's write that arrives between the newer holder's read and
-- its write is accepted (no newer token has written yet). Claim the record before reading it
-- (claim.lua), and write with write_if_claimed.lua.
--
-- KEYS[1]         the hash
-- ARGV[1]         the writer's fencing token, a canonical decimal ("0", or digits without a
--                 leading zero)
-- ARGV[2], ...    field, value, field, value, ... (none: record the token only)
--
-- Returns {1, token} when written (the hash's fence is now the writer's token), and
--         {0, newest} when refused (newest: the newer token stored in the hash, a string).
-- Fails, writing nothing, when the token is not a canonical decimal, the fields do not come
-- in pairs or name `fence`, or the hash's `fence` holds something else than a token.
local fence = ARGV[1]
if not leasehold_is_fence(fence) then
  return redis.error_reply('ERR fenced write: the fencing token must be a decimal without leading zeros')
end
if #ARGV % 2 ~= 1 then
  return redis.error_reply('ERR fenced write: fields and values must come in pairs')
end
for i = 2, #ARGV, 2 do
  if ARGV[i] == 'fence' then
    return redis.error_reply('ERR fenced write: the field `fence` holds the fencing token and cannot be written')
  end
end
local stored = redis.call('HGET', KEYS[1], 'fence')
if stored then
  if not leasehold_is_fence(stored) then
    return redis.error_reply('ERR fenced write: the hash\'s `fence` field does not hold a fencing token')
  end
  if leasehold_fence_cmp(fence, stored) < 0 then
    return {0, stored}
  end
end
redis.call('HSET', KEYS[1], 'fence', fence)
-- One HSET per field: unpack(ARGV, 2) would fail past a few thousand fields (Lua's C stack).
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return {1, fence}
