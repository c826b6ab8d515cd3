-- acquire: take free locks, one or many (a batch of acquires from concurrent tasks), in one
-- round trip.
--
-- For the i-th lock of the batch (i = 1, 2, ...):
-- KEYS[2i - 1]  the lock key   P:lock:{K}
-- KEYS[2i]      the fence key  P:fence:{K}
-- ARGV[3i - 1]  the new owner token (32 characters)
-- ARGV[3i]      the lease in milliseconds
-- ARGV[3i + 1]  how many fencing tokens to reserve (1 + the holders this process may hand the
--               lock to before it releases it; between 1 and 17)
-- and for all of them:
-- ARGV[1]       how long a fence counter outlives its last use, in milliseconds
--
-- The lock key holds the owner's token; a `+` after it records that someone waits for the
-- lock, so that a release publishes a wake-up only when someone listens.
--
-- Returns a flat list with two entries per lock:
--   1, top   when the lock was free and is now ours; the fencing tokens
--            top - reserved + 1 .. top are ours to hand out, in increasing order;
--   0, pttl  when someone else holds it, with its remaining lease in milliseconds
--            (-1 when the key has no expiry, set by hand outside this library).
-- Two acquires of the same lock in one batch: the first one gets it.
local out = {}
for i = 1, #KEYS / 2 do
  local lock, fence = KEYS[2 * i - 1], KEYS[2 * i]
  if redis.call('SET', lock, ARGV[3 * i - 1], 'NX', 'PX', ARGV[3 * i]) then
    out[2 * i - 1] = 1
    out[2 * i] = reserve_fences(fence, tonumber(ARGV[3 * i + 1]), ARGV[1])
  else
    local holder = redis.call('GET', lock)
    if holder and #holder == 32 then
      redis.call('APPEND', lock, '+')
    end
    out[2 * i - 1] = 0
    out[2 * i] = redis.call('PTTL', lock)
  end
end
return out
