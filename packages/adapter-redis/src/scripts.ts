/**
 * The server-side scripts: each store operation is one EVALSHA, so it costs
 * one round trip and runs atomically on the server. A script is sent in full
 * (EVAL) only when the server answers NOSCRIPT (first use, restart, failover,
 * SCRIPT FLUSH); EVAL also caches it for the next EVALSHA.
 *
 * Conventions shared with `store.ts`:
 * - Keys are passed in KEYS, all in one hash slot (a user's shard, or the
 *   app's own slot); keys that depend on index members (listing, expiry) are
 *   built from the shard's base key, which is KEYS[n] minus its last character.
 *   On a single server, the listing's first and second steps take the keys of
 *   every shard at once.
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

local function expire_session(session, events, event_ids, pending, expiry, ttl, member)
  local now = redis.call('TIME')
  local at = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl)
  redis.call('PEXPIREAT', session, at)
  if redis.call('EXISTS', events) == 1 then
    redis.call('PEXPIREAT', events, at)
    redis.call('PEXPIREAT', event_ids, at)
  end
  if redis.call('EXISTS', pending) == 1 then redis.call('PEXPIREAT', pending, at) end
  redis.call('ZADD', expiry, at, member)
end

-- The app pairs of this write: straight into the app bucket (one slot), or
-- recorded as pending under the new revision (the app has its own slot).
local function app_pairs(from, count, inline, pending, revision)
  if count == 0 then return end
  if inline then
    hset_pairs(KEYS[9], nil, from, count)
  else
    local list = {}
    for at = from, from + 2 * count - 1 do list[#list + 1] = ARGV[at] end
    redis.call('HSET', pending, revision, cjson.encode(list))
    redis.call('HSET', KEYS[1], '\\0a', '1')
  end
end

-- Forgets the pending app deltas up to revision 'upto' (known applied), and
-- returns those left, { revision, delta, ... } (empty when none).
local function pending_left(pending, upto)
  local left = redis.call('HGETALL', pending)
  if #left == 0 or upto == '' then return left end
  local limit = tonumber(upto)
  local kept = {}
  for at = 1, #left, 2 do
    if tonumber(left[at]) <= limit then
      redis.call('HDEL', pending, left[at])
    else
      kept[#kept + 1] = left[at]
      kept[#kept + 1] = left[at + 1]
    end
  end
  return kept
end
`;

/**
 * The start and the end of a new session, shared by createSession and
 * importSession (same KEYS, same first nine ARGV): start_session clears what
 * a deleted session of the key left, writes the head (given) and the session
 * and user pairs, and the app pairs; it returns where the app pairs begin.
 * index_session adds the session to the app's and the user's listing and
 * sets or clears its expiry.
 */
const NEW_SESSION = `${HELPERS}
local function start_session(head)
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[8])
  local next = hset_pairs(KEYS[1], head, 10, tonumber(ARGV[3]))
  next = hset_pairs(KEYS[4], nil, next, tonumber(ARGV[4]))
  app_pairs(next, tonumber(ARGV[5]), KEYS[9] ~= nil, KEYS[8], ARGV[2])
  return next
end

local function index_session()
  redis.call('ZADD', KEYS[5], ARGV[1], ARGV[7])
  redis.call('ZADD', KEYS[6], ARGV[1], ARGV[8])
  local ttl = tonumber(ARGV[6])
  if ttl > 0 then
    expire_session(KEYS[1], KEYS[2], KEYS[3], KEYS[8], KEYS[7], ttl, ARGV[9])
  else
    redis.call('ZREM', KEYS[7], ARGV[9])
  end
end
`;

/**
 * createSession. The keys of the user's shard, and the app bucket only when
 * it shares their slot (one shard).
 * KEYS: session, events, eventIds, userState, shardIndex, userIndex, expiry, pending[, appState]
 * ARGV: createTime, revision, nSession, nUser, nApp, ttlMs, appMember, userMember, expiryMember, pairs...
 * Returns 0 when the session exists, else { userBucket, appBucket or 0 (other slot), pending app deltas }.
 */
