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

A task hash the scripts cannot work on (edited by hand or by a bug: a ``max_attempts`` that is not
an integer, a time that is not a number, an unknown status, a key that is not a hash) never makes
a script fail: a claim, or a delayed task falling due, **quarantines** it (``unreadable``,
``quarantine``): it leaves the stream, the leases and the delayed set and is ``failed`` with the
reason as its error, and the claim goes on to the next task.  ``TASKS`` skips a key that is not a
hash and returns the others as stored (Python marks what it cannot read: ``queue.listed_task``).
"""

from __future__ import annotations

from memstrata.store.queue import MAX_QUARANTINED_PER_CLAIM, QUARANTINED

#: Shared by every script: key names and the steps several state changes take.
_COMMON = (
    """
local PREFIX = ARGV[1]
local STREAM = PREFIX .. ':stream'
local GROUP = 'workers'
local DELAYED = PREFIX .. ':delayed'
local LEASES = PREFIX .. ':leases'
local DEDUPE = PREFIX .. ':dedupe'
local QUARANTINED_HEAD = '"""
    + QUARANTINED
    + """: '

local STATUSES = {'pending', 'running', 'done', 'failed'}

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

local function is_hash(key) return redis.call('TYPE', key).ok == 'hash' end

-- what HINCRBY takes: a 64-bit integer written plainly
local function is_integer(value)
  return value ~= false and #value <= 18
    and (value == '0' or string.match(value, '^%-?[1-9]%d*$') ~= nil)
end

-- what ZADD takes as a score: a finite number
local function is_time(value)
  local n = value and tonumber(value)
  return n ~= nil and n == n and n > -math.huge and n < math.huge
end

-- why the scripts cannot work on the task at key (a reason naming the field), or nil
local function unreadable(id, key)
  if not is_hash(key) then return 'its record is missing or not a hash' end
  local f = redis.call('HMGET', key, 'task_id', 'status', 'attempts', 'max_attempts',
    'run_after', 'created_at', 'updated_at')
  if f[1] ~= id then return 'task_id is missing or does not match its key' end
  local known = false
  for _, status in ipairs(STATUSES) do known = known or f[2] == status end
  if not known then return 'status is not a task status' end
  if not is_integer(f[3]) then return 'attempts is not an integer' end
  if not is_integer(f[4]) then return 'max_attempts is not an integer' end
  if not is_time(f[5]) then return 'run_after is not a time' end
  if not is_time(f[6]) then return 'created_at is not a time' end
  if not is_time(f[7]) then return 'updated_at is not a time' end
  return nil
end

-- the tasks quarantined by this call, as id, reason pairs (CLAIM returns them, to be logged)
local quarantined = {}

-- a task that cannot be worked on leaves the stream, the leases, the delayed set and its status
-- index, and is failed with the reason as its error (a key that is not a hash is only unlisted)
local function quarantine(id, key, reason, now)
  quarantined[#quarantined + 1] = id
  quarantined[#quarantined + 1] = reason
  redis.log(redis.LOG_WARNING, 'memstrata: task ' .. id .. ' quarantined: ' .. reason)
  redis.call('ZREM', LEASES, id)
  redis.call('ZREM', DELAYED, id)
  local record = is_hash(key)
  local cube = record and field(key, 'cube_id') or nil
  for _, status in ipairs(STATUSES) do
    for _, k in ipairs(indexes(status, cube)) do redis.call('ZREM', k, id) end
  end
  if not record then
    redis.call('ZREM', PREFIX .. ':by:all', id)
    return
  end
  local entry = field(key, 'entry')
  if entry ~= nil then  -- pcall: an entry id edited by hand is not one XACK takes
    redis.pcall('XACK', STREAM, GROUP, entry)
    redis.pcall('XDEL', STREAM, entry)
  end
  redis.call('HDEL', key, 'entry', 'lease_until')
  redis.call('HSET', key, 'status', 'failed', 'updated_at', now,
    'error', QUARANTINED_HEAD .. reason)
  local created = field(key, 'created_at')
  if not is_time(created) then created = now end
  for _, bucket in ipairs({'all', 'failed'}) do
    for _, k in ipairs(indexes(bucket, cube)) do redis.call('ZADD', k, created, id) end
  end
end

-- delayed tasks due by now into the stream, in run_after order (a bounded batch per call)
local function promote(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, 1000)) do
    redis.call('ZREM', DELAYED, id)
    local key = task_key(id)
    local reason = unreadable(id, key)
    if reason == nil then enqueue(id, key) else quarantine(id, key, reason, now) end
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
)

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
  local held = holder and task_key(holder)
  if held and is_hash(held) then
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
#: Returns {the claimed task's id, its hash as a flat list, the quarantined tasks as a flat list
#: of id, reason}; the id is '' (and the hash empty) when no task is due, or when this call has
#: put ``MAX_QUARANTINED_PER_CLAIM`` entries aside (the next call goes on).
CLAIM = (
    _COMMON
    + """
local now, lease_until, consumer, lost = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local BOUND = """
    + str(MAX_QUARANTINED_PER_CLAIM)
    + """
local skip = {}
for i = 6, #ARGV do skip[ARGV[i]] = true end
ensure_group()

