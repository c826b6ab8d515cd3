-- force_release: delete a lock whoever holds it, and wake its waiters. For operators only
-- (the CLI's `release --force`); the holder is not told and may go on believing it holds the
-- lock until its next renewal fails. Its fencing token keeps protecting fenced resources.
--
-- KEYS[1]  the lock key  P:lock:{K}
-- ARGV[1]  the wake channel  P:wake:{K}
-- ARGV[2]  how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
--
-- Returns 1 when a lock was deleted, 0 when there was none.
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call(ARGV[2], ARGV[1], '')
  return 1
end
return 0
