/**
 * The server-side scripts: each store operation is one EVALSHA, so it costs
 * one round trip and runs atomically on the server. A script is sent in full
 * (EVAL) only when the server answers NOSCRIPT (first use, restart, failover,
 * SCRIPT FLUSH); EVAL also caches it for the next EVALSHA.
 *
 * Conventions shared with `store.ts`:
 * - Every script declares its keys and fixed arguments by name, in order, in
 *   TypeScript ({@link define}). Its Lua reads them as `KEYS.<name>` and
 *   `ARGV.<name>`, which become `KEYS[n]`/`ARGV[n]` when the module loads
 *   (an unknown name fails then), and the store builds the argument list from
 *   the same table ({@link keyList}, {@link argList}); `ARGV_REST` is the
 *   position of the first argument after the fixed ones.
 * - Keys are all in one hash slot (a user's shard, or the app's own slot);
 *   keys that depend on index members (listing, expiry) are built from the
 *   shard's base key, which is a shard key minus its last character. On a
 *   single server, the listing's first and second steps take the keys of
 *   every shard at once.
 * - Hash field/value pairs follow the fixed arguments, grouped by bucket.
 * - Scripts return tables, integers and strings only (never booleans, whose
 *   RESP3 form differs from RESP2).
 */
import { createHash } from 'node:crypto';

/** A script with its SHA1 and the names of its keys and fixed arguments, in order. */
export interface Script<K extends string = string, A extends string = string> {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
  readonly keys: readonly K[];
  readonly args: readonly A[];
}

/**
 * A script from Lua that names its keys and arguments: `KEYS.<name>` and
 * `ARGV.<name>` become positions in `keys` and `args`, `ARGV_REST` the first
 * position after `args`. Throws when the Lua names something not declared.
 */
export function define<const K extends string, const A extends string>(
  name: string,
  keys: readonly K[],
  args: readonly A[],
  lua: string,
): Script<K, A> {
  const source = lua
    .replace(/\b(KEYS|ARGV)\.([A-Za-z][A-Za-z0-9]*)\b/g, (_whole, table: string, field: string) => {
      const names: readonly string[] = table === 'KEYS' ? keys : args;
      const at = names.indexOf(field);
      if (at < 0) throw new Error(`script ${name} reads ${table}.${field}, which it does not declare`);
      return `${table}[${at + 1}]`;
    })
    .replace(/\bARGV_REST\b/g, String(args.length + 1));
  return { name, source, sha: createHash('sha1').update(source).digest('hex'), keys, args };
}

/**
 * The KEYS of a call to `target`, in its declared order. A key given as
 * undefined is left out; only trailing keys may be (the scripts test them
 * for nil).
 */
export function keyList<K extends string>(target: Script<K>, named: Readonly<Record<K, string | undefined>>): string[] {
  const out: string[] = [];
  for (const name of target.keys) {
    const key = named[name];
    if (key === undefined) continue;
    if (out.length !== target.keys.indexOf(name))
      throw new Error(`script ${target.name}: key ${name} after a missing key`);
    out.push(key);
  }
  return out;
}

/** The fixed ARGV of a call to `target`, in its declared order, then `rest`. */
export function argList<A extends string>(
  target: Script<string, A>,
  named: Readonly<Record<A, string | number>>,
  rest: ReadonlyArray<string | number> = [],
): Array<string | number> {
  return [...target.args.map((name) => named[name]), ...rest];
}

/** The server's clock in milliseconds. */
const NOW = `
local function now_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
`;