local function take(id, key)
  redis.call('HINCRBY', key, 'attempts', 1)
  redis.call('HSET', key, 'lease_until', lease_until, 'updated_at', now)
  redis.call('ZADD', LEASES, lease_until, id)
  return {id, redis.call('HGETALL', key), quarantined}
end

-- Expired leases first: the unreadable are quarantined, the exhausted fail, the one due
-- longest ago is taken over.
local best, best_after = nil, nil
for _, id in ipairs(redis.call('ZRANGEBYSCORE', LEASES, '-inf', now)) do
  local key = task_key(id)
  local reason = unreadable(id, key)
  if reason ~= nil then
    quarantine(id, key, reason, now)
  elseif redis.call('HGET', key, 'status') ~= 'running' then
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
    redis.pcall('XCLAIM', STREAM, GROUP, consumer, 0, entry, 'JUSTID')
  end
  return take(best, key)
end

-- Then the next due task, delivered to this consumer by the group; an entry that is not a
-- readable task's current one is put aside (acknowledged and deleted), a bounded number per call.
promote(now)
for _ = 1, BOUND do
  local read = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', 1, 'STREAMS', STREAM, '>')
  if not read then return {'', {}, quarantined} end
  local entry = read[1][2][1]
  local id = entry[2][2]
  if entry[2][1] == 'task_id' and type(id) == 'string' then
    local key = task_key(id)
    local reason = unreadable(id, key)
    if reason == nil then
      if redis.call('HGET', key, 'status') == 'pending' and field(key, 'entry') == entry[1] then
        move(id, key, 'pending', 'running')
        return take(id, key)
      end
    elseif not is_hash(key) or field(key, 'entry') == entry[1] then
      quarantine(id, key, reason, now)
    end
  end
  -- not a readable task's current entry (only a hand edit or a bug makes one): drop it
  redis.call('XACK', STREAM, GROUP, entry[1])
  redis.call('XDEL', STREAM, entry[1])
end
return {'', {}, quarantined}
"""
)

#: ARGV: prefix, id, attempt, now, reason.  Quarantines a running task (under claim attempt)
#: whose hash Python could not read (its payload, say).  Returns 1 or 0.
QUARANTINE = (
    _COMMON
    + """
local id, attempt, now, reason = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local key = task_key(id)
if not is_hash(key) or not running(key, attempt) then return 0 end
quarantine(id, key, reason, now)
return 1
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
  redis.pcall('XCLAIM', STREAM, GROUP, consumer, 0, entry, 'JUSTID')
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
-- retry only while attempts remain, whatever the caller asks (a hash edited since its claim
-- into one that is not a number fails for good: nothing here may error on a stored value)
local attempts = tonumber(redis.call('HGET', key, 'attempts'))
local most = tonumber(redis.call('HGET', key, 'max_attempts'))
if attempts and most and attempts < most then
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

#: ARGV: prefix, id, now.  Returns 1, or 0 (nothing changed) when the task is not failed.  A
#: hash the scripts cannot work on is quarantined again instead (1: it stands failed).
RETRY = (
    _COMMON
    + """
local id, now = ARGV[2], ARGV[3]
local key = task_key(id)
if not is_hash(key) then return 0 end
local reason = unreadable(id, key)
if reason ~= nil then  -- still unreadable: it cannot run, so it is quarantined (again) at once
  quarantine(id, key, reason, now)
  return 1
end
if redis.call('HGET', key, 'status') ~= 'failed' then return 0 end
local attempts = tonumber(redis.call('HGET', key, 'attempts'))
redis.call('HSET', key, 'max_attempts', string.format('%d', attempts + 1))
redis.call('HSET', key, 'run_after', now, 'updated_at', now)
move(id, key, 'failed', 'pending')
promote(now)
enqueue(id, key)
return 1
"""
)

#: ARGV: prefix, bucket (a status, or 'all'), stop (the last rank: limit - 1, or -1 for all),
#: then the cubes to list (none: every cube).  Returns {id, hash as a flat list} pairs, newest
#: first (ties: the greater id first, as the SQL queues): one snapshot, as a script is atomic.
#: A cube's own index is read, so the limit counts only the tasks of the cubes asked for; a key
#: that is not a hash is skipped.
TASKS = (
    _COMMON
    + """
local bucket, stop = ARGV[2], tonumber(ARGV[3])
local index = PREFIX .. ':by:' .. bucket
local ids = {}
if #ARGV == 3 then
  ids = redis.call('ZREVRANGE', index, 0, stop)
else
  local newest = {}
  for i = 4, #ARGV do
    local got = redis.call('ZREVRANGE', index .. ':' .. ARGV[i], 0, stop, 'WITHSCORES')
    for j = 1, #got, 2 do newest[#newest + 1] = {got[j], tonumber(got[j + 1])} end
  end
  table.sort(newest, function(a, b)
    if a[2] ~= b[2] then return a[2] > b[2] end
    return a[1] > b[1]
  end)
  for j = 1, #newest do
    if stop >= 0 and j > stop + 1 then break end
    ids[j] = newest[j][1]
  end
end
local found = {}
for _, id in ipairs(ids) do
  local task = redis.pcall('HGETALL', task_key(id))
  if task.err == nil and #task > 0 then found[#found + 1] = {id, task} end
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
