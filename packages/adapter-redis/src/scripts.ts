/**
 * The server-side scripts: each store operation is one EVALSHA, so it costs
 * one round trip and runs atomically on the server. A script is sent in full
 * (EVAL) only when the server answers NOSCRIPT (first use, restart, failover,
 * SCRIPT FLUSH); EVAL also caches it for the next EVALSHA.
 *
 * Conventions shared with `store.ts`:
 * - Keys are passed in KEYS (all in the app's hash slot); keys that depend on
 *   index members (listing, expiry) are built from the app's base key, which
 *   is KEYS[n] minus its last character.
 * - Hash field/value pairs follow the fixed arguments, grouped by bucket.
 * - Scripts return tables, integers and strings only (never booleans, whose
 *   RESP3 form differs from RESP2).
 */
import { createHash } from 'node:crypto';

/** Shared Lua helpers, prepended to the scripts that write buckets. */
const HELPERS = `
local function hset_pairs(key, head, from, count)
  local last = from + 2 * count - 1
  if head then
    local stop = math.min(last, from + 1999)
    for at = from, stop do head[#head + 1] = ARGV[at] end
    redis.call('HSET', key, unpack(head))
    from = stop + 1
  end
  while from <= last do
    local stop = math.min(last, from + 1999)
    redis.call('HSET', key, unpack(ARGV, from, stop))
    from = stop + 1
  end
  return last + 1
end

local function expire_session(session, events, event_ids, expiry, ttl, member)
  local now = redis.call('TIME')
  local at = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl)
  redis.call('PEXPIREAT', session, at)
  if redis.call('EXISTS', events) == 1 then
    redis.call('PEXPIREAT', events, at)
    redis.call('PEXPIREAT', event_ids, at)
  end
  redis.call('ZADD', expiry, at, member)
end
`;

/**
 * createSession.
 * KEYS: session, events, eventIds, userState, appState, appIndex, userIndex, expiry
 * ARGV: createTime, revision, nSession, nUser, nApp, ttlMs, appMember, userMember, expiryMember, pairs...
 * Returns 0 when the session exists, else { userBucket, appBucket } as flat arrays.
 */
export const CREATE = `${HELPERS}
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3])
local next = hset_pairs(KEYS[1], { '\\0r', ARGV[2], '\\0t', ARGV[1], '\\0n', '0' }, 10, tonumber(ARGV[3]))
next = hset_pairs(KEYS[4], nil, next, tonumber(ARGV[4]))
hset_pairs(KEYS[5], nil, next, tonumber(ARGV[5]))
redis.call('ZADD', KEYS[6], ARGV[1], ARGV[7])
redis.call('ZADD', KEYS[7], ARGV[1], ARGV[8])
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  expire_session(KEYS[1], KEYS[2], KEYS[3], KEYS[8], ttl, ARGV[9])
else
  redis.call('ZREM', KEYS[8], ARGV[9])
end
return { redis.call('HGETALL', KEYS[4]), redis.call('HGETALL', KEYS[5]) }
`;

/**
 * importSession: a whole session at once, as createSession with the given
 * revision and lastUpdateTime, then every event in order (an id seen twice
 * replaces its earlier entry in place, as an append would).
 * KEYS: as createSession
 * ARGV: lastUpdateTime, revision, nSession, nUser, nApp, ttlMs, appMember, userMember, expiryMember,
 *       pairs..., nEvents, then per event: entry, eventIdField
 * Returns 0 when the session exists, else 1.
 */
export const IMPORT = `${HELPERS}
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3])
local head = { '\\0r', ARGV[2], '\\0t', ARGV[1] }
local next = hset_pairs(KEYS[1], head, 10, tonumber(ARGV[3]))
next = hset_pairs(KEYS[4], nil, next, tonumber(ARGV[4]))
next = hset_pairs(KEYS[5], nil, next, tonumber(ARGV[5]))
local count = 0
local last = next + 2 * tonumber(ARGV[next]) - 1
local batch = {}
for at = next + 1, last, 2 do
  local position = redis.call('HGET', KEYS[3], ARGV[at + 1])
  if position then
    if #batch > 0 then redis.call('RPUSH', KEYS[2], unpack(batch)) batch = {} end
    redis.call('LSET', KEYS[2], position, ARGV[at])
  else
    redis.call('HSET', KEYS[3], ARGV[at + 1], count)
    batch[#batch + 1] = ARGV[at]
    count = count + 1
    if #batch >= 1000 then redis.call('RPUSH', KEYS[2], unpack(batch)) batch = {} end
  end
end
if #batch > 0 then redis.call('RPUSH', KEYS[2], unpack(batch)) end
redis.call('HSET', KEYS[1], '\\0n', count)
redis.call('ZADD', KEYS[6], ARGV[1], ARGV[7])
redis.call('ZADD', KEYS[7], ARGV[1], ARGV[8])
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  expire_session(KEYS[1], KEYS[2], KEYS[3], KEYS[8], ttl, ARGV[9])
else
  redis.call('ZREM', KEYS[8], ARGV[9])
end
return 1
`;