/** Shared Lua helpers of the scripts that write buckets; they take keys as parameters, never from KEYS. */
const HELPERS = `${NOW}
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

-- The expiry time (ms, as text) a write gives a session, or nil for none:
-- now + ttl on the idle clock and for a new session; on the creation clock,
-- the one the session got when it was created (none if it got none).
local function expiry_time(ttl, clock, session, new)
  if ttl <= 0 then return nil end
  if clock == 'idle' or new then return string.format('%.0f', now_ms() + ttl) end
  local at = redis.call('PEXPIRETIME', session)
  if at < 0 then return nil end
  return string.format('%.0f', at)
end

local function expire_session(session, events, event_ids, pending, expiry, at, member)
  redis.call('PEXPIREAT', session, at)
  if redis.call('EXISTS', events) == 1 then
    redis.call('PEXPIREAT', events, at)
    redis.call('PEXPIREAT', event_ids, at)
  end
  if redis.call('EXISTS', pending) == 1 then redis.call('PEXPIREAT', pending, at) end
  redis.call('ZADD', expiry, at, member)
end

-- The app pairs of this write: straight into the app bucket (app_state, when
-- it shares the slot), or recorded as pending under the new revision (the
-- app has its own slot, app_state is nil).
local function app_pairs(from, count, app_state, pending, revision, session)
  if count == 0 then return end
  if app_state then
    hset_pairs(app_state, nil, from, count)
  else
    local list = {}
    for at = from, from + 2 * count - 1 do list[#list + 1] = ARGV[at] end
    redis.call('HSET', pending, revision, cjson.encode(list))
    redis.call('HSET', session, '\\0a', '1')
  end
end

-- Forgets the pending app deltas up to revision 'upto' (known applied), and
-- returns those left, { revision, delta, ... } (empty when none). The session
-- hash keeps the highest revision forgotten ('\0k'): a reader that saw the app
-- bucket before a delta was applied can tell it will not find that delta here.
local function pending_left(pending, upto, session)
  local left = redis.call('HGETALL', pending)
  if #left == 0 or upto == '' then return left end
  local limit = tonumber(upto)
  local kept = {}
  local forgot = false
  for at = 1, #left, 2 do
    if tonumber(left[at]) <= limit then
      redis.call('HDEL', pending, left[at])
      forgot = true
    else
      kept[#kept + 1] = left[at]
      kept[#kept + 1] = left[at + 1]
    end
  end
  if forgot and limit > tonumber(redis.call('HGET', session, '\0k') or '-1') then
    redis.call('HSET', session, '\0k', upto)
  end
  return kept
end
`;

/** The keys of createSession, importSession and appendEvent: the user's shard, and the app bucket only when it shares the slot. */
const WRITE_KEYS = [
  'session',
  'events',
  'eventIds',
  'userState',
  'shardIndex',
  'userIndex',
  'expiry',
  'pending',
  'appState',
] as const;

/** What a write says of expiry and of the listing indexes, after its own arguments. */
const WRITE_TAIL = ['ttlMs', 'clock', 'appMember', 'userMember', 'expiryMember'] as const;

/** The fixed arguments createSession and importSession share: the listed time, revision, bucket sizes, then {@link WRITE_TAIL}. */
const NEW_SESSION_ARGS = ['updateTime', 'revision', 'nSession', 'nUser', 'nApp', ...WRITE_TAIL] as const;

/**
 * The start and the end of a new session, shared by createSession and
 * importSession: start_session clears what a deleted session of the key
 * left, writes the head (given) and the session and user pairs, and the app
 * pairs; it returns where the app pairs begin. index_session adds the
 * session to the app's and the user's listing and sets or clears its expiry.
 */
const NEW_SESSION = `${HELPERS}
local function start_session(head)
  redis.call('DEL', KEYS.events, KEYS.eventIds, KEYS.pending)
  local next = hset_pairs(KEYS.session, head, ARGV_REST, tonumber(ARGV.nSession))
  next = hset_pairs(KEYS.userState, nil, next, tonumber(ARGV.nUser))
  app_pairs(next, tonumber(ARGV.nApp), KEYS.appState, KEYS.pending, ARGV.revision, KEYS.session)
  return next
end

local function index_session()
  redis.call('ZADD', KEYS.shardIndex, ARGV.updateTime, ARGV.appMember)
  redis.call('ZADD', KEYS.userIndex, ARGV.updateTime, ARGV.userMember)
  local at = expiry_time(tonumber(ARGV.ttlMs), ARGV.clock, KEYS.session, true)
  if at then
    expire_session(KEYS.session, KEYS.events, KEYS.eventIds, KEYS.pending, KEYS.expiry, at, ARGV.expiryMember)
  else
    redis.call('ZREM', KEYS.expiry, ARGV.expiryMember)
  end
end
`;

/**
 * createSession, with the create time as `updateTime`, then the session,
 * user and app pairs. Returns 0 when the session exists, else
 * { userBucket, appBucket or 0 (other slot), pending app deltas }.
 */
