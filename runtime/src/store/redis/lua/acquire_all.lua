-- acquire_all: take several leases together, all or none, in one round trip: locks and
-- readers' shares of distinct keys (of one server, or of one Cluster slot). Nothing waits and
-- nothing is queued here: when any lease is not free, nothing changes, and the caller takes
-- the leases one by one in their global order, queueing for the busy one as a single
-- acquire does.
--
-- For the i-th lease (i = 1, 2, ...):
-- KEYS[4i - 3]  the lock key      P:lock:{K}
-- KEYS[4i - 2]  the fence key     P:fence:{K}
-- KEYS[4i - 1]  the readers       P:readers:{K}   (read_acquire.lua)
-- KEYS[4i]      the interest set  P:interest:{K}  (acquire.lua: waiting writers)
-- ARGV[4i - 2]  `w` for the lock, `r` for a reader's share
-- ARGV[4i - 1]  the new owner token (owner.lua)
-- ARGV[4i]      the lease in milliseconds
-- ARGV[4i + 1]  for the lock, how many fencing tokens to reserve (as in acquire.lua)
-- and for all of them:
-- ARGV[1]       how long a fence counter outlives its last use, in milliseconds
--
-- The lock is free when its key is absent (not held, not read-held, not left to a waiting
-- contender for its window). A reader's share is free when the key is absent and no writer
-- waits (its interest is live), or holds `R` (readers only, no writer waiting): the cases in
-- which read_acquire.lua lets a reader in at once and changes nothing else. A `R+` mark
-- counts as taken here, stale or not: the reader's own acquire tells (and clears it).
--
-- Returns {1, top_1, top_2, ...} when every lease was free and is now ours (the fencing
-- tokens of lock i are top_i - reserved_i + 1 .. top_i; a reader's top_i is its fence, as
-- read_acquire.lua's), or {0, i} when lease i was taken.
local fence_ttl = ARGV[1]
local n = #KEYS / 4

local function free(i)
  local lock = KEYS[4 * i - 3]
  if ARGV[4 * i - 2] == 'w' then
    return redis.call('EXISTS', lock) == 0
  end
  local holder = redis.call('GET', lock)
  if holder then
    return holder == 'R'
  end
  local last = redis.call('ZRANGE', KEYS[4 * i], -1, -1, 'WITHSCORES')
  return not (last[2] and tonumber(last[2]) > clock_ms())
end

-- As read_acquire.lua does for a key that is absent or holds `R`.
local function take_read(i)
  local lock, fence, readers = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1]
  local token, lease = ARGV[4 * i - 1], tonumber(ARGV[4 * i])
  local now = clock_ms()
  if redis.call('EXISTS', lock) == 0 then
    redis.call('DEL', readers)
  end
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
  redis.call('ZADD', readers, now + lease, token)
  local ttl = redis.call('PTTL', lock)
  if ttl < lease then
    ttl = math.max(ttl, lease)
    redis.call('SET', lock, 'R', 'PX', ttl)
  end
  redis.call('PEXPIRE', readers, ttl)
  return current_fence(fence)
end

for i = 1, n do
  if not free(i) then
    return {0, i}
  end
end
local out = {1}
for i = 1, n do
  if ARGV[4 * i - 2] == 'w' then
    redis.call('SET', KEYS[4 * i - 3], ARGV[4 * i - 1], 'PX', ARGV[4 * i])
    out[i + 1] = reserve_fences(KEYS[4 * i - 2], tonumber(ARGV[4 * i + 1]), fence_ttl)
  else
    out[i + 1] = take_read(i)
  end
end
return out
