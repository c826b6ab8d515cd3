-- renew: extend the leases of many held locks in one round trip (the watchdog's batch).
--
-- KEYS[i]       the lock key of the i-th lease
-- ARGV[1]       the new lease of all of them, in milliseconds (the client sends one call per
--               distinct lease)
-- ARGV[i + 1]   the owner token of the i-th lease
--
-- The lock key holds the owner's token, possibly followed by `+` (someone waits; see
-- acquire.lua).
--
-- The holders are read with one MGET (per 512 keys) instead of a GET per key: each command a
-- script runs costs Redis about as much as the work it does, and a renewal's work is tiny.
-- A key of another type reads as nil there, so it counts as not ours, which it is. A user
-- whose ACL predates MGET (the documented ACL gained `+mget` with it) falls back to a GET per
-- key, so an upgrade does not stop renewals.
--
-- Returns a list with one entry per key: 1 when the lease was ours and is extended,
--                                        0 when it was not ours any more (nothing changed).
-- A command that fails fails the whole call (the client then tries again while the leases
-- last); an extension already made stays made, which is harmless: it was ours.
local lease, n, out = ARGV[1], #KEYS, {}
for from = 1, n, 512 do
  local to = math.min(from + 511, n)
  local holders = redis.pcall('MGET', unpack(KEYS, from, to))
  if holders.err then
    holders = {}
    for i = from, to do
      local holder = redis.pcall('GET', KEYS[i])
      holders[i - from + 1] = type(holder) == 'string' and holder
    end
  end
  for i = from, to do
    local token, holder = ARGV[i + 1], holders[i - from + 1]
    if holder == token or (holder and #holder == #token + 1 and holder == token .. '+') then
      redis.call('PEXPIRE', KEYS[i], lease)
      out[i] = 1
    else
      out[i] = 0
    end
  end
end
return out