/**
 * appendEvent: revision check, event stored or replaced in place, the three
 * deltas, lastUpdateTime, revision, indexes; all or nothing.
 * The session hash keeps the event count, so a new event's position is known
 * without asking the log, and HSETNX both tests for the id and records it.
 * KEYS: session, events, eventIds, userState, appState, appIndex, userIndex, expiry
 * ARGV: expectedRevision, lastUpdateTime, entry, eventIdField, nSession, nUser, nApp,
 *       ttlMs, appMember, userMember, expiryMember, pairs...
 * Returns 0 when stored, -1 when the session is missing, else the stored revision.
 */
export const APPEND = `${HELPERS}
local meta = redis.call('HMGET', KEYS[1], '\\0r', '\\0n')
local revision = meta[1]
if not revision then return -1 end
if revision ~= ARGV[1] then return tonumber(revision) end
local count = tonumber(meta[2])
local head = { '\\0r', string.format('%.0f', tonumber(revision) + 1), '\\0t', ARGV[2] }
if redis.call('HSETNX', KEYS[3], ARGV[4], count) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[3])
  head[5] = '\\0n'
  head[6] = count + 1
else
  redis.call('LSET', KEYS[2], redis.call('HGET', KEYS[3], ARGV[4]), ARGV[3])
end
local next = hset_pairs(KEYS[1], head, 12, tonumber(ARGV[5]))
next = hset_pairs(KEYS[4], nil, next, tonumber(ARGV[6]))
hset_pairs(KEYS[5], nil, next, tonumber(ARGV[7]))
redis.call('ZADD', KEYS[6], ARGV[2], ARGV[9])
redis.call('ZADD', KEYS[7], ARGV[2], ARGV[10])
local ttl = tonumber(ARGV[8])
if ttl > 0 then expire_session(KEYS[1], KEYS[2], KEYS[3], KEYS[8], ttl, ARGV[11]) end
return 0
`;

/**
 * getSession: the session hash, both buckets and the filtered tail of the
 * log. The afterTimestamp walk goes back from the tail in growing chunks and
 * stops at the first event whose timestamp is <= afterTimestamp (or at the
 * `limit` bound), so it reads O(events returned) entries.
 * KEYS: session, events, userState, appState
 * ARGV: afterTimestamp ('' for none), limit ('' for none)
 * Returns 0 when the session is missing, else { session, user, app, events }.
 */
export const LOAD = `
local session = redis.call('HGETALL', KEYS[1])
if #session == 0 then return 0 end
local length = redis.call('LLEN', KEYS[2])
local floor = 0
if ARGV[2] ~= '' then floor = math.max(0, length - tonumber(ARGV[2])) end
local events = {}
if ARGV[1] == '' then
  if floor < length then events = redis.call('LRANGE', KEYS[2], floor, -1) end
else
  local after = tonumber(ARGV[1])
  local chunks = {}
  local high = length - 1
  local size = 16
  while high >= floor do
    local low = math.max(floor, high - size + 1)
    local chunk = redis.call('LRANGE', KEYS[2], low, high)
    local cut = 0
    for index = #chunk, 1, -1 do
      if tonumber(string.match(chunk[index], '^[^ ]*')) <= after then
        cut = index
        break
      end
    end
    if cut > 0 then
      local kept = {}
      for index = cut + 1, #chunk do kept[#kept + 1] = chunk[index] end
      chunks[#chunks + 1] = kept
      break
    end
    chunks[#chunks + 1] = chunk
    high = low - 1
    size = size * 2
  end
  for chunk = #chunks, 1, -1 do
    for _, entry in ipairs(chunks[chunk]) do events[#events + 1] = entry end
  end
end
return { session, redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4]), events }
`;

