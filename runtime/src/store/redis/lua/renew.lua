-- renew: extend the leases of many held locks in one round trip (the watchdog's batch).
--
-- KEYS[i]       the lock key of the i-th lease
-- ARGV[2i - 1]  its owner token
-- ARGV[2i]      its new lease in milliseconds
--
-- The lock key holds the owner's token, possibly followed by `+` (someone waits; see
-- acquire.lua).
--
-- Returns a list with one entry per key: 1 when the lease was ours and is extended,
--                                        0 when it was not ours any more (nothing changed),
--                                        an error message when a command failed for this
--                                        key (the others of the batch are unaffected).
local function renew_one(i)
  local key, token = KEYS[i], ARGV[2 * i - 1]
  local holder = redis.call('GET', key)
  if holder == token or holder == token .. '+' then
    redis.call('PEXPIRE', key, ARGV[2 * i])
    return 1
  end
  return 0
end
return each(#KEYS, renew_one)
