-- read_acquire: take the read side of a read-write lock (one reader), if no writer holds the
-- lock or waits for it.
--
-- KEYS[1]  the lock key     P:lock:{K}
-- KEYS[2]  the readers      P:readers:{K}  (sorted set: reader token -> end of its lease, ms)
-- KEYS[3]  the fence key    P:fence:{K}
-- KEYS[4]  the interest set P:interest:{K} (acquire.lua: waiting writers, until when each waits)
-- ARGV[1]  the reader's token (owner.lua)
-- ARGV[2]  its lease in milliseconds
--
-- While readers hold the lock, its key holds `R` and lives as long as the longest reader's
-- lease; `R+` once a writer waits (acquire.lua), and new readers then wait too. A writer's
-- key holds its token (owner.lua; `+` after it once someone waits: a reader appends it, so
-- that the writer's release wakes it), or `~` and a contender's name while a release lets
-- the next process in line have it (release.lua).
--
-- The `R+` mark only says that a writer waited; whether one still waits is the interest set,
-- read here. A writer that left without the lock (its wait ran out, it was cancelled, it
-- panicked, its process died) may leave the mark behind: once no writer's interest is live,
-- the mark is stale, goes back to `R`, and the reader is in. So a writer that left holds new
-- readers back no longer than its interest: until its wait's end, at most MAX_INTEREST
-- (scripts.rs: 2 s) after its last attempt; a process that is alive takes its interest out
-- at once when its waiter leaves (withdraw.lua).
--
-- Returns 1, fence  when the reader is in; fence is current_fence (fence.lua): at or above
--                   every token handed out for the lock before, below every later writer's;
--         0, wait   when a writer holds the lock or waits for it: the key's remaining time in
--                   milliseconds, or, while writers wait, the time until the last of them
--                   stops waiting unless it asks again (how soon to look again).
local lock, readers, fence, interest = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, lease = ARGV[1], tonumber(ARGV[2])
local now = clock_ms()
-- Until when the last waiting writer waits, in ms (nil: none waits).
local function writers_wait_until()
  local last = redis.call('ZRANGE', interest, -1, -1, 'WITHSCORES')
  if last[2] and tonumber(last[2]) > now then
    return tonumber(last[2])
  end
  return nil
end
local holder = redis.call('GET', lock)
local stale = false
if holder == 'R+' then
  local until_ms = writers_wait_until()
  if until_ms then
    local pttl = redis.call('PTTL', lock)
    if pttl < 0 then
      pttl = until_ms - now
    end
    return {0, math.max(1, math.min(pttl, until_ms - now))}
  end
  -- Every writer that marked it is gone: the mark is stale.
  holder, stale = 'R', true
end
if holder and holder ~= 'R' then
  if unmarked_token(holder) then
    redis.call('APPEND', lock, '+')
  end
  return {0, redis.call('PTTL', lock)}
end
if not holder then
  -- The key can go while writers wait: the last reader's lease ran out (a reader crashed),
  -- taking the `R+` mark with it. The writers still in line come first: they retry as soon
  -- as the key's time is up, and this reader looks again shortly, when one of them holds
  -- the lock and it can ask to be woken.
  if writers_wait_until() then
    return {0, 25}
  end
  -- Readers from before the key went (their leases ran out, or an operator deleted it) hold
  -- nothing any more.
  redis.call('DEL', readers)
end
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
redis.call('ZADD', readers, now + lease, token)
local ttl = redis.call('PTTL', lock)
if stale or ttl < lease then
  ttl = math.max(ttl, lease)
  redis.call('SET', lock, 'R', 'PX', ttl)
end
redis.call('PEXPIRE', readers, ttl)
return {1, current_fence(fence)}
