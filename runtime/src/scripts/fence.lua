-- Shared by the scripts that hand out fencing tokens (concatenated in front of them).
--
-- reserve_fences(fence_key, count, ttl_ms) -> integer
--   Reserves `count` consecutive fencing tokens of one lock and returns the highest; the
--   caller owns top - count + 1 .. top.
--   A missing counter (never used, or expired after ttl_ms of disuse) comes back from INCRBY
--   as exactly `count`; it is then seeded from the server clock in microseconds, so a
--   recreated counter still starts above every token handed out before it expired. (The
--   seed is built as a string: Lua would print a number this large in exponent form.)
--   The counter's expiry is pushed back about every 64 tokens rather than on every call:
--   it only has to outlive idle periods, and the clock seed keeps tokens increasing anyway.
local function reserve_fences(fence_key, count, ttl_ms)
  local top = redis.call('INCRBY', fence_key, count)
  if top == count then
    local now = redis.call('TIME')
    redis.call('SET', fence_key, now[1] .. string.format('%06d', tonumber(now[2])), 'PX', ttl_ms)
    top = redis.call('INCRBY', fence_key, count)
  elseif top % 64 < count then
    redis.call('PEXPIRE', fence_key, ttl_ms)
  end
  return top
end
