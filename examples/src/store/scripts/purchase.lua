-- The write half of the shop's naive read-check-write: store the quantity the handler
-- computed from what it read, count the sale, and hand out an order number. With a fencing
-- token, the write happens only if no newer token has written to this stock record: a
-- holder whose lease was lost (paused, partitioned) is refused instead of overwriting.
--
-- KEYS[1]  the stock hash: quantity, sold, fence (the highest fence that wrote)
-- KEYS[2]  the order number counter
-- ARGV[1]  the new quantity
-- ARGV[2]  the writer's fencing token, or "0" for none (no lock: no check)
--
-- Returns {1, order number} when written, {0, highest fence seen} when refused as stale.
local fence = tonumber(ARGV[2])
if fence > 0 then
  local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
  if fence < seen then
    return {0, seen}
  end
  -- The token as given: a Lua number would print as 1.7e+15 and lose digits.
  redis.call('HSET', KEYS[1], 'fence', ARGV[2])
end
redis.call('HSET', KEYS[1], 'quantity', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'sold', 1)
return {1, redis.call('INCR', KEYS[2])}
