-- Take tokens from a sink's shared token bucket, on the Redis server's clock.
--
-- KEYS[1]  P:relay:rate:{sink}  hash  {tokens, at}: the balance (may be below 0) and when (epoch s)
-- ARGV[1]  the rate: tokens earned a second
-- ARGV[2]  the capacity: most tokens the bucket holds (it starts full)
-- ARGV[3]  the tokens to take
--
-- Returns, as text, the seconds the caller waits before sending (0 when the tokens were there).
-- Every replica of the sink takes from the same bucket, so together they stay under the rate.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate, capacity, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(stored[1]), tonumber(stored[2])
if tokens == nil or at == nil then
  tokens, at = capacity, now
end
tokens = math.min(capacity, tokens + math.max(0, now - at) * rate) - count
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'at', string.format('%.6f', now))
-- Gone once idle long enough to be full again (and a minute more): no key left behind.
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity / rate + 60) * 1000))
if tokens >= 0 then
  return '0'
end
return string.format('%.6f', -tokens / rate)
