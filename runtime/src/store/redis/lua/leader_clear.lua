-- leader_clear: a leader resigns; delete its record and wake the observers.
--
-- KEYS[1]  the leader record        P:leader:record:{K}
-- ARGV[1]  the resigning leader's term, decimal
-- ARGV[2]  the wake channel         P:leader:wake:{K}
-- ARGV[3]  how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
--
-- Only the record of that term is deleted: a newer leader's record stays.
-- Returns 1 when deleted, 0 when the record held another term (or none).
if redis.call('HGET', KEYS[1], 'term') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], ARGV[2], 'leader')
return 1
