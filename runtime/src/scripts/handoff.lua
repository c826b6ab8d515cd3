-- handoff: pass a held lock straight to the next owner in one round trip, instead of a
-- release, a wake-up and an acquire.
--
-- KEYS[1]  the lock key   P:lock:{K}
-- KEYS[2]  the fence key  P:fence:{K}
-- ARGV[1]  the current owner's token
-- ARGV[2]  the next owner's token
-- ARGV[3]  the next owner's lease in milliseconds
-- ARGV[4]  how long the fence counter outlives its last use, in milliseconds
--
-- Returns {1, fence} when the lock was the current owner's and now belongs to the next one,
--                    with the next owner's fencing token;
--         {0, 0}     when the current owner had lost it: nothing changed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, 0}
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {1, next_fence(KEYS[2], ARGV[4])}
