-- Give the lease up only if we still hold it (compare-and-delete).
--
-- KEYS[1]  the lease P:relay:lease
-- ARGV[1]  our token
-- Returns 1 when deleted, 0 when it was gone or held by another token.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
