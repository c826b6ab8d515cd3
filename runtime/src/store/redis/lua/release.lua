-- release: delete locks, one or many (a batch of releases from concurrent tasks), if and only
-- if we still own them; wake their waiters, and let the next process in line have the lock.
--
-- For the i-th lock of the batch (i = 1, 2, ...):
-- KEYS[3i - 2]  the lock key      P:lock:{K}
-- KEYS[3i - 1]  the queue         P:queue:{K}     (acquire.lua)
-- KEYS[3i]      the interest set  P:interest:{K}  (acquire.lua)
-- ARGV[2i + 2]  our owner token
-- ARGV[2i + 3]  the wake channel  P:wake:{K} (same hash tag as the key)
-- and for all of them:
-- ARGV[1]       how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
-- ARGV[2]       the contender releasing: this process's name in the queue (its waiters get
--               the lock handed over in the process)
-- ARGV[3]       how long the next in line has to take the lock, in milliseconds
--
-- The lock key holds the owner's token, followed by `+` once someone waited for it
-- (acquire.lua); only then is a wake-up published, and the queue consulted: when another
-- process waits (and still wants it: its interest has not run out), the key is set to `~`
-- and its name for the window, so that only it can take the lock, and the wake-up names it.
-- Without that, the releasing process's own next waiter, which needs no wake-up, would win
-- every time.
--
-- A lone lock that was plainly ours, or not ours, is answered by release_lone.lua in front of
-- this script, with a bare integer (1 or 0) instead of a list of one.
--
-- Returns a list with one entry per lock: 1 when it was ours and is now free (or left to
--                                         the next process in line);
--                                         0 when it was not ours any more (nothing changed);
--                                         an error message when a command failed for this
--                                         lock (the others of the batch are unaffected).
local publish, me, window = ARGV[1], ARGV[2], ARGV[3]
local function release_one(i)
  local lock, queue, interest = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local token, wake = ARGV[2 * i + 2], ARGV[2 * i + 3]
  local holder = redis.call('GET', lock)
  if holder == token then
    redis.call('DEL', lock)
    return 1
  elseif holder == token .. '+' then
    local next = next_in_line(queue, interest, me)
    if next then
      redis.call('SET', lock, '~' .. next, 'PX', window)
    else
      redis.call('DEL', lock)
    end
    -- The message names the contender that may have the lock now (empty: anyone), so
    -- that the other waiters sleep on instead of asking in vain.
    redis.call(publish, wake, next or '')
    return 1
  end
  return 0
end
return each(#KEYS / 3, release_one)
