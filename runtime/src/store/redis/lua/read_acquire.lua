-- read_acquire: take the read side of a read-write lock (one reader), if no writer holds the
-- lock or waits for it.
--
-- KEYS[1]  the lock key     P:lock:{K}
-- KEYS[2]  the readers      P:readers:{K}  (sorted set: reader token -> end of its lease, ms)
-- KEYS[3]  the fence key    P:fence:{K}
-- KEYS[4]  the interest set P:interest:{K} (acquire.lua: waiting writers, until when each waits)
-- ARGV[1]  the reader's token (32 characters)
-- ARGV[2]  its lease in milliseconds
--
-- While readers hold the lock, its key holds `R` and lives as long as the longest reader's
-- lease; `R+` once a writer waits (acquire.lua), and new readers then wait too. A writer's
-- key holds its 32-character token (`+` after it once someone waits: a reader appends it, so
-- that the writer's release wakes it), or `~` and a contender's name while a release lets
-- the next process in line have it (release.lua).
--
-- Returns 1, fence  when the reader is in; fence is the counter of the lock's fences, the
--                   highest any writer had been given (0 when none);
--         0, pttl   when a writer holds the lock or waits for it, with the key's remaining
--                   time in milliseconds (or how soon to look again, when the key is gone
--                   but writers still wait).
local lock, readers, fence, interest = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, lease = ARGV[1], tonumber(ARGV[2])
local now = clock_ms()
local holder = redis.call('GET', lock)
if holder and holder ~= 'R' then
  if #holder == 32 then
    redis.call('APPEND', lock, '+')
  end
  return {0, redis.call('PTTL', lock)}
end
if not holder then
  -- The key can go while writers wait: the last reader's lease ran out (a reader crashed),
  -- taking the `R+` mark with it. The writers still in line come first: they retry as soon
  -- as the key's time is up, and this reader looks again shortly, when one of them holds
  -- the lock and it can ask to be woken.
  if redis.call('ZCOUNT', interest, now + 1, '+inf') > 0 then
    return {0, 25}
  end
  -- Readers from before the key went (their leases ran out, or an operator deleted it) hold
  -- nothing any more.
  redis.call('DEL', readers)
end
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
redis.call('ZADD', readers, now + lease, token)
local ttl = redis.call('PTTL', lock)
if ttl < lease then
  redis.call('SET', lock, 'R', 'PX', lease)
  ttl = lease
end
redis.call('PEXPIRE', readers, ttl)
return {1, tonumber(redis.call('GET', fence) or '0')}
