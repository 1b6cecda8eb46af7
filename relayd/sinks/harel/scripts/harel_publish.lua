-- Publish one batch into harel 0.9's Redis transport: per group, what harel's own publish does
-- for each of its events, in one script call for the whole batch.
--
-- KEYS     none: every key is built from the prefix, as harel's own transport scripts build
--          theirs (one Redis; harel's transport has no Cluster mode)
-- ARGV[1]  the prefix P
-- ARGV[2]  "read": a group's priority is read here from its execution record P:exe:{group};
--          "given": it is the priority argument of the group
-- ARGV[3..] per group: group id, priority (an integer, ignored with "read"), n, then the n
--          events as harel's JSON, in the order the group must receive them
--
-- What is written (harel's transport wire format):
--   P:q:{group}     list  the group's events, FIFO: RPUSH
--   P:prio          hash  group -> priority tier 0..4, set by the group's first publish only
--                         (HSETNX): later publishes keep the tier it has
--   P:ready:{tier}  zset  groups to claim, scored by the epoch ms they are claimable from;
--                         ZADD NX 0, so a group that is leased or parked keeps its score
-- The execution record (harel's store: the Execution JSON, "priority" inside, absent = 0) is
-- read only for a group without a tier, the only case in which harel's publish uses the
-- priority it is given.
--
-- Returns one reply per group, in order: 1 when all its events are queued, else why not. A
-- failing group leaves the other groups' writes in place.
local prefix = ARGV[1]
local read_priority = ARGV[2] == "read"
local prio_key = prefix .. ":prio"
-- payloads per RPUSH: unpack() is bounded by Lua's C stack
local chunk = 1000

local function failed(reply)
  return type(reply) == "table" and reply.err ~= nil
end

local function tier_of(group, given)
  local tier = redis.pcall("HGET", prio_key, group)
  if failed(tier) then
    return nil, tier.err
  end
  if tier then
    return tier, nil
  end
  local priority = tonumber(given)
  if read_priority then
    local record = redis.pcall("GET", prefix .. ":exe:" .. group)
    if failed(record) then
      return nil, record.err
    end
    priority = 0
    if record then
      local ok, execution = pcall(cjson.decode, record)
      if not ok or type(execution) ~= "table" then
        return nil, "the execution record is not a JSON object"
      end
      priority = execution.priority
      if priority == nil then
        priority = 0
      end
    end
  end
  if type(priority) ~= "number" or priority ~= math.floor(priority) then
    return nil, "the execution's priority is not an integer"
  end
  return math.min(math.max(priority, 0), 4), nil
end

local function publish(group, tier, first, last)
  local queue = prefix .. ":q:" .. group
  for from = first, last, chunk do
    local reply = redis.pcall("RPUSH", queue, unpack(ARGV, from, math.min(from + chunk - 1, last)))
    if failed(reply) then
      return reply.err
    end
  end
  local reply = redis.pcall("HSETNX", prio_key, group, tier)
  if failed(reply) then
    return reply.err
  end
  reply = redis.pcall("ZADD", prefix .. ":ready:" .. tier, "NX", 0, group)
  if failed(reply) then
    return reply.err
  end
  return 1
end

local replies = {}
local i = 3
while i <= #ARGV do
  local group, given, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local first, last = i + 3, i + 2 + n
  i = last + 1
  local tier, err = tier_of(group, given)
  if tier == nil then
    replies[#replies + 1] = err
  else
    replies[#replies + 1] = publish(group, tier, first, last)
  end
end
return replies
