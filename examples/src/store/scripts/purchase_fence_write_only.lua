-- The shop's purchase write before issue 44, kept for the test that shows why it was
-- replaced (shop-axum and shop-actix --fence-write-only, a hidden flag): its read was a plain
-- HGET, and only this write carried the fence. The write is accepted if no newer token has
-- written to the record yet, which a holder's write delayed in the network past its lease
-- can still find between the next holder's read and its write: both writes are accepted,
-- and one sale is lost (quantity + sold exceeds the stock by one). purchase.lua, after a
-- claim, refuses it.
--
-- Runs after leasehold::fenced::FENCE_CMP_LUA (redis.rs puts it in front), whose
-- leasehold_fence_cmp compares tokens as decimal strings, exactly for every u64.
--
-- KEYS[1]  the stock hash: quantity, sold, fence (the highest fence that wrote)
-- KEYS[2]  the order number counter
-- ARGV[1]  the new quantity
-- ARGV[2]  the writer's fencing token, decimal
--
-- Returns {1, order number} when written, {0, highest fence seen} when refused as stale (the
-- fence as a string).
local fence = ARGV[2]
local seen = redis.call('HGET', KEYS[1], 'fence')
if seen and leasehold_fence_cmp(fence, seen) < 0 then
  return {0, seen}
end
redis.call('HSET', KEYS[1], 'fence', fence)
redis.call('HSET', KEYS[1], 'quantity', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'sold', 1)
return {1, redis.call('INCR', KEYS[2])}
