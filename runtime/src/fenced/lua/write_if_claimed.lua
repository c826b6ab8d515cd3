-- write_if_claimed: set fields of a hash only while the hash's `fence` field holds the
-- writer's own token, which its claim put there (leasehold::fenced::WRITE_IF_CLAIMED_LUA;
-- runs after fence_cmp.lua). A newer holder's claim replaced it: the writer's lease ended, and
-- what it read may be stale, so nothing is written.
--
-- KEYS[1]         the hash
-- ARGV[1]         the writer's fencing token, a canonical decimal
-- ARGV[2], ...    field, value, field, value, ... (none: only check the claim)
--
-- Returns {1, token} when written, and
--         {0, stored} when refused (stored: the token in the hash, a string; "" when the hash
--         has none: it was deleted, expired or evicted since the claim, or never claimed).
-- Fails, writing nothing, when the token is not a canonical decimal, the fields do not come in
-- pairs or name `fence`.
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
if stored ~= fence then
  return {0, stored or ''}
end
-- One HSET per field: unpack(ARGV, 2) would fail past a few thousand fields (Lua's C stack).
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return {1, fence}
