"""The Lua scripts behind ``RedisTaskQueue``: each state change of a task is one script, so it is
atomic (Redis runs one script at a time, nothing interleaves) and every key it touches agrees.

Keys, all under ``PREFIX`` (the queue's ``prefix``)::

    PREFIX:task:ID        hash: the task's fields (``Task``'s names, as strings; an absent field is
                          None) and ``entry``, the id of its stream entry while it has one
    PREFIX:stream         the stream of due tasks (one field, ``task_id``), consumer group
                          ``workers``: an entry not yet delivered is a ``pending`` task due now; a
                          delivered one sits in the group's pending entries list while its task
                          runs, and is acknowledged (XACK) and deleted when the task ends
    PREFIX:delayed        zset: pending tasks not yet due, scored by ``run_after``
    PREFIX:leases         zset: running tasks, scored by ``lease_until``
    PREFIX:dedupe         hash: dedupe key -> the id of the task that last took it
    PREFIX:by:B[:CUBE]    zsets scored by ``created_at``: every task (B = ``all``) or the tasks in
                          status B, of every cube or of CUBE (B never holds ``:``, so no cube id
                          can make one key look like another)

A delayed task moves into the stream once due (``promote``, run before every XADD and claim), so
the stream is in ``run_after`` order.  Times are epoch seconds computed by the caller and passed
as strings: Lua would print a computed time with only 14 digits, so scripts compare times with
``tonumber`` but store the strings they were given.

Scripts derive the keys from the prefix (ARGV[1]), so the queue needs one Redis server (on a
Redis Cluster every key would have to share a slot: a prefix such as ``{memstrata}``).
"""

from __future__ import annotations

#: Shared by every script: key names and the steps several state changes take.
_COMMON = """
local PREFIX = ARGV[1]
local STREAM = PREFIX .. ':stream'
local GROUP = 'workers'
local DELAYED = PREFIX .. ':delayed'
local LEASES = PREFIX .. ':leases'
local DEDUPE = PREFIX .. ':dedupe'

local function task_key(id) return PREFIX .. ':task:' .. id end

local function field(key, name)
  local value = redis.call('HGET', key, name)
  if value == false then return nil end
  return value
end

-- the index zsets of bucket (a status, or 'all') that hold a task of cube (nil: none)
local function indexes(bucket, cube)
  local all = PREFIX .. ':by:' .. bucket
  if cube == nil then return {all} end
  return {all, all .. ':' .. cube}
end

local function index(id, key, bucket)
  local created = redis.call('HGET', key, 'created_at')
  for _, k in ipairs(indexes(bucket, field(key, 'cube_id'))) do
    redis.call('ZADD', k, created, id)
  end
end

local function move(id, key, from, to)
  redis.call('HSET', key, 'status', to)
  for _, k in ipairs(indexes(from, field(key, 'cube_id'))) do redis.call('ZREM', k, id) end
  index(id, key, to)
end

local function ensure_group()
  if redis.call('EXISTS', STREAM) == 0 then
    redis.call('XGROUP', 'CREATE', STREAM, GROUP, '0', 'MKSTREAM')
  end
end

local function enqueue(id, key)
  ensure_group()
  redis.call('HSET', key, 'entry', redis.call('XADD', STREAM, '*', 'task_id', id))
end

-- the task's stream entry is done with: acknowledged, then deleted (the hash keeps the state)
local function drop_entry(key)
  local entry = field(key, 'entry')
  if entry ~= nil then
    redis.call('XACK', STREAM, GROUP, entry)
    redis.call('XDEL', STREAM, entry)
    redis.call('HDEL', key, 'entry')
  end
end

-- delayed tasks due by now into the stream, in run_after order (a bounded batch per call)
local function promote(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, 1000)) do
    redis.call('ZREM', DELAYED, id)
    enqueue(id, task_key(id))
  end
end

-- whether the task is running (under claim attempt, unless attempt is '')
local function running(key, attempt)
  if redis.call('HGET', key, 'status') ~= 'running' then return false end
  return attempt == '' or redis.call('HGET', key, 'attempts') == attempt
end

-- a running task stops running: its lease and stream entry go
local function stop(id, key, now)
  redis.call('ZREM', LEASES, id)
  redis.call('HDEL', key, 'lease_until')
  redis.call('HSET', key, 'updated_at', now)
  drop_entry(key)
end
"""