export const CREATE = define(
  'create',
  WRITE_KEYS,
  NEW_SESSION_ARGS,
  `${NEW_SESSION}
if redis.call('EXISTS', KEYS.session) == 1 then return 0 end
start_session({ '\\0r', ARGV.revision, '\\0c', ARGV.revision, '\\0t', ARGV.updateTime, '\\0n', '0' })
index_session()
local app = 0
if KEYS.appState then app = redis.call('HGETALL', KEYS.appState) end
return { redis.call('HGETALL', KEYS.userState), app, redis.call('HGETALL', KEYS.pending) }
`,
);

/**
 * importSession: a whole session at once, as createSession with the given
 * revision and lastUpdateTime (`updateTime`), then every event in order (an
 * id seen twice replaces its earlier entry in place, as an append would).
 * After the pairs: the event count, then per event its entry and id field.
 * Returns 0 when the session exists, else { pending app deltas }.
 */
export const IMPORT = define(
  'import',
  WRITE_KEYS,
  NEW_SESSION_ARGS,
  `${NEW_SESSION}
if redis.call('EXISTS', KEYS.session) == 1 then return 0 end
local next = start_session({ '\\0r', ARGV.revision, '\\0c', ARGV.revision, '\\0t', ARGV.updateTime }) + 2 * tonumber(ARGV.nApp)
local count = 0
local last = next + 2 * tonumber(ARGV[next]) - 1
local batch = {}
for at = next + 1, last, 2 do
  local position = redis.call('HGET', KEYS.eventIds, ARGV[at + 1])
  if position then
    if #batch > 0 then redis.call('RPUSH', KEYS.events, unpack(batch)) batch = {} end
    redis.call('LSET', KEYS.events, position, ARGV[at])
  else
    redis.call('HSET', KEYS.eventIds, ARGV[at + 1], count)
    batch[#batch + 1] = ARGV[at]
    count = count + 1
    if #batch >= 1000 then redis.call('RPUSH', KEYS.events, unpack(batch)) batch = {} end
  end
end
if #batch > 0 then redis.call('RPUSH', KEYS.events, unpack(batch)) end
redis.call('HSET', KEYS.session, '\\0n', count)
index_session()
return { redis.call('HGETALL', KEYS.pending) }
`,
);

/**
 * appendEvent: revision check, event stored or replaced in place, the
 * session and user deltas, the app delta (applied, or recorded as pending),
 * lastUpdateTime, revision, indexes, expiry; all or nothing.
 * The session hash keeps the event count, so a new event's position is known
 * without asking the log, and HSETNX both tests for the id and records it.
 * `appliedUpTo` is the revision up to which this session's pending app
 * deltas are known applied ('' for none). After the fixed arguments: the
 * session, user and app pairs.
 * Returns -1 when the session is missing, the stored revision when stale,
 * 0 when stored and nothing is pending, else { first revision, pending app deltas }.
 */
export const APPEND = define(
  'append',
  WRITE_KEYS,
  [
    'expectedRevision',
    'updateTime',
    'entry',
    'eventIdField',
    'nSession',
    'nUser',
    'nApp',
    ...WRITE_TAIL,
    'appliedUpTo',
  ] as const,
  `${HELPERS}
local meta = redis.call('HMGET', KEYS.session, '\\0r', '\\0n', '\\0c')
local revision = meta[1]
if not revision then return -1 end
if revision ~= ARGV.expectedRevision then return tonumber(revision) end
local count = tonumber(meta[2])
local new_revision = string.format('%.0f', tonumber(revision) + 1)
local head = { '\\0r', new_revision, '\\0t', ARGV.updateTime }
if redis.call('HSETNX', KEYS.eventIds, ARGV.eventIdField, count) == 1 then
  redis.call('RPUSH', KEYS.events, ARGV.entry)
  head[5] = '\\0n'
  head[6] = count + 1
else
  redis.call('LSET', KEYS.events, redis.call('HGET', KEYS.eventIds, ARGV.eventIdField), ARGV.entry)
end
local next = hset_pairs(KEYS.session, head, ARGV_REST, tonumber(ARGV.nSession))
next = hset_pairs(KEYS.userState, nil, next, tonumber(ARGV.nUser))
local n_app = tonumber(ARGV.nApp)
app_pairs(next, n_app, KEYS.appState, KEYS.pending, new_revision, KEYS.session)
redis.call('ZADD', KEYS.shardIndex, ARGV.updateTime, ARGV.appMember)
redis.call('ZADD', KEYS.userIndex, ARGV.updateTime, ARGV.userMember)
local at = expiry_time(tonumber(ARGV.ttlMs), ARGV.clock, KEYS.session, false)
if at then
  expire_session(KEYS.session, KEYS.events, KEYS.eventIds, KEYS.pending, KEYS.expiry, at, ARGV.expiryMember)
end
if KEYS.appState or (n_app == 0 and ARGV.appliedUpTo == '' and redis.call('EXISTS', KEYS.pending) == 0) then return 0 end
local left = pending_left(KEYS.pending, ARGV.appliedUpTo, KEYS.session)
if #left == 0 then return 0 end
return { meta[3], left }
`,
);

