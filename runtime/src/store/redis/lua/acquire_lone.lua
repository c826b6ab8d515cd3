-- acquire, the common case first (concatenated after clock.lua and fence.lua, in front of
-- owner.lua and acquire.lua, whose header says what KEYS and ARGV hold): one lock, asked for by
-- a contender that is not queued for it (its `queued` argument is 0), and free. `SET NX PX`
-- takes it, fence.lua's reserve_fences reserves its fencing tokens (the one rule of every
-- token), and the answer is acquire.lua's for that case, {1, top}, before the rest of the
-- script defines its helpers and runs the lock in a protected call that fills a list of
-- answers: those cost Redis about as much as the commands themselves.
--
-- Anything else goes on below, to the full script: several locks, a contender that may be
-- queued, a lock that is taken (acquire.lua then does not send its `SET NX` again: one script
-- call runs alone on the server, so it would fail as this one did), a command that failed here
-- (out of memory, a key of another type, a counter that is not a number), which acquire.lua's
-- protected call answers for this caller, as it answers every failure. Had the `SET NX` taken
-- the lock before the reservation failed, acquire.lua finds it held by this very token and
-- takes its "sent twice" branch, to the same answer.
local lone_found_taken = false
if #KEYS == 4 and ARGV[8] == '0' then
  local taken = redis.pcall('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5])
  if taken and taken.ok then
    local reserved, top = pcall(reserve_fences, KEYS[2], tonumber(ARGV[6]), ARGV[1])
    if reserved then
      return {1, top}
    end
  elseif taken == false then
    lone_found_taken = true
  end
end