#: ARGV: prefix, now, the task's fields as a JSON object of strings.  Returns the task's id, or
#: the id of the pending task already holding the dedupe key.
SUBMIT = (
    _COMMON
    + """
local now = ARGV[2]
local fields = cjson.decode(ARGV[3])
local id = fields.task_id
local key = task_key(id)
if fields.dedupe_key ~= nil then
  local holder = redis.call('HGET', DEDUPE, fields.dedupe_key)
  if holder then
    local held = task_key(holder)
    if redis.call('HGET', held, 'status') == 'pending' then return holder end
    -- a running or finished task gives its key up: what is submitted now runs after it
    redis.call('HDEL', held, 'dedupe_key')
  end
  redis.call('HSET', DEDUPE, fields.dedupe_key, id)
end
for name, value in pairs(fields) do redis.call('HSET', key, name, value) end
index(id, key, 'all')
index(id, key, 'pending')
if tonumber(fields.run_after) > tonumber(now) then
  redis.call('ZADD', DELAYED, fields.run_after, id)
else
  promote(now)
  enqueue(id, key)
end
return id
"""
)

#: ARGV: prefix, now, lease_until, consumer, the LeaseExpired error, then the ids to skip.
#: Returns the claimed task's hash as a flat list, or nil when none is due.
CLAIM = (
    _COMMON
    + """
local now, lease_until, consumer, lost = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local skip = {}
for i = 6, #ARGV do skip[ARGV[i]] = true end
ensure_group()

local function take(id, key)
  redis.call('HINCRBY', key, 'attempts', 1)
  redis.call('HSET', key, 'lease_until', lease_until, 'updated_at', now)
  redis.call('ZADD', LEASES, lease_until, id)
  return redis.call('HGETALL', key)
end

-- Expired leases first: the exhausted fail, the one due longest ago is taken over.
local best, best_after = nil, nil
for _, id in ipairs(redis.call('ZRANGEBYSCORE', LEASES, '-inf', now)) do
  local key = task_key(id)
  if redis.call('HGET', key, 'status') ~= 'running' then
    redis.call('ZREM', LEASES, id)
  elseif not skip[id] then
    local attempts, most, after = unpack(
      redis.call('HMGET', key, 'attempts', 'max_attempts', 'run_after'))
    if tonumber(attempts) >= tonumber(most) then
      local err = field(key, 'error')
      redis.call('HSET', key, 'error', (err and (err .. ' | ') or '') .. lost)
      stop(id, key, now)
      move(id, key, 'running', 'failed')
    elseif best == nil or tonumber(after) < best_after then
      best, best_after = id, tonumber(after)
    end
  end
end
if best ~= nil then
  local key = task_key(best)
  local entry = field(key, 'entry')
  if entry ~= nil then  -- the dead worker's delivery passes to this consumer
    redis.call('XCLAIM', STREAM, GROUP, consumer, 0, entry, 'JUSTID')
  end
  return take(best, key)
end

-- Then the next due task, delivered to this consumer by the group.
promote(now)
while true do
  local read = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', 1, 'STREAMS', STREAM, '>')
  if not read then return nil end
  local entry = read[1][2][1]
  local id = entry[2][2]
  local key = task_key(id)
  if redis.call('HGET', key, 'status') == 'pending' and field(key, 'entry') == entry[1] then
    move(id, key, 'pending', 'running')
    return take(id, key)
  end
  -- not the task's current entry (cannot happen unless keys were edited by hand): drop it
  redis.call('XACK', STREAM, GROUP, entry[1])
  redis.call('XDEL', STREAM, entry[1])
end
"""
)

