-- sem_renew: extend the leases of many semaphore holders (sem_acquire.lua) in one round trip.
--
-- KEYS[2i - 1]  the holders of the i-th holder's semaphore   P:sem:{K}
-- KEYS[2i]      its limit                                     P:semlimit:{K}
-- ARGV[3i - 2]  the holder's owner token
-- ARGV[3i - 1]  its new lease in milliseconds
-- ARGV[3i]      how many permits it holds
--
-- Returns one entry per holder: 1 when its lease was valid and is extended, 0 when it was not
-- (nothing changed), an error message when a command failed for this holder.
local now = clock_ms()
local function renew_one(i)
  local holders, agreed_key = KEYS[2 * i - 1], KEYS[2 * i]
  local token, lease = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1])
  local count = tonumber(ARGV[3 * i])
  local lease_end = redis.call('ZSCORE', holders, token .. ':1')
  if not lease_end or tonumber(lease_end) <= now then
    return 0
  end
  for p = 1, count do
    redis.call('ZADD', holders, 'XX', now + lease, token .. ':' .. p)
  end
  if redis.call('PTTL', holders) < lease then
    redis.call('PEXPIRE', holders, lease)
    redis.call('PEXPIRE', agreed_key, lease)
  end
  return 1
end
return each(#KEYS / 2, renew_one)
