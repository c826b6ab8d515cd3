-- acquire: take a free lock in one round trip.
--
-- KEYS[1]  the lock key   P:lock:{K}
-- KEYS[2]  the fence key  P:fence:{K}
-- ARGV[1]  the new owner token
-- ARGV[2]  the lease in milliseconds
-- ARGV[3]  how long the fence counter outlives its last use, in milliseconds
-- ARGV[4]  how many fencing tokens to reserve (1 + the holders this process may hand the
--          lock to before it releases it; between 1 and 64)
--
-- Returns {1, top} when the lock was free and is now ours; the fencing tokens
--                  top - ARGV[4] + 1 .. top are ours to hand out, in increasing order;
--         {0, pttl} when someone else holds it, with its remaining lease in milliseconds
--                   (-1 when the key has no expiry, set by hand outside this library).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, reserve_fences(KEYS[2], tonumber(ARGV[4]), ARGV[3])}
end
return {0, redis.call('PTTL', KEYS[1])}
