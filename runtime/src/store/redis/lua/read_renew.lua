-- read_renew: extend the leases of many readers (read_acquire.lua) in one round trip.
--
-- KEYS[2i - 1]  the lock key of the i-th reader   P:lock:{K}
-- KEYS[2i]      its lock's readers                P:readers:{K}
-- ARGV[2i - 1]  the reader's token
-- ARGV[2i]      its new lease in milliseconds
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
  if redis.call('PTTL', lock) < lease then
    redis.call('PEXPIRE', lock, lease)
  end
  if redis.call('PTTL', readers) < lease then
    redis.call('PEXPIRE', readers, lease)
  end
  return 1
end
return each(#KEYS / 2, renew_one)
