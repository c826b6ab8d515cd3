-- inspect: what an operator needs to know about one lock, read atomically (for tools; the
-- lock protocol never calls it).
--
-- KEYS[1]  the lock key   P:lock:{K}
-- KEYS[2]  the fence key  P:fence:{K}
-- KEYS[3]  the queue      P:queue:{K}
--
-- Returns {held, pttl, waiters, fence, queued}:
--   held     1 when the lock key exists, else 0
--   pttl     its remaining lease in milliseconds (-1: no expiry, -2: not held)
--   waiters  1 when someone waited for it while it was held (the `+` marker), or a release
--            left it to the next process in line (`~`), else 0
--   fence    the fence counter (the highest fencing token handed out or reserved), or -1
--   queued   how many processes are in the queue of waiters
local holder = redis.call('GET', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local waiters = 0
if holder and (string.sub(holder, -1) == '+' or string.sub(holder, 1, 1) == '~') then
  waiters = 1
end
return {holder and 1 or 0, redis.call('PTTL', KEYS[1]), waiters, fence and tonumber(fence) or -1,
  redis.call('ZCARD', KEYS[3])}
