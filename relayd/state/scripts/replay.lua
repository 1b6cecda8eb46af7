-- Put dead letters back into the live structure: outbox and spawn entries under a new seq,
-- timers with their original score.
--
-- KEYS[1]  the dead-letter hash P:relay:dead:{kind}
-- KEYS[2]  the live structure: hash P:outbox / P:spawns, or zset P:timers
-- KEYS[3]  the attempts hash P:relay:attempts:{kind}
-- KEYS[4]  the engine's seq counter P:outbox:seq / P:spawns:seq (hash only)
-- KEYS[5..] the execution P:exe:{id} of each timer group with a version to compare, in order
-- ARGV[1]  "hash" or "zset"
-- ARGV[2..] groups of 6: dead-letter id, the dead-letter JSON as read (compared, so a
--           concurrent replay or purge wins once), live ref, value (hash) or score (zset),
--           attempts field, the execution version the timer was parked with ("" when none
--           was recorded: no check; "none": there was no execution)
--
-- A hash entry whose field is a seq takes the next seq of the engine's counter (INCR), as a new
-- commit would (any other field goes back as it was): it is
-- read in order after what its target already got, never left below the reader's frontier,
-- and an entry committed meanwhile at its old seq (a counter reset or restored) is untouched.
-- Never overwrites a live entry: when the new seq is taken (an entry written above the
-- counter) or a timer's member is live (the engine re-armed it), the dead letter stays parked.
-- So does a timer whose execution committed since it was parked: the engine writes an
-- execution and its timers in one commit, so a version that moved may have re-armed or
-- cancelled it, and a stale timer must not fire.
-- Returns {replayed, id not replayed, ...}: a dead letter is removed only once it is back.
local function unchanged(key, version)
  local raw = redis.pcall("GET", key)
  if raw == false then
    return version == "none"
  end
  if type(raw) ~= "string" then -- a key of another type: nothing to compare
    return false
  end
  local ok, exe = pcall(cjson.decode, raw)
  return ok and type(exe) == "table" and type(exe.version) == "number" and exe.version == tonumber(version)
end

local replayed = 0
local kept = {}
local zset = ARGV[1] == "zset"
local exe_key = 5
for i = 2, #ARGV, 6 do
  local id, expected, ref, payload, afield = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local version = ARGV[i + 5]
  local stale = false
  if version ~= "" then
    stale = not unchanged(KEYS[exe_key], version)
    exe_key = exe_key + 1
  end
  if redis.call("HGET", KEYS[1], id) == expected then
    local placed = false
    if stale then -- stays parked
    elseif zset then
      placed = redis.call("ZADD", KEYS[2], "NX", payload, ref) == 1
    elseif string.match(ref, "^%d+$") then
      placed = redis.call("HSETNX", KEYS[2], tostring(redis.call("INCR", KEYS[4])), payload) == 1
    else -- a field that is no seq (bytes that are not UTF-8) goes back as it was
      placed = redis.call("HSETNX", KEYS[2], ref, payload) == 1
    end
    if placed then
      redis.call("HDEL", KEYS[1], id)
      redis.call("HDEL", KEYS[3], afield)
      replayed = replayed + 1
    else
      kept[#kept + 1] = id
    end
  end
end
return {replayed, unpack(kept)}
