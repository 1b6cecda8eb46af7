-- HDEL fields only while the guard key holds the caller's token: a fenced ack.
-- The fence convention of every fenced script (store/fence.py): guard last of KEYS, token ARGV[1].
--
-- KEYS[1]  the hash to delete from (P:outbox or P:spawns)
-- KEYS[2]  the guard (relayd's lease P:relay:lease)  string  the holder's token
-- ARGV[1]  the caller's token
-- ARGV[2..] the fields
--
-- Returns how many fields were removed, or the error reply 'RELAYD_FENCED' (nothing deleted)
-- when the guard holds another token or none.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return redis.error_reply('RELAYD_FENCED')
end
local CHUNK = 1000 -- fields per HDEL: far inside the limit of Lua's unpack
local removed = 0
for first = 2, #ARGV, CHUNK do
  removed = removed + redis.call('HDEL', KEYS[1], unpack(ARGV, first, math.min(first + CHUNK - 1, #ARGV)))
end
return removed