/** Removes the sessions whose time to live has passed from the indexes (and their keys, if still there). */
const PURGE_EXPIRED = `
local function purge_expired(base, expiry, app_index)
  if redis.call('EXISTS', expiry) == 0 then return end
  local now = redis.call('TIME')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', '(' .. string.format('%.0f', ms))
  for _, pair in ipairs(gone) do
    local cut = string.find(pair, '\\0', 1, true)
    local user = string.sub(pair, 1, cut - 1)
    local session = string.sub(pair, cut + 1)
    redis.call('DEL', base .. 's:' .. pair, base .. 'e:' .. pair, base .. 'i:' .. pair)
    redis.call('ZREM', app_index, session .. '\\0' .. user)
    redis.call('ZREM', base .. 'm:' .. user, session)
    redis.call('ZREM', expiry, pair)
  end
end
`;

/**
 * deleteSession: the session hash, its log and id map, its index entries.
 * KEYS: session, events, eventIds, appIndex, userIndex, expiry
 * ARGV: appMember, userMember, expiryMember
 */
export const DELETE = `
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[2])
redis.call('ZREM', KEYS[6], ARGV[3])
return 0
`;

/**
 * listSessions: a window of the app index (or one user's index) ordered by
 * lastUpdateTime, ties by member (the encoded session id, then user id)
 * ascending in both orders, with each session's hash and the buckets.
 * Cost: O(log n + page) per distinct score in the window, never O(all sessions).
 * KEYS: index, appState, expiry, appIndex
 * ARGV: order ('asc' | 'desc'), offset, limit ('' for all), encodedUser ('' when listing the app)
 * Returns { total, { member, sessionHash }..., { encodedUser, userHash }..., appHash }.
 */
export const LIST = `${PURGE_EXPIRED}
local base = string.sub(KEYS[2], 1, -2)
purge_expired(base, KEYS[3], KEYS[4])
local total = redis.call('ZCARD', KEYS[1])
local offset = tonumber(ARGV[2])
local stop = total
if ARGV[3] ~= '' then stop = math.min(total, offset + tonumber(ARGV[3])) end
local members = {}
if offset < stop then
  if ARGV[1] == 'asc' then
    members = redis.call('ZRANGE', KEYS[1], offset, stop - 1)
  else
    -- Walk the window by score groups: newest group first, each group in member order.
    local position = offset
    while position < stop do
      local score = redis.call('ZREVRANGE', KEYS[1], position, position, 'WITHSCORES')[2]
      local newer = redis.call('ZCOUNT', KEYS[1], '(' .. score, '+inf')
      local size = redis.call('ZCOUNT', KEYS[1], score, score)
      local skip = position - newer
      local take = math.min(stop - position, size - skip)
      local group = redis.call('ZRANGEBYSCORE', KEYS[1], score, score, 'LIMIT', skip, take)
      for _, member in ipairs(group) do members[#members + 1] = member end
      position = position + take
    end
  end
end
local sessions = {}
local users = {}
local seen = {}
for _, member in ipairs(members) do
  local user = ARGV[4]
  local session = member
  if user == '' then
    local cut = string.find(member, '\\0', 1, true)
    session = string.sub(member, 1, cut - 1)
    user = string.sub(member, cut + 1)
  end
  sessions[#sessions + 1] = { member, redis.call('HGETALL', base .. 's:' .. user .. '\\0' .. session) }
  if not seen[user] then
    seen[user] = true
    users[#users + 1] = { user, redis.call('HGETALL', base .. 'u:' .. user) }
  end
end
return { total, sessions, users, redis.call('HGETALL', KEYS[2]) }
`;

/** One bucket as a flat field/value array. KEYS: the hash. */
export const READ_BUCKET = `return redis.call('HGETALL', KEYS[1])`;

/** A script with its SHA1, run by EVALSHA with a fallback to EVAL on NOSCRIPT. */
export interface Script {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

export function script(name: string, source: string): Script {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/** Sends one command and resolves with its reply (see `connection.ts`). */
export type Send = (command: string, args: Array<string | number>) => Promise<unknown>;

/** Runs `script` on the node that owns `keys[0]`: one round trip, two when the server lacks the script. */
export async function runScript(
  send: Send,
  target: Script,
  keys: readonly string[],
  args: ReadonlyArray<string | number>,
): Promise<unknown> {
  try {
    return await send('evalsha', [target.sha, keys.length, ...keys, ...args]);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return send('eval', [target.source, keys.length, ...keys, ...args]);
  }
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}
