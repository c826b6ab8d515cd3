-- The write half of the shop's naive read-check-write: store the quantity the handler
-- computed from what it read, count the sale, and hand out an order number. With a fencing
-- token, the write happens only while the stock record is still claimed by that token: the
-- purchase's read was its claim (leasehold::fenced::claim_with_fence, which raised the
-- record's `fence` to the token and returned the quantity), so a newer holder's claim since
-- then means this holder's lease ended and what it read may be stale. A holder's write
-- delayed in the network past its lease is refused however late it lands, also between the
-- next holder's read and its write. The check is leasehold::fenced::WRITE_IF_CLAIMED_LUA's:
-- equal tokens, compared as the canonical decimals the claim stored.
--
-- Runs after leasehold::fenced::FENCE_CMP_LUA (redis.rs puts it in front), whose
-- leasehold_is_fence checks the token's form.
--
-- KEYS[1]  the stock hash: quantity, sold, fence (the token that claimed it last)
-- KEYS[2]  the order number counter
-- ARGV[1]  the new quantity
-- ARGV[2]  the writer's fencing token, a canonical decimal, or "0" for none (no lock: no
--          check)
--
-- Returns {1, order number} when written, {0, the record's token} when refused (a string;
-- "" when the record has none: it was removed since the claim).
local fence = ARGV[2]
if fence ~= '0' then
  if not leasehold_is_fence(fence) then
    return redis.error_reply('ERR purchase: the fencing token must be a decimal without leading zeros')
  end
  local claimed = redis.call('HGET', KEYS[1], 'fence')
  if claimed ~= fence then
    return {0, claimed or ''}
  end
end
redis.call('HSET', KEYS[1], 'quantity', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'sold', 1)
return {1, redis.call('INCR', KEYS[2])}
