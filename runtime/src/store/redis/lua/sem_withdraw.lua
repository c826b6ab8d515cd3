-- sem_withdraw: a waiter for several permits (sem_acquire.lua) stops waiting without them: it
-- leaves the queue, and the semaphore's waiters are woken, since the permits it kept may
-- fit them now.
--
-- KEYS[1]  the queue     P:semqueue:{K}
-- KEYS[2]  the interest  P:seminterest:{K}
-- ARGV[1]  the waiter's place, `name:count`
-- ARGV[2]  the wake channel  P:semwake:{K}
-- ARGV[3]  how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
--
-- Returns 1 when it was queued, 0 when it was not (lapsed, or never queued).
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if removed > 0 then
  redis.call(ARGV[3], ARGV[2], '')
end
return removed
