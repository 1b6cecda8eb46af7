-- Put dead letters back into the live structure with their original seq field or score.
--
-- KEYS[1]  the dead-letter hash P:relay:dead:{kind}
-- KEYS[2]  the live structure: hash P:outbox / P:spawns, or zset P:timers
-- KEYS[3]  the attempts hash P:relay:attempts:{kind}
-- ARGV[1]  "hash" or "zset"
-- ARGV[2..] groups of 5: dead-letter id, the dead-letter JSON as read (compared, so a
--           concurrent replay or purge wins once), live ref, value (hash) or score (zset),
--           attempts field
--
-- Never overwrites a live entry: a timer the engine re-armed meanwhile keeps its new score.
-- Returns the number of dead letters replayed (removed from KEYS[1]).
local replayed = 0
local zset = ARGV[1] == "zset"
for i = 2, #ARGV, 5 do
  local id, expected, ref, payload, afield = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  if redis.call("HGET", KEYS[1], id) == expected then
    if zset then
      redis.call("ZADD", KEYS[2], "NX", payload, ref)
    else
      redis.call("HSETNX", KEYS[2], ref, payload)
    end
    redis.call("HDEL", KEYS[1], id)
    redis.call("HDEL", KEYS[3], afield)
    replayed = replayed + 1
  end
end
return replayed
