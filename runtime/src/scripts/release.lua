-- release: delete the lock if, and only if, we still own it, and wake the waiters.
--
-- KEYS[1]  the lock key  P:lock:{K}
-- ARGV[1]  our owner token
-- ARGV[2]  the wake channel  P:wake:{K} (same hash tag as the key)
-- ARGV[3]  how to publish on it: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
--
-- Returns 1 when the lock was ours and is now free;
--         0 when it was not ours any more (expired, or another owner took it): nothing changed.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call(ARGV[3], ARGV[2], '')
  return 1
end
return 0
