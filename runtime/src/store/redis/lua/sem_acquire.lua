-- sem_acquire: take `count` permits of a semaphore, if that many are free among its limit.
-- Every permit is a member of the holders' sorted set, `token:i`, scored with the end of its
-- lease: a holder that crashed stops being counted once its lease ended, without anyone
-- cleaning up after it (no counter to leak).
--
-- KEYS[1]  the holders   P:sem:{K}       (sorted set: `token:i` -> end of its lease, ms)
-- KEYS[2]  the limit     P:semlimit:{K}  (the number of permits the holders agreed on)
-- KEYS[3]  the fence     P:semfence:{K}  (the fence counter of the semaphore's holders)
-- ARGV[1]  the holder's owner token (32 characters)
-- ARGV[2]  its lease in milliseconds
-- ARGV[3]  the limit this caller asks for
-- ARGV[4]  how many permits it takes (1 ..= limit)
-- ARGV[5]  how long the fence counter outlives its last use, in milliseconds
--
-- The holders and the limit live as long as the longest lease of a holder, and go with the
-- last holder. The fence counter lives on (fence_ttl): every holder gets one fencing token,
-- whatever its permits, reserved by the writers' rule (fence.lua), so a permit's token is
-- above every token of the semaphore handed out before, also after a restart from a
-- snapshot or AOF, a failover, or the counter's expiry.
--
-- Returns 1, fence   when the permits are the caller's now, with the holder's fencing token;
--         0, wait    when too few are free: milliseconds until the first holder's lease ends;
--         -1, limit  when the holders agreed on another limit (nothing changed).
local holders, agreed_key, fence_key = KEYS[1], KEYS[2], KEYS[3]
local token, lease = ARGV[1], tonumber(ARGV[2])
local limit, count = tonumber(ARGV[3]), tonumber(ARGV[4])
local fence_ttl = ARGV[5]
local now = clock_ms()
redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
local used = redis.call('ZCARD', holders)
if used > 0 then
  local agreed = tonumber(redis.call('GET', agreed_key) or '')
  if agreed and agreed ~= limit then
    return {-1, agreed}
  end
end
if used + count > limit then
  local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  return {0, math.max(1, tonumber(first[2]) - now)}
end
local ends = now + lease
for i = 1, count do
  redis.call('ZADD', holders, ends, token .. ':' .. i)
end
local ttl = math.max(redis.call('PTTL', holders), lease)
redis.call('PEXPIRE', holders, ttl)
redis.call('SET', agreed_key, limit, 'PX', ttl)
return {1, reserve_fences(fence_key, 1, fence_ttl)}
