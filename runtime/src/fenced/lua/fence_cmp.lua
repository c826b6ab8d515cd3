-- fence_cmp: exact comparison of fencing tokens, for scripts that check them. Prepend it to
-- a script (leasehold::fenced::FENCE_CMP_LUA); it defines two local functions and runs no
-- command.
--
-- Tokens travel as decimal strings. Lua numbers are doubles, exact only below 2^53: tonumber
-- would call 9007199254740993 and 9007199254740992 equal. A canonical decimal ("0", or digits
-- without a leading zero) with more digits is the larger number, and two of the same length
-- order digit by digit; that is exact for any length, so for every u64.
--
-- leasehold_is_fence(s)      true when s is a string holding a canonical decimal
-- leasehold_fence_cmp(a, b)  -1, 0 or 1 as token a is older than, the same as, or newer than
--                            token b (both canonical decimals)
local function leasehold_is_fence(s)
  return type(s) == 'string' and (s == '0' or string.find(s, '^[1-9]%d*$') ~= nil)
end

local function leasehold_fence_cmp(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  -- Byte by byte rather than a < b: Lua orders strings with strcoll, in the server's locale.
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y and -1 or 1
    end
  end
  return 0
end
