-- The write half of the shop's naive read-check-write: store the quantity the handler
-- computed from what it read, count the sale, and hand out an order number. With a fencing
-- token, the write happens only if no newer token has written to this stock record: a
-- holder whose lease was lost (paused, partitioned) is refused instead of overwriting.
--
-- Runs after leasehold::fenced::FENCE_CMP_LUA (redis.rs puts it in front), whose
-- leasehold_fence_cmp compares tokens as decimal strings, exactly for every u64.
--
-- KEYS[1]  the stock hash: quantity, sold, fence (the highest fence that wrote)
-- KEYS[2]  the order number counter
-- ARGV[1]  the new quantity
-- ARGV[2]  the writer's fencing token, decimal, or "0" for none (no lock: no check)
--
-- Returns {1, order number} when written, {0, highest fence seen} when refused as stale (the
-- fence as a string).
local fence = ARGV[2]
if fence ~= '0' then
  local seen = redis.call('HGET', KEYS[1], 'fence')
  if seen and leasehold_fence_cmp(fence, seen) < 0 then
    return {0, seen}
  end
  redis.call('HSET', KEYS[1], 'fence', fence)
end
redis.call('HSET', KEYS[1], 'quantity', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'sold', 1)
return {1, redis.call('INCR', KEYS[2])}
