-- read_release: one reader leaves a read-write lock (read_acquire.lua). The last one to leave
-- frees the lock, or, when a writer waits (the key holds `R+`), lets the writer that waited
-- longest have it for the window, and wakes the waiters (the message names that writer).
--
-- KEYS[1]  the lock key      P:lock:{K}
-- KEYS[2]  the readers       P:readers:{K}
-- KEYS[3]  the queue         P:queue:{K}     (acquire.lua)
-- KEYS[4]  the interest set  P:interest:{K}  (acquire.lua)
-- ARGV[1]  the reader's token
-- ARGV[2]  the wake channel  P:wake:{K}
-- ARGV[3]  how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
-- ARGV[4]  how long the next in line has to take the lock, in milliseconds
--
-- Returns 1 when the reader's lease was still valid, 0 when it was not (nothing of it is left
-- either way).
local lock, readers, queue, interest = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, wake, publish, window = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = clock_ms()
local holder = redis.call('GET', lock)
if holder ~= 'R' and holder ~= 'R+' then
  return 0
end
local lease_end = redis.call('ZSCORE', readers, token)
redis.call('ZREM', readers, token)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
if redis.call('ZCARD', readers) == 0 then
  redis.call('DEL', readers)
  if holder == 'R+' then
    local next = next_in_line(queue, interest, '')
    if next then
      redis.call('SET', lock, '~' .. next, 'PX', window)
    else
      redis.call('DEL', lock)
    end
    -- The message names the one that may have the lock now (empty: anyone).
    redis.call(publish, wake, next or '')
  else
    redis.call('DEL', lock)
  end
else
  -- The key lives as long as the longest remaining lease.
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', lock, math.max(1, tonumber(last[2]) - now))
end
if lease_end and tonumber(lease_end) > now then
  return 1
end
return 0
