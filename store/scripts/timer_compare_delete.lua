-- Compare-and-delete timers: ZREM a member only while its score still equals the fire_at the
-- caller saw, so a timer the engine re-armed in between survives (the two-call ZSCORE + ZREM
-- loses it).
--
-- KEYS[1]  P:timers  zset  member "{id}\0{path}", score = fire_at (epoch seconds)
-- ARGV     pairs: member, fire_at (the shortest round-trip decimal of the double)
--
-- Returns how many members were removed.
local removed = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
