-- Shared by the scripts that look at what a lock key holds (concatenated in front of them).
--
-- An owner token is `h1.<locker>.<ms>.<label>.` (its public part: who holds the lock, since
-- when, and the acquisition's label) followed by the 32 hex digits of its secret, always last;
-- earlier versions wrote the secret alone. The lock key holds a token, a token with `+` after
-- it (someone waits), `R` or `R+` (readers hold it), or `~` and a contender's name (a release
-- left it to that contender).
--
-- unmarked_token(value) -> boolean
--   Whether `value` is an owner token without the `+` mark: one of this format that does not
--   end with `+`, or one of 32 characters (an earlier version's). A value another program set
--   under the prefix is left alone.
-- public_part(value) -> string
--   The public part of a token (marked or not), '' when it has none (an earlier version's
--   token, or not a token). Never the secret: inspection returns only this.
local function unmarked_token(value)
  if string.sub(value, 1, 3) == 'h1.' then
    return string.sub(value, -1) ~= '+'
  end
  return #value == 32
end
local function public_part(value)
  if string.sub(value, -1) == '+' then
    value = string.sub(value, 1, -2)
  end
  if string.sub(value, 1, 3) ~= 'h1.' or #value < 36 then
    return ''
  end
  return string.sub(value, 1, -33)
end
