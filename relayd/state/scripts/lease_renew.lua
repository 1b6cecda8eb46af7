-- Extend the lease only while we still hold it (compare-and-pexpire).
--
-- KEYS[1]  the lease P:relay:lease
-- ARGV[1]  our token
-- ARGV[2]  TTL in milliseconds
-- Returns 1 when extended, 0 when the lease is gone or held by another token.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