#: ARGV: prefix, id, attempt ('' for any), now, lease_until, consumer.  Returns 1 or 0.
RENEW = (
    _COMMON
    + """
local id, attempt, now, lease_until, consumer = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local key = task_key(id)
if not running(key, attempt) then return 0 end
redis.call('HSET', key, 'lease_until', lease_until, 'updated_at', now)
redis.call('ZADD', LEASES, lease_until, id)
local entry = field(key, 'entry')
if entry ~= nil then  -- resets the entry's idle time: XPENDING shows the worker alive
  redis.call('XCLAIM', STREAM, GROUP, consumer, 0, entry, 'JUSTID')
end
return 1
"""
)

#: ARGV: prefix, id, attempt ('' for any), now.  Returns 1 or 0.
COMPLETE = (
    _COMMON
    + """
local id, attempt, now = ARGV[2], ARGV[3], ARGV[4]
local key = task_key(id)
if not running(key, attempt) then return 0 end
stop(id, key, now)
redis.call('HDEL', key, 'error')
move(id, key, 'running', 'done')
return 1
"""
)

#: ARGV: prefix, id, attempt ('' for any), now, error, retry_at ('' for no retry).
#: Returns 1 or 0.
FAIL = (
    _COMMON
    + """
local id, attempt, now, err, retry_at = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local key = task_key(id)
if not running(key, attempt) then return 0 end
stop(id, key, now)
redis.call('HSET', key, 'error', err)
if retry_at == '' then
  move(id, key, 'running', 'failed')
  return 1
end
redis.call('HSET', key, 'run_after', retry_at)
-- retry only while attempts remain, whatever the caller asks
if tonumber(redis.call('HGET', key, 'attempts')) < tonumber(redis.call('HGET', key, 'max_attempts')) then
  move(id, key, 'running', 'pending')
  redis.call('ZADD', DELAYED, retry_at, id)
else
  move(id, key, 'running', 'failed')
end
return 1
"""
)

#: ARGV: prefix, id, attempt ('' for any), now.  Returns 1 or 0.
RELEASE = (
    _COMMON
    + """
local id, attempt, now = ARGV[2], ARGV[3], ARGV[4]
local key = task_key(id)
if not running(key, attempt) then return 0 end
stop(id, key, now)
redis.call('HINCRBY', key, 'attempts', -1)
redis.call('HSET', key, 'run_after', now)
move(id, key, 'running', 'pending')
promote(now)
enqueue(id, key)
return 1
"""
)

#: ARGV: prefix, id, now.  Returns 1, or 0 (nothing changed) when the task is not failed.
RETRY = (
    _COMMON
    + """
local id, now = ARGV[2], ARGV[3]
local key = task_key(id)
if redis.call('HGET', key, 'status') ~= 'failed' then return 0 end
local attempts = tonumber(redis.call('HGET', key, 'attempts'))
redis.call('HSET', key, 'max_attempts', tostring(attempts + 1))
redis.call('HSET', key, 'run_after', now, 'updated_at', now)
move(id, key, 'failed', 'pending')
promote(now)
enqueue(id, key)
return 1
"""
)

#: ARGV: prefix, index key, stop (the last rank: limit - 1, or -1 for all).  Returns the
#: tasks' hashes, newest first, each a flat list: one snapshot, as a script is atomic.
TASKS = (
    _COMMON
    + """
local found = {}
for _, id in ipairs(redis.call('ZREVRANGE', ARGV[2], 0, tonumber(ARGV[3]))) do
  local task = redis.call('HGETALL', task_key(id))
  if #task > 0 then found[#found + 1] = task end
end
return found
"""
)

#: ARGV: prefix, consumer.  Deletes the consumer from the group when it holds no entry.
FORGET_CONSUMER = (
    _COMMON
    + """
if redis.call('EXISTS', STREAM) == 0 then return 0 end
local held = redis.pcall('XPENDING', STREAM, GROUP, '-', '+', 1, ARGV[2])
if held.err or #held > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', STREAM, GROUP, ARGV[2])
return 1
"""
)
