-- Shared by acquire.lua and handoff.lua (concatenated in front of them at build time).
--
-- next_fence(fence_key, ttl_ms) -> integer
--   Increments and returns the fencing counter of one lock, and keeps it alive for ttl_ms.
--   A missing counter (never used, or expired after ttl_ms of disuse) is first seeded from the
--   server clock in microseconds, so a recreated counter still starts above every token
--   handed out before it expired (one key cannot take more than one lock per microsecond).
--   The seed is built as a string: Lua would print a number this large in exponent form.
local function next_fence(fence_key, ttl_ms)
  if redis.call('EXISTS', fence_key) == 0 then
    local now = redis.call('TIME')
    redis.call('SET', fence_key, now[1] .. string.format('%06d', tonumber(now[2])))
  end
  local fence = redis.call('INCR', fence_key)
  redis.call('PEXPIRE', fence_key, ttl_ms)
  return fence
end
