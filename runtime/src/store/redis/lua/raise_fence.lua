-- raise_fence: make sure a lock's fence counter is at least a given value (RedLock's second
-- round: after a quorum granted the lock, every granting node's counter is raised to the
-- highest token handed out, so any later majority sees it).
--
-- KEYS[1]  the fence key  P:fence:{K}
-- ARGV[1]  the value the counter must reach (a decimal integer)
-- ARGV[2]  how long the fence counter outlives its last use, in milliseconds
--
-- Returns 1.
local current = redis.call('GET', KEYS[1])
if (not current) or tonumber(current) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
