-- sem_release: a holder gives its permits of a semaphore back (sem_acquire.lua) and wakes the
-- waiters. Owner-checked: only the members of this token are removed.
--
-- KEYS[1]  the holders   P:sem:{K}
-- KEYS[2]  the limit     P:semlimit:{K}
-- ARGV[1]  the holder's owner token
-- ARGV[2]  how many permits it holds
-- ARGV[3]  the wake channel  P:semwake:{K}
-- ARGV[4]  how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
--
-- Returns 1 when the holder's lease was still valid, 0 when it was not (nothing of it is left
-- either way).
local holders, agreed_key = KEYS[1], KEYS[2]
local token, count, wake, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local now = clock_ms()
local lease_end = redis.call('ZSCORE', holders, token .. ':1')
local removed = 0
for i = 1, count do
  removed = removed + redis.call('ZREM', holders, token .. ':' .. i)
end
redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
if redis.call('ZCARD', holders) == 0 then
  -- The last holder left: the limit is free to change with the next one.
  redis.call('DEL', holders, agreed_key)
end
if removed > 0 then
  redis.call(publish, wake, '')
end
if lease_end and tonumber(lease_end) > now then
  return 1
end
return 0
