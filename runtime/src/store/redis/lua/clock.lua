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
