-- withdraw: a contender stopped waiting without the lock (it gave up, timed out, was
-- cancelled or panicked): a request that waited under a name of its own (a fair request), or
-- a process whose front waiter left (Store::leave). It leaves the queue and the interest
-- set; if a release had just left the lock to it (the key holds `~` and its name), the lock
-- goes on to the next in line at once, or is freed, and the waiters hear it, instead of
-- everyone waiting out the window; and if it was the last writer waiting for readers (the key
-- holds `R+`, read_acquire.lua), the mark goes and the readers waiting behind it hear that
-- they may come in now.
--
-- KEYS[1]  the lock key      P:lock:{K}
-- KEYS[2]  the queue         P:queue:{K}     (acquire.lua)
-- KEYS[3]  the interest set  P:interest:{K}  (acquire.lua)
-- ARGV[1]  the contender's name
-- ARGV[2]  the wake channel  P:wake:{K}
-- ARGV[3]  how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
-- ARGV[4]  how long the next in line has to take the lock, in milliseconds
--
-- Returns 1 when the lock had been left to the contender (and was passed on), 2 when the
-- readers' mark went, else 0.
local lock, queue, interest = KEYS[1], KEYS[2], KEYS[3]
local who, wake, publish, window = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
redis.call('ZREM', queue, who)
redis.call('ZREM', interest, who)
local holder = redis.call('GET', lock)
if holder == 'R+' then
  if redis.call('ZCOUNT', interest, clock_ms() + 1, '+inf') > 0 then
    return 0
  end
  local pttl = redis.call('PTTL', lock)
  if pttl > 0 then
    redis.call('SET', lock, 'R', 'PX', pttl)
  else
    redis.call('SET', lock, 'R')
  end
  redis.call(publish, wake, '')
  return 2
end
if holder ~= '~' .. who then
  return 0
end
local next = next_in_line(queue, interest, '')
if next then
  redis.call('SET', lock, '~' .. next, 'PX', window)
else
  redis.call('DEL', lock)
end
redis.call(publish, wake, next or '')
return 1