export const CREATE = `${NEW_SESSION}
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
start_session({ '\\0r', ARGV[2], '\\0c', ARGV[2], '\\0t', ARGV[1], '\\0n', '0' })
index_session()
local app = 0
if KEYS[9] then app = redis.call('HGETALL', KEYS[9]) end
return { redis.call('HGETALL', KEYS[4]), app, redis.call('HGETALL', KEYS[8]) }
`;

/**
 * importSession: a whole session at once, as createSession with the given
 * revision and lastUpdateTime, then every event in order (an id seen twice
 * replaces its earlier entry in place, as an append would).
 * KEYS: as createSession
 * ARGV: lastUpdateTime, revision, nSession, nUser, nApp, ttlMs, appMember, userMember, expiryMember,
 *       pairs..., nEvents, then per event: entry, eventIdField
 * Returns 0 when the session exists, else { pending app deltas }.
 */
export const IMPORT = `${NEW_SESSION}
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local next = start_session({ '\\0r', ARGV[2], '\\0c', ARGV[2], '\\0t', ARGV[1] }) + 2 * tonumber(ARGV[5])
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
index_session()
return { redis.call('HGETALL', KEYS[8]) }
`;

/**
 * appendEvent: revision check, event stored or replaced in place, the
 * session and user deltas, the app delta (applied, or recorded as pending),
 * lastUpdateTime, revision, indexes; all or nothing.
 * The session hash keeps the event count, so a new event's position is known
 * without asking the log, and HSETNX both tests for the id and records it.
 * KEYS: as createSession
 * ARGV: expectedRevision, lastUpdateTime, entry, eventIdField, nSession, nUser, nApp,
 *       ttlMs, appMember, userMember, expiryMember, appliedUpTo ('' for none), pairs...
 * Returns -1 when the session is missing, the stored revision when stale,
 * 0 when stored and nothing is pending, else { first revision, pending app deltas }.
 */
export const APPEND = `${HELPERS}
local meta = redis.call('HMGET', KEYS[1], '\\0r', '\\0n', '\\0c')
local revision = meta[1]
if not revision then return -1 end
if revision ~= ARGV[1] then return tonumber(revision) end
local count = tonumber(meta[2])
local new_revision = string.format('%.0f', tonumber(revision) + 1)
local head = { '\\0r', new_revision, '\\0t', ARGV[2] }
if redis.call('HSETNX', KEYS[3], ARGV[4], count) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[3])
  head[5] = '\\0n'
  head[6] = count + 1
else
  redis.call('LSET', KEYS[2], redis.call('HGET', KEYS[3], ARGV[4]), ARGV[3])
end
local next = hset_pairs(KEYS[1], head, 13, tonumber(ARGV[5]))
next = hset_pairs(KEYS[4], nil, next, tonumber(ARGV[6]))
local n_app = tonumber(ARGV[7])
app_pairs(next, n_app, KEYS[9] ~= nil, KEYS[8], new_revision)
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[9])
redis.call('ZADD', KEYS[6], ARGV[2], ARGV[10])
local ttl = tonumber(ARGV[8])
if ttl > 0 then expire_session(KEYS[1], KEYS[2], KEYS[3], KEYS[8], KEYS[7], ttl, ARGV[11]) end
if KEYS[9] or (n_app == 0 and ARGV[12] == '' and redis.call('EXISTS', KEYS[8]) == 0) then return 0 end
local left = pending_left(KEYS[8], ARGV[12])
if #left == 0 then return 0 end
return { meta[3], left }
`;

/**
 * Applies pending app deltas of one session to the app bucket, in revision
 * order, each at most once: the watermark of the session (`<first
 * revision>:<revision>` of the last delta applied) skips those already
 * applied. Idempotent, so a roll-forward may repeat it.
 * KEYS: appState, watermarks
 * ARGV: pair, first revision, wantBucket ('1' | '0'), forget ('1': drop the watermark after), then revision, delta...
 * Returns the app bucket when asked, else 0.
 */
