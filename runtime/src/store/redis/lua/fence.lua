-- Shared by the scripts that hand out fencing tokens (concatenated in front of them, after
-- clock.lua). The one rule of this engine for every primitive's token: a token is at least the
-- server clock in microseconds. Writers reserve theirs with reserve_fences, readers read
-- theirs with current_fence; nothing else hands out a token.
--
-- reserve_fences(fence_key, count, ttl_ms) -> integer
--   Reserves `count` consecutive fencing tokens of one lock and returns the highest; the
--   caller owns top - count + 1 .. top.
--   Every reservation first lifts the counter to at least the server clock in microseconds:
--   top = max(counter, now_us) + count. So a counter that is missing (never used, expired
--   after ttl_ms of disuse) or old (restored from an RDB or AOF file, or a replica that had not
--   received the latest increments when it took over) still yields tokens above every token
--   handed out before. This holds while the server clock does not step back by more than the
--   restart or failover took, and a key takes fewer than 10^6 tokens per second on average.
--   Tokens stay below 2^53 (until the year 2255), so doubles (Lua, JavaScript) hold them
--   exactly. The value is written with %d: Lua would print a number this large in exponent
--   form.
--   The counter's expiry is pushed back about every 64 tokens while it runs ahead of the
--   clock: it only has to outlive idle periods, and the clock floor keeps tokens increasing.
--   One write per reservation (a `SET` while the clock is ahead of the counter, as it is at
--   ordinary rates; an `INCRBY` while the counter runs ahead), so replicas and the AOF get one
--   command, not two.
local function reserve_fences(fence_key, count, ttl_ms)
  local current = tonumber(redis.call('GET', fence_key) or '0')
  local floor = clock_us()
  if current < floor then
    local top = floor + count
    redis.call('SET', fence_key, string.format('%d', top), 'PX', ttl_ms)
    return top
  end
  local top = redis.call('INCRBY', fence_key, count)
  if top % 64 < count then
    redis.call('PEXPIRE', fence_key, ttl_ms)
  end
  return top
end

-- current_fence(fence_key) -> integer
--   The token of a holder that shares the lock (a reader), reserving nothing:
--   max(counter, now_us). It is at or above every token handed out before (the counter holds
--   the highest, and a counter that expired or went back with a restore or a failover is
--   below the clock, which is above every earlier token, as in reserve_fences), and below
--   every token a later reservation hands out (that one lifts the counter to a later clock
--   and adds at least one). Nothing is written: a reader costs the replicas and the AOF
--   nothing.
local function current_fence(fence_key)
  return math.max(tonumber(redis.call('GET', fence_key) or '0'), clock_us())
end
