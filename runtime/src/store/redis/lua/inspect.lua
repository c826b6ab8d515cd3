-- inspect: what an operator needs to know about one lock, read atomically (for tools; the
-- lock protocol never calls it).
--
-- KEYS[1]  the lock key   P:lock:{K}
-- KEYS[2]  the fence key  P:fence:{K}
-- KEYS[3]  the queue      P:queue:{K}     (sorted set: contender -> arrival, ms)
-- KEYS[4]  the readers    P:readers:{K}   (sorted set: reader token -> end of its lease, ms)
-- ARGV[1]  the most waiters to list
--
-- Returns {held, pttl, waiters, fence, queued, holders, names, waited}:
--   held     1 when the lock key exists, else 0
--   pttl     its remaining lease in milliseconds (-1: no expiry, -2: not held)
--   waiters  1 when someone waited for it while it was held (the `+` marker), or a release
--            left it to the next process in line (`~`), else 0
--   fence    the fence counter (the highest fencing token handed out or reserved), or -1
--   queued   how many processes are in the queue of waiters
--   holders  the public part of each holder's token (owner.lua: its locker, time and label;
--            never the secret; '' for a token without one): the writer's, or every live
--            reader's, the soonest lease to end first
--   names    the first ARGV[1] contenders of the queue by arrival (a process waits under its
--            locker's id, a fair request under `<locker id>.<its own>`)
--   waited   how long each of them has waited so far, in milliseconds (server clock)
local holder = redis.call('GET', KEYS[1])
local fence = redis.call('GET', KEYS[2])
local waiters = 0
if holder and (string.sub(holder, -1) == '+' or string.sub(holder, 1, 1) == '~') then
  waiters = 1
end
local holders = {}
if holder == 'R' or holder == 'R+' then
  local now = clock_ms()
  for _, reader in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf')) do
    holders[#holders + 1] = public_part(reader)
  end
elseif holder and string.sub(holder, 1, 1) ~= '~' then
  holders[1] = public_part(holder)
end
local names, waited = {}, {}
local listed = tonumber(ARGV[1])
if listed > 0 then
  local now = clock_ms()
  local queue = redis.call('ZRANGE', KEYS[3], 0, listed - 1, 'WITHSCORES')
  for i = 1, #queue, 2 do
    names[#names + 1] = queue[i]
    waited[#waited + 1] = math.max(0, now - tonumber(queue[i + 1]))
  end
end
return {holder and 1 or 0, redis.call('PTTL', KEYS[1]), waiters, fence and tonumber(fence) or -1,
  redis.call('ZCARD', KEYS[3]), holders, names, waited}