export const APPLY = `
local mark = redis.call('HGET', KEYS[2], ARGV[1])
local first, done = nil, -1
if mark then
  local cut = string.find(mark, ':', 1, true)
  first = string.sub(mark, 1, cut - 1)
  done = tonumber(string.sub(mark, cut + 1))
end
if first ~= ARGV[2] then done = -1 end
local applied = nil
for at = 5, #ARGV, 2 do
  local revision = tonumber(ARGV[at])
  if revision > done then
    local list = cjson.decode(ARGV[at + 1])
    for from = 1, #list, 2000 do
      redis.call('HSET', KEYS[1], unpack(list, from, math.min(#list, from + 1999)))
    end
    done = revision
    applied = ARGV[at]
  end
end
if ARGV[4] == '1' then
  redis.call('HDEL', KEYS[2], ARGV[1])
elseif applied then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. applied)
end
if ARGV[3] == '1' then return redis.call('HGETALL', KEYS[1]) end
return 0
`;

/**
 * getSession: the session hash, the user bucket (and the app bucket when it
 * shares the slot), the filtered tail of the log and the pending app deltas.
 * The afterTimestamp walk goes back from the tail in growing chunks and
 * stops at the first event whose timestamp is <= afterTimestamp (or at the
 * `limit` bound), so it reads O(events returned) entries.
 * KEYS: session, events, userState, pending[, appState]
 * ARGV: afterTimestamp ('' for none), limit ('' for none), appliedUpTo ('' for none)
 * Returns 0 when the session is missing, else { session, user, app or 0, events, pending }.
 */
export const LOAD = `${HELPERS}
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
local app = 0
local pending = {}
if KEYS[5] then app = redis.call('HGETALL', KEYS[5]) else pending = pending_left(KEYS[4], ARGV[3]) end
return { session, redis.call('HGETALL', KEYS[3]), app, events, pending }
`;

/** Removes a shard's sessions whose time to live has passed from its indexes (and their keys, if still there). */
const PURGE_EXPIRED = `
local function purge_expired(base, expiry, shard_index)
  if redis.call('EXISTS', expiry) == 0 then return end
  local now = redis.call('TIME')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', '(' .. string.format('%.0f', ms))
  for _, pair in ipairs(gone) do
    local cut = string.find(pair, '\\0', 1, true)
    local user = string.sub(pair, 1, cut - 1)
    local session = string.sub(pair, cut + 1)
    redis.call('DEL', base .. 's:' .. pair, base .. 'e:' .. pair, base .. 'i:' .. pair, base .. 'p:' .. pair)
    redis.call('ZREM', shard_index, session .. '\\0' .. user)
    redis.call('ZREM', base .. 'm:' .. user, session)
    redis.call('ZREM', expiry, pair)
  end
end

-- Members of a sorted set from position 0 to stop - 1 by score (ascending or
-- descending), ties by member ascending in both orders: { member, score, ... }.
local function window(index, order, offset, stop)
  local out = {}
  if offset >= stop then return out end
  if order == 'asc' then return redis.call('ZRANGE', index, offset, stop - 1, 'WITHSCORES') end
  -- Walk the window by score groups: newest group first, each group in member order.
  local position = offset
  while position < stop do
    local score = redis.call('ZREVRANGE', index, position, position, 'WITHSCORES')[2]
    local newer = redis.call('ZCOUNT', index, '(' .. score, '+inf')
    local size = redis.call('ZCOUNT', index, score, score)
    local skip = position - newer
    local take = math.min(stop - position, size - skip)
    local group = redis.call('ZRANGEBYSCORE', index, score, score, 'LIMIT', skip, take)
    for _, member in ipairs(group) do
      out[#out + 1] = member
      out[#out + 1] = score
    end
    position = position + take
  end
  return out
end
`;

