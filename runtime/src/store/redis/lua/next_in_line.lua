-- Shared by the scripts that let the next process in line have a lock (concatenated in front
-- of them, after clock.lua).
--
-- next_in_line(queue, interest, me) -> name or nil
--   The contender that waited longest and still waits, other than `me` (the releasing
--   process, whose own waiters get the lock handed over without a round trip; '' for none);
--   nil when none. It leaves the queue now: if it does not take the lock within the window (it
--   stopped waiting, or died), it costs the others that window once, and queues again at the
--   back if it still waits.
local function next_in_line(queue, interest, me)
  local gone = redis.call('ZRANGE', interest, '-inf', clock_ms(), 'BYSCORE')
  gone[#gone + 1] = me
  redis.call('ZREM', queue, unpack(gone))
  local next = redis.call('ZRANGE', queue, 0, 0)[1]
  if next then
    gone[#gone + 1] = next
    redis.call('ZREM', queue, next)
  end
  redis.call('ZREM', interest, unpack(gone))
  return next
end
