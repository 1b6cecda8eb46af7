-- Move live entries to the dead letters in one atomic step (docs/internals.md#delivery-semantics).
--
-- KEYS[1]  the live structure: hash P:outbox / P:spawns, or zset P:timers
-- KEYS[2]  the dead-letter hash P:relay:dead:{kind}
-- KEYS[3]  the attempts hash P:relay:attempts:{kind}
-- KEYS[4]  optional: the lease P:relay:lease; when given, ARGV[1] is the caller's token and
--          nothing moves unless the lease holds it (a fenced dead-letter move; the convention
--          of every fenced script, store/fence.py: guard last, token first)
-- ARGV     [token,] "hash" or "zset", then groups of 5: live ref (hash field or zset member),
--          score ("" for a hash), dead-letter id, dead-letter JSON, attempts field
--
-- An entry already gone from the live structure (acked elsewhere) is not recorded; a timer
-- whose score is no longer the one delivered was re-armed by the engine and stays live. The
-- dead letter is written before the live entry is removed: a Redis out of memory refuses the
-- write and the script stops there, with the entry still live (never removed and not parked).
-- Returns the number of entries moved, or the error reply 'RELAYD_FENCED' when the lease
-- holds another token or none.
local base = 0 -- ARGV entries before the mode
if #KEYS == 4 then
  if redis.call('GET', KEYS[4]) ~= ARGV[1] then
    return redis.error_reply('RELAYD_FENCED')
  end
  base = 1
end
local first = base + 2
local moved = 0
local zset = ARGV[base + 1] == "zset"
for i = first, #ARGV, 5 do
  local ref, score, id, doc, afield = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local present
  if zset then
    local current = redis.call("ZSCORE", KEYS[1], ref)
    present = current and tonumber(current) == tonumber(score)
  else
    present = redis.call("HEXISTS", KEYS[1], ref) == 1
  end
  if present then
    -- A dead letter already parked under this id (a seq reused after a counter reset) is
    -- kept: the new one takes the id with "#2", "#3", ... appended.
    local field, n = id, 1
    while redis.call("HEXISTS", KEYS[2], field) == 1 do
      n = n + 1
      field = id .. "#" .. n
    end
    redis.call("HSET", KEYS[2], field, doc)
    if zset then
      redis.call("ZREM", KEYS[1], ref)
    else
      redis.call("HDEL", KEYS[1], ref)
    end
    moved = moved + 1
  end
  redis.call("HDEL", KEYS[3], afield)
end
return moved
