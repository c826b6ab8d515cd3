-- sem_acquire: take `count` permits of a semaphore, if that many are free among its limit and
-- the waiters queued ahead of the caller leave them.
-- Every permit is a member of the holders' sorted set, `token:i`, scored with the end of its
-- lease: a holder that crashed stops being counted once its lease ended, without anyone
-- cleaning up after it (no counter to leak).
--
-- KEYS[1]  the holders   P:sem:{K}          (sorted set: `token:i` -> end of its lease, ms)
-- KEYS[2]  the limit     P:semlimit:{K}     (the number of permits the holders agreed on)
-- KEYS[3]  the fence     P:semfence:{K}     (the fence counter of the semaphore's holders)
-- KEYS[4]  the queue     P:semqueue:{K}     (sorted set: `name:count` -> arrival, ms)
-- KEYS[5]  the interest  P:seminterest:{K}  (sorted set: `name:count` -> waits until, ms)
-- ARGV[1]  the holder's owner token (owner.lua)
-- ARGV[2]  its lease in milliseconds
-- ARGV[3]  the limit this caller asks for
-- ARGV[4]  how many permits it takes (1 ..= limit)
-- ARGV[5]  how long the fence counter outlives its last use, in milliseconds
-- ARGV[6]  the caller's place in the queue, `name:count`, when it is a waiter for several
--          permits; empty otherwise (it is then never queued)
-- ARGV[7]  how long the waiter stays queued if it must wait, in milliseconds (0: it will
--          not wait, and is not queued)
-- ARGV[8]  how long the queue keys outlive their last use, in milliseconds
--
-- Turns: a request for several permits needs them all free at once, which under steady load
-- of single permits never happens; so such a waiter queues (by arrival, keeping its first
-- place while it asks again within its interest), and every request is granted only if the
-- permits free after it still cover the waiters queued ahead of it (every queued waiter, for
-- a caller that is not queued). A waiter that stops asking lapses when its interest ends.
--
-- The holders and the limit live as long as the longest lease of a holder, and go with the
-- last holder. The fence counter lives on (fence_ttl): every holder gets one fencing token,
-- whatever its permits, reserved by the writers' rule (fence.lua), so a permit's token is
-- above every token of the semaphore handed out before, also after a restart from a
-- snapshot or AOF, a failover, or the counter's expiry.
--
-- Returns 1, fence   when the permits are the caller's now, with the holder's fencing token;
--         0, wait    when too few are free (or they are kept for a waiter ahead): milliseconds
--                    until the first holder's lease ends, -1 when nobody holds a permit;
--         -1, limit  when the holders agreed on another limit (nothing changed).
local holders, agreed_key, fence_key = KEYS[1], KEYS[2], KEYS[3]
local queue, interest = KEYS[4], KEYS[5]
local token, lease = ARGV[1], tonumber(ARGV[2])
local limit, count = tonumber(ARGV[3]), tonumber(ARGV[4])
local fence_ttl, me, wait_ms, queue_ttl = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]
local now = clock_ms()
redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
local used = redis.call('ZCARD', holders)
if used > 0 then
  local agreed = tonumber(redis.call('GET', agreed_key) or '')
  if agreed and agreed ~= limit then
    return {-1, agreed}
  end
end
-- Waiters that stopped asking leave the queue.
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', interest, '-inf', now)) do
  redis.call('ZREM', queue, gone)
  redis.call('ZREM', interest, gone)
end
-- The permits the waiters ahead of the caller need.
local ahead = 0
for _, waiter in ipairs(redis.call('ZRANGE', queue, 0, -1)) do
  if waiter == me then
    break
  end
  ahead = ahead + (tonumber(string.match(waiter, ':(%d+)$')) or 0)
end
if used + count + ahead > limit then
  if me ~= '' and wait_ms > 0 then
    redis.call('ZADD', queue, 'NX', arrival(queue), me)
    redis.call('ZADD', interest, now + wait_ms, me)
    redis.call('PEXPIRE', queue, queue_ttl)
    redis.call('PEXPIRE', interest, queue_ttl)
  end
  local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  if first[2] == nil then
    return {0, -1}
  end
  return {0, math.max(1, tonumber(first[2]) - now)}
end
if me ~= '' then
  redis.call('ZREM', queue, me)
  redis.call('ZREM', interest, me)
end
local ends = now + lease
for i = 1, count do
  redis.call('ZADD', holders, ends, token .. ':' .. i)
end
local ttl = math.max(redis.call('PTTL', holders), lease)
redis.call('PEXPIRE', holders, ttl)
redis.call('SET', agreed_key, limit, 'PX', ttl)
return {1, reserve_fences(fence_key, 1, fence_ttl)}
