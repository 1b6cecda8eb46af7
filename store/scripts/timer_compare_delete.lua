-- Compare-and-delete timers: ZREM a member only while its score still equals the fire_at the
-- caller saw, so a timer the engine re-armed in between survives (the two-call ZSCORE + ZREM
-- loses it).
--
-- KEYS[1]  P:timers  zset  member "{id}\0{path}", score = fire_at (epoch seconds)
-- KEYS[2]  optional: a guard (relayd's lease P:relay:lease); when given, ARGV[1] is the
--          caller's token and nothing is deleted unless the guard holds it (a fenced ack;
--          the convention of every fenced script, store/fence.py: guard last, token first)
-- ARGV     [token,] then pairs: member, fire_at (the shortest round-trip decimal of the double)
--
-- Returns how many members were removed, or the error reply 'RELAYD_FENCED' when the guard
-- holds another token or none.
--
-- One ZMSCORE and one ZREM per chunk of members instead of a ZSCORE and a ZREM per member:
-- each call from Lua into Redis has a fixed cost, which made this script most of Redis's CPU
-- in a timer drain. Where ZMSCORE is unknown (Redis before 6.2) it asks ZSCORE per member.
local CHUNK = 500 -- members per ZMSCORE / ZREM: far inside the limit of Lua's unpack
local base = 0 -- ARGV entries before the pairs
if #KEYS == 2 then
  if redis.call('GET', KEYS[2]) ~= ARGV[1] then
    return redis.error_reply('RELAYD_FENCED')
  end
  base = 1
end
local count = (#ARGV - base) / 2
local removed = 0
for first = 1, count, CHUNK do
  local last = math.min(first + CHUNK - 1, count)
  local members = {}
  for i = first, last do
    members[#members + 1] = ARGV[base + 2 * i - 1]
  end
  local scores = redis.pcall('ZMSCORE', KEYS[1], unpack(members))
  local per_member = type(scores) == 'table' and scores.err ~= nil
  local gone = {}
  for j = 1, #members do
    local score
    if per_member then
      score = redis.call('ZSCORE', KEYS[1], members[j])
    else
      score = scores[j]
    end
    local fire_at = ARGV[base + 2 * (first + j - 1)]
    -- the same text is the same double; only other spellings need converting
    if score and (score == fire_at or tonumber(score) == tonumber(fire_at)) then
      gone[#gone + 1] = members[j]
    end
  end
  if #gone > 0 then
    removed = removed + redis.call('ZREM', KEYS[1], unpack(gone))
  end
end
return removed
