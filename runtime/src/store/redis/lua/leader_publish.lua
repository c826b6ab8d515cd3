-- leader_publish: record the leader of an election, fenced by term, and wake its observers.
--
-- KEYS[1]  the election's lock      P:leader:lock:{K}
-- KEYS[2]  the leader record        P:leader:record:{K}  (a hash: term, identity, owner)
-- ARGV[1]  the leader's owner token (it must hold the lock now)
-- ARGV[2]  its term: the fence of its lease, decimal (below 2^53, so exact as a Lua number)
-- ARGV[3]  its identity
-- ARGV[4]  the wake channel         P:leader:wake:{K}
-- ARGV[5]  how to publish: PUBLISH, or SPUBLISH (sharded, for Redis Cluster)
--
-- The lock holds the owner's token, followed by `+` once someone waited for it. The record
-- keeps the owner token, so that readers trust it only while that token holds the lock: it
-- lapses with the lease and lives as long as the renewals do, at no extra round trip.
-- The wake-up names no contender ('leader'), so waiting campaigners sleep on and only
-- observers, which listen to every message, look again.
--
-- Returns 1 when written, 0 when the lock is not ours (any more), -1 when a newer term is
-- recorded already (a deposed leader never overwrites its successor).
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] and holder ~= ARGV[1] .. '+' then
  return 0
end
local recorded = tonumber(redis.call('HGET', KEYS[2], 'term') or '0')
if recorded > tonumber(ARGV[2]) then
  return -1
end
redis.call('HSET', KEYS[2], 'term', ARGV[2], 'identity', ARGV[3], 'owner', ARGV[1])
redis.call(ARGV[5], ARGV[4], 'leader')
return 1
