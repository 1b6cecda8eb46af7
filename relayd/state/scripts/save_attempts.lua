-- Write attempt records only while we hold the lease: a fenced HSET.
-- The fence convention of every fenced script (store/fence.py): guard last of KEYS, token ARGV[1].
--
-- KEYS[1]  the attempts hash P:relay:attempts:{kind}
-- KEYS[2]  the lease P:relay:lease
-- ARGV[1]  our token
-- ARGV[2..] pairs: attempts field, record JSON
--
-- Returns the number of fields added, or the error reply 'RELAYD_FENCED' (nothing written)
-- when the lease holds another token or none.
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return redis.error_reply('RELAYD_FENCED')
end
local CHUNK = 1000 -- arguments per HSET: far inside the limit of Lua's unpack
local added = 0
for first = 2, #ARGV, CHUNK do
  added = added + redis.call("HSET", KEYS[1], unpack(ARGV, first, math.min(first + CHUNK - 1, #ARGV)))
end
return added