/**
 * Applies pending app deltas of one session to the app bucket, in revision
 * order, each at most once: the watermark of the session (`<first
 * revision>:<revision>` of the last delta applied) skips those already
 * applied. Idempotent, so a roll-forward may repeat it. `pair` names the
 * session in the watermarks; `wantBucket` ('1' | '0') asks for the app
 * bucket back; `forget` ('1') drops the watermark after. After them:
 * revision, delta, ... Returns the app bucket when asked, else 0.
 */
export const APPLY = define(
  'applyApp',
  ['appState', 'watermarks'] as const,
  ['pair', 'first', 'wantBucket', 'forget'] as const,
  `
local mark = redis.call('HGET', KEYS.watermarks, ARGV.pair)
local first, done = nil, -1
if mark then
  local cut = string.find(mark, ':', 1, true)
  first = string.sub(mark, 1, cut - 1)
  done = tonumber(string.sub(mark, cut + 1))
end
if first ~= ARGV.first then done = -1 end
local applied = nil
for at = ARGV_REST, #ARGV, 2 do
  local revision = tonumber(ARGV[at])
  if revision > done then
    local list = cjson.decode(ARGV[at + 1])
    for from = 1, #list, 2000 do
      redis.call('HSET', KEYS.appState, unpack(list, from, math.min(#list, from + 1999)))
    end
    done = revision
    applied = ARGV[at]
  end
end
if ARGV.forget == '1' then
  redis.call('HDEL', KEYS.watermarks, ARGV.pair)
elseif applied then
  redis.call('HSET', KEYS.watermarks, ARGV.pair, ARGV.first .. ':' .. applied)
end
if ARGV.wantBucket == '1' then return redis.call('HGETALL', KEYS.appState) end
return 0
`,
);

/**
 * getSession: the session hash, the user bucket (and the app bucket when it
 * shares the slot), the filtered tail of the log and the pending app deltas.
 * The afterTimestamp walk goes back from the tail in growing chunks and
 * stops at the first event whose timestamp is <= afterTimestamp (or at the
 * `limit` bound), so it reads O(events returned) entries. Empty arguments
 * mean none. Returns 0 when the session is missing, else
 * { session, user, app or 0, events, pending }.
 */
export const LOAD = define(
  'load',
  ['session', 'events', 'userState', 'pending', 'appState'] as const,
  ['afterTimestamp', 'limit', 'appliedUpTo'] as const,
  `${HELPERS}
local session = redis.call('HGETALL', KEYS.session)
if #session == 0 then return 0 end
local length = redis.call('LLEN', KEYS.events)
local floor = 0
if ARGV.limit ~= '' then floor = math.max(0, length - tonumber(ARGV.limit)) end
local events = {}
if ARGV.afterTimestamp == '' then
  if floor < length then events = redis.call('LRANGE', KEYS.events, floor, -1) end
else
  local after = tonumber(ARGV.afterTimestamp)
  local chunks = {}
  local high = length - 1
  local size = 16
  while high >= floor do
    local low = math.max(floor, high - size + 1)
    local chunk = redis.call('LRANGE', KEYS.events, low, high)
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
if KEYS.appState then
  app = redis.call('HGETALL', KEYS.appState)
else
  pending = pending_left(KEYS.pending, ARGV.appliedUpTo, KEYS.session)
end
return { session, redis.call('HGETALL', KEYS.userState), app, events, pending }
`,
);

/** Removes a shard's sessions whose time to live has passed from its indexes (and their keys, if still there). */
const PURGE_EXPIRED = `${NOW}
local function purge_expired(base, expiry, shard_index)
  if redis.call('EXISTS', expiry) == 0 then return end
  local gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', '(' .. string.format('%.0f', now_ms()))
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
 * its index entries. Returns { first revision, pending app deltas } ('' instead
 * of the revision when the session is missing or never recorded an app
 * delta); the caller rolls the deltas forward and drops the watermark.
 */
export const DELETE = define(
  'delete',
  ['session', 'events', 'eventIds', 'shardIndex', 'userIndex', 'expiry', 'pending'] as const,
  ['appMember', 'userMember', 'expiryMember'] as const,
  `
