-- Shared by the batched scripts (concatenated in front of them).
--
-- each(n, one) -> list
--   Runs one(i) for i = 1 .. n, each under pcall, and returns their answers in order. A command
--   that fails for one item (out of memory, a key of the wrong type) becomes that item's error
--   message; the other items of the batch are unaffected.
local function each(n, one)
  local out = {}
  for i = 1, n do
    local ok, answer = pcall(one, i)
    if ok then
      out[i] = answer
    else
      out[i] = type(answer) == 'table' and answer.err or tostring(answer)
    end
  end
  return out
end
