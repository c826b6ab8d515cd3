-- read_renew: extend the leases of many readers (read_acquire.lua) in one round trip.
--
-- KEYS[2i - 1]  the lock key of the i-th reader   P:lock:{K}
-- KEYS[2i]      its lock's readers                P:readers:{K}
-- ARGV[2i - 1]  the reader's token
-- ARGV[2i]      its new lease in milliseconds
--
-- A renewal may also shorten a reader's lease (the end of a hold, LockRequest::hold_at_least,
-- is set as a renewal with the time left): the lock key and the readers then live as long as
-- the longest remaining lease, as a release leaves them (read_release.lua), not as long as the
-- longest lease they ever had (a writer would wait for that).
--
-- Returns one entry per reader: 1 when its lease was valid and is extended, 0 when it was not
-- (nothing changed), an error message when a command failed for this reader.
local now = clock_ms()
local function renew_one(i)
  local lock, readers = KEYS[2 * i - 1], KEYS[2 * i]
  local token, lease = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  local holder = redis.call('GET', lock)
  if holder ~= 'R' and holder ~= 'R+' then
    return 0
  end
  local lease_end = redis.call('ZSCORE', readers, token)
  if not lease_end or tonumber(lease_end) <= now then
    return 0
  end
  redis.call('ZADD', readers, 'XX', now + lease, token)
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  local ttl = math.max(1, tonumber(last[2]) - now)
  redis.call('PEXPIRE', lock, ttl)
  redis.call('PEXPIRE', readers, ttl)
  return 1
end
return each(#KEYS / 2, renew_one)