/**
 * deleteSession: the session hash, its log, id map and pending app deltas,
 * its index entries.
 * KEYS: session, events, eventIds, shardIndex, userIndex, expiry, pending
 * ARGV: appMember, userMember, expiryMember
 * Returns { first revision, pending app deltas } ('' instead of the revision when the session is
 * missing or never recorded an app delta); the caller rolls the deltas forward and drops the watermark.
 */
export const DELETE = `
local meta = redis.call('HMGET', KEYS[1], '\\0c', '\\0a')
local first = meta[1]
local pending = {}
if meta[2] then pending = redis.call('HGETALL', KEYS[7]) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[7])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[2])
redis.call('ZREM', KEYS[6], ARGV[3])
if not first or not meta[2] then first = '' end
return { first, pending }
`;

/**
 * listSessions of one user, or of a whole app stored in one slot: a window
 * of the index ordered by lastUpdateTime, ties by member (the encoded
 * session id, then user id) ascending in both orders, with each session's
 * hash and the user buckets (and the app bucket when it shares the slot).
 * Cost: O(log n + page) per distinct score in the window, never O(all sessions).
 * KEYS: index, expiry, shardIndex[, appState]
 * ARGV: order ('asc' | 'desc'), offset, limit ('' for all), encodedUser ('' when listing the app)
 * Returns { total, { member, sessionHash }..., { encodedUser, userHash }..., appHash or 0 }.
 */
export const LIST = `${PURGE_EXPIRED}
local base = string.sub(KEYS[3], 1, -2)
purge_expired(base, KEYS[2], KEYS[3])
local total = redis.call('ZCARD', KEYS[1])
local offset = tonumber(ARGV[2])
local stop = total
if ARGV[3] ~= '' then stop = math.min(total, offset + tonumber(ARGV[3])) end
local scored = window(KEYS[1], ARGV[1], offset, stop)
local sessions = {}
local users = {}
local seen = {}
for at = 1, #scored, 2 do
  local member = scored[at]
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
local app = 0
if KEYS[4] then app = redis.call('HGETALL', KEYS[4]) end
return { total, sessions, users, app }
`;

/**
 * listSessions of an app over many shards, first step: per shard, its count
 * and its first `want` members in the query's order, with their scores
 * (the caller merges the shards). On a single server one call covers every
 * shard; on a cluster each shard is its own call.
 * KEYS: shardIndex, expiry of each shard
 * ARGV: order ('asc' | 'desc'), want ('' for all)
 * Returns { { total, { member, score, ... } } per shard }.
 */
export const LIST_SHARDS = `${PURGE_EXPIRED}
local out = {}
for at = 1, #KEYS, 2 do
  purge_expired(string.sub(KEYS[at], 1, -2), KEYS[at + 1], KEYS[at])
  local total = redis.call('ZCARD', KEYS[at])
  local stop = total
  if ARGV[2] ~= '' then stop = math.min(total, tonumber(ARGV[2])) end
  out[#out + 1] = { total, window(KEYS[at], ARGV[1], 0, stop) }
end
return out
`;

/**
 * listSessions of an app over many shards, second step: the session hashes
 * and user buckets of the members in the window.
 * KEYS: shardIndex of each shard
 * ARGV: per shard: count, then its members (session \\0 user)
 * Returns { { { member, sessionHash }..., { encodedUser, userHash }... } per shard }.
 */
export const FETCH = `
local out = {}
local at = 1
for k = 1, #KEYS do
  local base = string.sub(KEYS[k], 1, -2)
  local sessions, users, seen = {}, {}, {}
  local count = tonumber(ARGV[at])
  for index = at + 1, at + count do
    local member = ARGV[index]
    local cut = string.find(member, '\\0', 1, true)
    local session = string.sub(member, 1, cut - 1)
    local user = string.sub(member, cut + 1)
    sessions[#sessions + 1] = { member, redis.call('HGETALL', base .. 's:' .. user .. '\\0' .. session) }
    if not seen[user] then
      seen[user] = true
      users[#users + 1] = { user, redis.call('HGETALL', base .. 'u:' .. user) }
    end
  end
  at = at + count + 1
  out[#out + 1] = { sessions, users }
end
return out
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
