-- leader_read: the current leader of an election, if any.
--
-- KEYS[1]  the election's lock      P:leader:lock:{K}
-- KEYS[2]  the leader record        P:leader:record:{K}  (leader_publish.lua)
--
-- Returns {term, identity} when the record's owner token still holds the lock (with or
-- without the `+` of a waited-for lock), else an empty list: no leader (none elected, or the
-- recorded one's lease ended and its successor has not recorded itself yet).
local owner = redis.call('HGET', KEYS[2], 'owner')
if not owner then
  return {}
end
local holder = redis.call('GET', KEYS[1])
if holder ~= owner and holder ~= owner .. '+' then
  return {}
end
return redis.call('HMGET', KEYS[2], 'term', 'identity')
