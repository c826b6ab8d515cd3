-- acquire_all: take several locks together, all or none, in one round trip (the keys of one
-- multi-key lock on one server, or in one Cluster slot). Nothing waits and nothing is queued
-- here: when any of the locks is taken (held, read-held, or left to a waiting contender for
-- its window), nothing changes, and the caller takes the locks one by one in their global
-- order, queueing for the busy one as a single lock does.
--
-- For the i-th lock (i = 1, 2, ...):
-- KEYS[2i - 1]  the lock key   P:lock:{K}
-- KEYS[2i]      the fence key  P:fence:{K}
-- ARGV[3i - 1]  the new owner token (owner.lua)
-- ARGV[3i]      the lease in milliseconds
-- ARGV[3i + 1]  how many fencing tokens to reserve (as in acquire.lua)
-- and for all of them:
-- ARGV[1]       how long a fence counter outlives its last use, in milliseconds
--
-- Returns {1, top_1, top_2, ...} when every lock was free and is now ours (the fencing tokens
-- of lock i are top_i - reserved_i + 1 .. top_i), or {0, i} when lock i was taken.
local fence_ttl = ARGV[1]
local n = #KEYS / 2
for i = 1, n do
  if redis.call('EXISTS', KEYS[2 * i - 1]) == 1 then
    return {0, i}
  end
end
local out = {1}
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], ARGV[3 * i - 1], 'PX', ARGV[3 * i])
  out[i + 1] = reserve_fences(KEYS[2 * i], tonumber(ARGV[3 * i + 1]), fence_ttl)
end
return out
