-- release, the common case first (concatenated in front of release.lua, whose header says
-- what KEYS and ARGV hold): one lock, released by its holder while nobody waited for it. That
-- is a compare-and-delete, answered with a bare integer (1: it was ours and is free now; 0:
-- it was not ours), before the rest of the script defines its helpers: each definition, the
-- list of answers and the protected call per lock cost Redis about as much as the compare-and-
-- delete itself. Anything else (a waiter's `+` mark, a key of another type) goes on below.
if #KEYS == 3 then
  local holder = redis.pcall('GET', KEYS[1])
  if holder == ARGV[4] then
    redis.call('DEL', KEYS[1])
    return 1
  elseif not holder or (type(holder) == 'string' and holder ~= ARGV[4] .. '+') then
    return 0
  end
end
