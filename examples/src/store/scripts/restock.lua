-- Sets a stock record to a quantity with nothing sold, if the writer's fencing token is not
-- older than the newest one that wrote to it.
--
-- KEYS[1]  the stock hash: quantity, sold, fence
-- ARGV[1]  the quantity
-- ARGV[2]  the writer's fencing token, or "0" for none (no lock: no check)
--
-- Returns 1 when written, 0 when refused as stale.
local fence = tonumber(ARGV[2])
if fence > 0 then
  local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
  if fence < seen then
    return 0
  end
  redis.call('HSET', KEYS[1], 'fence', ARGV[2])
end
redis.call('HSET', KEYS[1], 'quantity', ARGV[1], 'sold', 0)
return 1
