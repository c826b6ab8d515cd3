-- acquire: take free locks, one or many (a batch of acquires from concurrent tasks), in one
-- round trip, and queue the processes that must wait.
--
-- For the i-th lock of the batch (i = 1, 2, ...):
-- KEYS[4i - 3]  the lock key      P:lock:{K}
-- KEYS[4i - 2]  the fence key     P:fence:{K}
-- KEYS[4i - 1]  the queue         P:queue:{K}     (sorted set: contender -> arrival, ms)
-- KEYS[4i]      the interest set  P:interest:{K}  (sorted set: contender -> waits until, ms)
-- ARGV[6i - 2]  the new owner token (its public part, then its 32-character secret: owner.lua)
-- ARGV[6i - 1]  the lease in milliseconds
-- ARGV[6i]      how many fencing tokens to reserve (1 + the holders this process may hand the
--               lock to before it releases it; between 1 and 17)
-- ARGV[6i + 1]  how long this contender waits if the lock is taken, in milliseconds; 0 when
--               it will not wait (it is then not queued)
-- ARGV[6i + 2]  1 when this contender may be queued already (it waited before), else 0
-- ARGV[6i + 3]  the contender's own name when it waits alone (a fair request, queued for
--               itself: first come, first served across every task), or empty: it waits
--               under the process's name (ARGV[2])
-- and for all of them:
-- ARGV[1]       how long a fence counter outlives its last use, in milliseconds
-- ARGV[2]       the process's name in the queue (per locker), 16 characters
-- ARGV[3]       how long the queue keys outlive their last use, in milliseconds
--
-- The lock key holds the owner's token (or `R` while readers hold it: read_acquire.lua); a
-- `+` after it records that someone waits for the lock, so that a release publishes a wake-up only when someone listens. While a release
-- lets the next process in line have the lock, the key holds `~` and that contender's name
-- (release.lua): only that contender may take it then, and it expires after a short window.
--
-- Returns a flat list with two entries per lock:
--   1, top   when the lock was free (or left to us, or this token took it already: the same
--            request sent twice) and is now ours; the fencing tokens
--            top - reserved + 1 .. top are ours to hand out, in increasing order;
--   0, pttl  when someone else holds it, with its remaining lease in milliseconds
--            (-1 when the key has no expiry, set by hand outside this library);
--   -1, msg  when a command failed for this lock (out of memory, a key of the wrong type):
--            the error, for this caller alone; the other locks of the batch are unaffected.
-- Two acquires of the same lock in one batch: the first one gets it.
-- A lone lock that is free, asked for by a contender that is not queued, is answered by
-- acquire_lone.lua in front of this script (the same answer, sooner).
local fence_ttl, process, queue_ttl = ARGV[1], ARGV[2], ARGV[3]
local out = {}
local function acquire_one(i)
  local lock, fence, queue, interest = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  local a = 6 * i - 2
  local token, lease, count = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  local wait_ms, queued, me = tonumber(ARGV[a + 3]), ARGV[a + 4], ARGV[a + 5]
  if me == '' then
    me = process
  end
  -- (The short way in front found a lone lock taken already: acquire_lone.lua.)
  local may_be_free = not (i == 1 and lone_found_taken)
  if may_be_free and redis.call('SET', lock, token, 'NX', 'PX', lease) then
    if queued == '1' then
      redis.call('ZREM', queue, me)
      redis.call('ZREM', interest, me)
    end
  else
    local holder = redis.call('GET', lock)
    if holder == token or holder == token .. '+' then
      -- This very request, sent again by a client that lost the first answer (the cluster
      -- client re-sends a request whose connection dropped): the first one took the lock
      -- for this token, so it holds. Its lease counts from now, and it gets fences of its
      -- own (the first ones are skipped: fences only need to increase).
      redis.call('PEXPIRE', lock, lease)
      if queued == '1' then
        redis.call('ZREM', queue, me)
        redis.call('ZREM', interest, me)
      end
    elseif holder == '~' .. me then
      -- Left to us by the last release (which took us out of the queue). The processes
      -- still in line must hear our release.
      local value = token
      if redis.call('ZCARD', queue) > 0 then
        value = token .. '+'
      end
      redis.call('SET', lock, value, 'PX', lease)
    else
      if holder and unmarked_token(holder) then
        redis.call('APPEND', lock, '+')
      elseif holder == 'R' and wait_ms > 0 then
        -- Readers hold it (read_acquire.lua): a waiting writer holds new readers back, and
        -- the last reader to leave lets it have the lock.
        redis.call('APPEND', lock, '+')
      end
      if wait_ms > 0 then
        -- In line (keeping the first arrival), and for how long we still wait.
        local now = clock_ms()
        redis.call('ZADD', queue, 'NX', arrival(queue), me)
        redis.call('ZADD', interest, now + wait_ms, me)
        redis.call('PEXPIRE', queue, queue_ttl)
        redis.call('PEXPIRE', interest, queue_ttl)
      end
      return 0, redis.call('PTTL', lock)
    end
  end
  return 1, reserve_fences(fence, count, fence_ttl)
end
for i = 1, #KEYS / 4 do
  local ok, answer, value = pcall(acquire_one, i)
  if ok then
    out[2 * i - 1], out[2 * i] = answer, value
  else
    out[2 * i - 1] = -1
    out[2 * i] = type(answer) == 'table' and answer.err or tostring(answer)
  end
end
return out
