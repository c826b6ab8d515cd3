-- Shared by the scripts that read the server clock (concatenated in front of them).
--
-- clock_us() -> number, clock_ms() -> number
--   The server's clock (TIME) in microseconds and in milliseconds, read once per script call.
--   Below 2^53, so Lua's doubles hold them exactly.
local clock_us_cached
local function clock_us()
  if not clock_us_cached then
    local t = redis.call('TIME')
    clock_us_cached = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock_us_cached
end
local function clock_ms()
  return math.floor(clock_us() / 1000)
end
--
-- arrival(queue) -> number
--   The score of a contender joining `queue` (a sorted set of waiters by arrival): the clock
--   in milliseconds, or a 1024th of one above the latest arrival in the queue when that is not
--   below it (several arrivals in one millisecond). The queue's order is then the order the
--   server saw its waiters join; with equal scores it was their names' order.
local function arrival(queue)
  local now = clock_ms()
  local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]
  if last and tonumber(last) >= now then
    return tonumber(last) + 1 / 1024
  end
  return now
end
