-- acquire, the common case first (concatenated in front of clock.lua, fence.lua, owner.lua and
-- acquire.lua, whose header says what KEYS and ARGV hold): one lock, asked for by a contender
-- that is not queued for it (its `queued` argument is 0), and free. `SET NX PX` takes it, its
-- fencing tokens are reserved, and the answer is acquire.lua's for that case, {1, top}, before
-- the rest of the script defines its helpers and runs the lock in a protected call that fills
-- a list of answers: those cost Redis about as much as the commands themselves.
--
-- The reservation is fence.lua's reserve_fences, written out with its arguments in place (the
-- fence key, the count of tokens, the counter's ttl): the same rule, in the same order of
-- commands. Lift the counter to at least the server clock in microseconds and add the count,
-- with one `SET ... PX` while the clock is ahead of the counter; else `INCRBY`, and `PEXPIRE`
-- about every 64 tokens. A change to that rule is made in both places.
--
-- Anything else goes on below, to the full script: several locks, a contender that may be
-- queued, a lock that is taken (its `SET NX` failed here and acquire.lua sends it again: one
-- script call runs alone on the server, so the second fails as the first did, and changed
-- nothing). A command that fails here (out of memory, a key of another type, a counter that is
-- not a number) goes on below as well, where acquire.lua's protected call answers it for this
-- caller, as it answers every failure. Had the `SET NX` taken the lock first, acquire.lua finds
-- it held by this very token and takes its "sent twice" branch, to the same answer.
if #KEYS == 4 and ARGV[8] == '0' then
  local taken = redis.pcall('SET', KEYS[1], ARGV[4], 'NX', 'PX', ARGV[5])
  if taken and taken.ok then
    local fence, count, ttl = KEYS[2], tonumber(ARGV[6]), ARGV[1]
    local current = tonumber(redis.pcall('GET', fence) or '0')
    if current then
      local t = redis.call('TIME')
      local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
      if current < floor then
        local top = floor + count
        redis.call('SET', fence, string.format('%d', top), 'PX', ttl)
        return {1, top}
      end
      local top = redis.pcall('INCRBY', fence, count)
      if type(top) == 'number' then
        if top % 64 < count then
          redis.call('PEXPIRE', fence, ttl)
        end
        return {1, top}
      end
    end
  end
end
