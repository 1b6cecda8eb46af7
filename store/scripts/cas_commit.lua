-- The fast-path commit: version compare-and-set + SET (+ dedupe SADD) in one atomic call.
--
-- KEYS[1]  P:exe:{id}        string  the Execution JSON ("version" inside)
-- KEYS[2]  P:processed:{id}  set     event ids already handled
-- ARGV[1]  the Execution JSON to store (its version already bumped to ARGV[2] + 1)
-- ARGV[2]  the version the caller loaded (0 for a fresh insert)
-- ARGV[3]  the processed event id, or '' for none
--
-- Returns 1, or the error reply 'RELAYD_STORE_CONFLICT:<stored version or nil>'.
local cur = redis.call('GET', KEYS[1])
local curv = nil
if cur then
  -- an unreadable stored value is a conflict, never a Lua error
  local ok, doc = pcall(cjson.decode, cur)
  if ok and type(doc) == 'table' then curv = doc['version'] end
end
local old = tonumber(ARGV[2])
if not (cur == false and old == 0) and curv ~= old then
  return redis.error_reply('RELAYD_STORE_CONFLICT:' .. tostring(curv))
end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[3] ~= '' then
  redis.call('SADD', KEYS[2], ARGV[3])
end
return 1
