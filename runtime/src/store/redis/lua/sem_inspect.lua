-- sem_inspect: the holders of one semaphore, read atomically, for operators (the protocol
-- never calls it). Owner tokens stay in the server: only their public parts leave it.
--
-- KEYS[1]  the holders   P:sem:{K}
-- KEYS[2]  the limit     P:semlimit:{K}
--
-- Returns {limit, permits_1, remaining_1, public_1, permits_2, remaining_2, public_2, ...}:
-- the agreed limit (-1 when nobody holds a permit), then each live holder's permits, remaining
-- lease in milliseconds and its token's public part (owner.lua: who it is; '' when the token
-- has none), the soonest to end first.
local now = clock_ms()
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
if #members == 0 then
  return {-1}
end
local limit = tonumber(redis.call('GET', KEYS[2]) or '-1')
local order, by_token = {}, {}
for i = 1, #members, 2 do
  local token = string.match(members[i], '^(.*):%d+$') or members[i]
  local holder = by_token[token]
  if not holder then
    holder = {0, tonumber(members[i + 1]) - now, public_part(token)}
    by_token[token] = holder
    order[#order + 1] = holder
  end
  holder[1] = holder[1] + 1
end
local out = {limit}
for _, holder in ipairs(order) do
  out[#out + 1] = holder[1]
  out[#out + 1] = holder[2]
  out[#out + 1] = holder[3]
end
return out
