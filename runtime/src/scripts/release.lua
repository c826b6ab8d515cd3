-- release: delete locks, one or many (a batch of releases from concurrent tasks), if and only
-- if we still own them, and wake their waiters.
--
-- For the i-th lock of the batch (i = 1, 2, ...):
-- KEYS[i]       the lock key  P:lock:{K}
-- ARGV[2i]      our owner token
-- ARGV[2i + 1]  the wake channel  P:wake:{K} (same hash tag as the key)
-- and for all of them:
-- ARGV[1]       how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
--
-- The lock key holds the owner's token, followed by `+` once someone waited for it
-- (acquire.lua); only then is a wake-up published.
--
-- Returns a list with one entry per lock: 1 when it was ours and is now free;
--                                         0 when it was not ours any more (nothing changed).
local out = {}
for i, lock in ipairs(KEYS) do
  local token = ARGV[2 * i]
  local holder = redis.call('GET', lock)
  if holder == token or holder == token .. '+' then
    redis.call('DEL', lock)
    if holder ~= token then
      redis.call(ARGV[1], ARGV[2 * i + 1], '')
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