local meta = redis.call('HMGET', KEYS.session, '\\0c', '\\0a')
local first = meta[1]
local pending = {}
if meta[2] then pending = redis.call('HGETALL', KEYS.pending) end
redis.call('DEL', KEYS.session, KEYS.events, KEYS.eventIds, KEYS.pending)
redis.call('ZREM', KEYS.shardIndex, ARGV.appMember)
redis.call('ZREM', KEYS.userIndex, ARGV.userMember)
redis.call('ZREM', KEYS.expiry, ARGV.expiryMember)
if not first or not meta[2] then first = '' end
return { first, pending }
`,
);

/**
 * listSessions of one user, or of a whole app stored in one slot: a window
 * of `index` ordered by lastUpdateTime, ties by member (the encoded session
 * id, then user id) ascending in both orders, with each session's hash and
 * the user buckets (and the app bucket when it shares the slot).
 * `order` is 'asc' | 'desc', `limit` '' for all, `encodedUser` '' when
 * listing the app. Cost: O(log n + page) per distinct score in the window,
 * never O(all sessions).
 * Returns { total, { member, sessionHash }..., { encodedUser, userHash }..., appHash or 0 }.
 */
export const LIST = define(
  'list',
  ['index', 'expiry', 'shardIndex', 'appState'] as const,
  ['order', 'offset', 'limit', 'encodedUser'] as const,
  `${PURGE_EXPIRED}
local base = string.sub(KEYS.shardIndex, 1, -2)
purge_expired(base, KEYS.expiry, KEYS.shardIndex)
local total = redis.call('ZCARD', KEYS.index)
local offset = tonumber(ARGV.offset)
local stop = total
if ARGV.limit ~= '' then stop = math.min(total, offset + tonumber(ARGV.limit)) end
local scored = window(KEYS.index, ARGV.order, offset, stop)
local sessions = {}
local users = {}
local seen = {}
for at = 1, #scored, 2 do
  local member = scored[at]
  local user = ARGV.encodedUser
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
if KEYS.appState then app = redis.call('HGETALL', KEYS.appState) end
return { total, sessions, users, app }
`,
);

/**
 * listSessions of an app over many shards, first step: per shard, its count
 * and its first `want` members ('' for all) in the query's order, with
 * their scores (the caller merges the shards). On a single server one call
 * covers every shard; on a cluster each shard is its own call.
 * KEYS (not named: as many pairs as shards): shardIndex, expiry of each shard.
 * Returns { { total, { member, score, ... } } per shard }.
 */
export const LIST_SHARDS = define(
  'listShards',
  [],
  ['order', 'want'] as const,
  `${PURGE_EXPIRED}
local out = {}
for at = 1, #KEYS, 2 do
  purge_expired(string.sub(KEYS[at], 1, -2), KEYS[at + 1], KEYS[at])
  local total = redis.call('ZCARD', KEYS[at])
  local stop = total
  if ARGV.want ~= '' then stop = math.min(total, tonumber(ARGV.want)) end
  out[#out + 1] = { total, window(KEYS[at], ARGV.order, 0, stop) }
end
return out
`,
);

/**
 * listSessions of an app over many shards, second step: the session hashes
 * and user buckets of the members in the window.
 * KEYS (not named): shardIndex of each shard. ARGV (not named): per shard,
 * its member count, then its members (session \\0 user).
 * Returns { { { member, sessionHash }..., { encodedUser, userHash }... } per shard }.
 */
export const FETCH = define(
  'fetch',
  [],
  [],
  `
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
`,
);

/** One bucket as a flat field/value array. */
export const READ_BUCKET = define('readBucket', ['bucket'] as const, [], `return redis.call('HGETALL', KEYS.bucket)`);

/**
 * The app bucket and the watermark of one session (`pair`): how far that
 * session's app deltas had been applied when the bucket was read ('' for
 * none). Returns { appBucket, watermark }.
 */
export const READ_APP = define(
  'readApp',
  ['appState', 'watermarks'] as const,
  ['pair'] as const,
  `return { redis.call('HGETALL', KEYS.appState), redis.call('HGET', KEYS.watermarks, ARGV.pair) or '' }`,
);

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
