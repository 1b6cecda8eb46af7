-- Delete a dead-letter hash and say how many entries it held, atomically.
--
-- KEYS[1]  the dead-letter hash P:relay:dead:{kind}
-- Returns the number of dead letters deleted.
local n = redis.call("HLEN", KEYS[1])
redis.call("DEL", KEYS[1])
return n
