-- Shared by the scripts that hand out fencing tokens (concatenated in front of them).
--
-- reserve_fences(fence_key, count, ttl_ms) -> integer
--   Reserves `count` consecutive fencing tokens of one lock and returns the highest; the
--   caller owns top - count + 1 .. top. Keeps the counter alive for ttl_ms.
--   A missing counter (never used, or expired after ttl_ms of disuse) is first seeded from the
--   server clock in microseconds, so a recreated counter still starts above every token
--   handed out before it expired. The seed is built as a string: Lua would print a number
--   this large in exponent form.
local function reserve_fences(fence_key, count, ttl_ms)
  if redis.call('EXISTS', fence_key) == 0 then
    local now = redis.call('TIME')
    redis.call('SET', fence_key, now[1] .. string.format('%06d', tonumber(now[2])))
  end
  local top = redis.call('INCRBY', fence_key, count)
  redis.call('PEXPIRE', fence_key, ttl_ms)
  return top
end
