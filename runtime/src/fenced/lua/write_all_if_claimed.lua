-- write_all_if_claimed: set fields of several hashes at once, only while every one of them
-- holds its writer's own token, which its claim put there (leasehold::fenced::
-- WRITE_ALL_IF_CLAIMED_LUA; runs after fence_cmp.lua): a transfer between two records, under
-- a claim of each, is written whole or not at all.
--
-- KEYS[1..n]   the hashes (on a Redis Cluster: of one slot, as every script's keys)
-- ARGV         for each hash in KEYS' order: the writer's token for it (a canonical decimal),
--              the number of fields to set, then field, value, field, value, ...
--
-- Returns {1} when every hash carried its writer's token and every field was set, and
--         {0, i, stored} when the i-th hash did not (stored: its token, a string, "" when it
--         has none): nothing was written.
-- Fails, writing nothing, when a token is not a canonical decimal, a count is not a whole
-- number, the arguments do not add up, or a field is named `fence`.
local plan = {}
local at = 1
for i = 1, #KEYS do
  local fence = ARGV[at]
  if not leasehold_is_fence(fence) then
    return redis.error_reply('ERR fenced write: the fencing token must be a decimal without leading zeros')
  end
  -- A count of fields, not a token: a Lua number holds it exactly.
  local count = tonumber(ARGV[at + 1])
  if not count or count < 0 or count % 1 ~= 0 then
    return redis.error_reply('ERR fenced write: each record needs its number of fields')
  end
  local first, last = at + 2, at + 1 + 2 * count
  if last > #ARGV then
    return redis.error_reply('ERR fenced write: fields and values must come in pairs')
  end
  for f = first, last, 2 do
    if ARGV[f] == 'fence' then
      return redis.error_reply('ERR fenced write: the field `fence` holds the fencing token and cannot be written')
    end
  end
  plan[i] = {fence, first, last}
  at = last + 1
end
if at ~= #ARGV + 1 then
  return redis.error_reply('ERR fenced write: the arguments do not add up to the records given')
end
for i = 1, #KEYS do
  local stored = redis.call('HGET', KEYS[i], 'fence')
  if stored ~= plan[i][1] then
    return {0, i, stored or ''}
  end
end
for i = 1, #KEYS do
  for f = plan[i][2], plan[i][3], 2 do
    redis.call('HSET', KEYS[i], ARGV[f], ARGV[f + 1])
  end
end
return {1}
