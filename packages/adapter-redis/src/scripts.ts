/**
 * The server-side scripts. Each runs atomically on the node that owns its
 * first key, as one EVALSHA (sent in full, EVAL, only when the server answers
 * NOSCRIPT: first use, restart, failover, SCRIPT FLUSH).
 *
 * Two protocols share the scripts (see `store.ts` for which one a store uses):
 * - direct: every key of an operation in one script, the app bucket
 *   included (one server, or an app kept in one slot). Every operation is one
 *   script and one round trip.
 * - outbox (a Redis Cluster with the app spread over several slots): a write
 *   puts its `app:` delta into its shard's outbox in the same script as its
 *   event, and the app slot applies outbox entries in order of their
 *   position (see `outbox.ts`).
 *
 * Conventions shared with `store.ts` and `outbox.ts`:
 * - Every script declares its keys and fixed arguments by name, in order, in
 *   TypeScript ({@link define}). Its Lua reads them as `KEYS.<name>` and
 *   `ARGV.<name>`, which become `KEYS[n]`/`ARGV[n]` when the module loads
 *   (an unknown name fails then), and the store builds the argument list from
 *   the same table ({@link keyList}, {@link argList}); `ARGV_REST` is the
 *   position of the first argument after the fixed ones.
 * - Key parts and fields come from `keys.ts` ({@link PART}, {@link FIELD}),
 *   written into the Lua when the module loads. Keys that depend on index
 *   members (listing, expiry) are built from the shard's base key.
 * - Hash field/value pairs follow the fixed arguments, grouped by bucket.
 * - Scripts return tables, integers and strings only (never booleans, whose
 *   RESP3 form differs from RESP2).
 * - The listing and the head of a session read (its hashes) come back as one
 *   JSON text (`cjson.encode`) rather than as nested replies: a reply element
 *   per hash field costs both sides more than one string the client parses
 *   natively (a page of 50 sessions: about 15% less server and 10% less
 *   client CPU, measured). Lua's encoder writes an empty table as `{}`, so the
 *   reader takes a non-array where it expects a list as an empty list. Every
 *   stored value is valid UTF-8 (JSON text, encoded names, numbers), so the
 *   text is too. Event entries, the bulk of a read, stay plain replies.
 */
import { createHash } from 'node:crypto';
import { UnreadableDataError } from '@adk-state/core/store';
import { FIELD, luaString, OUTBOX_INDEX_SUFFIX, PART, RECENT_WRITES } from './keys.js';

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
  const names = target.keys;
  const out: string[] = [];
  for (let at = 0; at < names.length; at++) {
    const key = named[names[at] as K];
    if (key === undefined) continue;
    if (out.length !== at) throw new Error(`script ${target.name}: key ${names[at]} after a missing key`);
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
  const names = target.args;
  const out: Array<string | number> = new Array(names.length + rest.length);
  for (let at = 0; at < names.length; at++) out[at] = named[names[at] as A];
  for (let at = 0; at < rest.length; at++) out[names.length + at] = rest[at] as string | number;
  return out;
}

/** Layout names as Lua literals. */
const F = Object.fromEntries(Object.entries(FIELD).map(([name, text]) => [name, luaString(text)])) as Record<
  keyof typeof FIELD,
  string
>;
/** The suffix of an outbox's position index, as a Lua literal. */
const I = luaString(OUTBOX_INDEX_SUFFIX);
const P = Object.fromEntries(Object.entries(PART).map(([name, text]) => [name, luaString(text)])) as Record<
  keyof typeof PART,
  string
>;

/**
 * The code of the error a write answers, having written nothing, when a key
 * it would change holds another type than the one the scripts keep there
 * (written outside adk-state): `FOREIGNTYPE <expected> <found> <key>`.
 * Redis keeps what a script wrote before a command failed, so a write checks
 * first.
 */
export const FOREIGN_TYPE = 'FOREIGNTYPE';

/** The server's clock in milliseconds and microseconds. */
const NOW = `
local function now_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
local function now_us()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end
`;

/**
 * How far ahead of a server's clock a position may be (a year, in
 * microseconds): far more than any skew between the clocks of a cluster's
 * servers, and far less than what is left below 2^53.
 */
const FUTURE_US = 366 * 24 * 3600 * 1_000_000;

/**
 * What these scripts take for a position or a mark written as text: whole
 * decimal digits (at most 16 of them) no further ahead of this server's clock
 * than {@link FUTURE_US}. Positions come from the servers' clocks, so one
 * further ahead was written outside the store, and taken as a position it
 * would push the shard's next positions past 16 digits. Anything else counts
 * as none: never compared, never passed on. Needs {@link NOW} before it.
 */
const MARK = `
local horizon = nil
-- The highest position the scripts take, on this server's clock (read once a call).
local function horizon_us()
  if not horizon then horizon = now_us() + ${FUTURE_US} end
  return horizon
end
local function position_of(text)
  if type(text) ~= 'string' or #text > 16 or not string.find(text, '^%d+$') then return nil end
  local value = tonumber(text)
  if value > horizon_us() then return nil end
  return value
end
`;

/**
 * The shard side of the outbox (see `outbox.ts`). Positions are numbers
 * below 2^53 kept as decimal text: the shard's clock in microseconds, or one
 * more than the last position given, whichever is higher. The outbox is a
 * hash (position -> delta, and the fields `last`, `known` and `floor`) with
 * a sorted set of its positions beside it (its key plus `i`), so that a write
 * or a read touches only the entries it needs, however many are kept.
 */
const OUTBOX = `${MARK}
-- The outbox's last, known and floor positions, as numbers (-1: none; a field that is not a
-- number, changed outside the store, counts as none).
local function outbox_meta(outbox)
  local meta = redis.call('HMGET', outbox, ${F.last}, ${F.known}, ${F.floor})
  local last, known, floor = position_of(meta[1]) or 0, position_of(meta[2]) or -1, position_of(meta[3]) or -1
  -- A known or floor position above the last one given is none of this outbox's (changed outside
  -- the store, or a mark taken before outbox_ack refused such): a known one counts as none (the
  -- next hand-over sets it again), a floor as the known one (entries up to it were applied).
  if known > last then known = -1 end
  if floor > last then floor = known end
  return { last, known, floor }
end

-- Adds an entry (the delta as JSON text) and returns its position.
local function outbox_add(outbox, delta)
  local last = position_of(redis.call('HGET', outbox, ${F.last})) or 0
  local at = string.format('%.0f', math.max(now_us(), last + 1))
  redis.call('HSET', outbox, ${F.last}, at, at, delta)
  redis.call('ZADD', outbox .. ${I}, at, at)
  return at
end

-- Records that the app slot has applied the entries up to 'ack' (text, '' for
-- nothing new) and removes entries known applied that are older than keep_us
-- (at most 1000 a call). Returns the outbox's meta after.
local function outbox_ack(outbox, ack, keep_us)
  local meta = outbox_meta(outbox)
  local acked = position_of(ack)
  -- A mark above the last position given is not one of this outbox's entries: the shard lost them
  -- (a failover) or the mark was changed outside the store; a read lowers it. Taken as known, it
  -- would mark entries made since as applied.
  if acked and acked > meta[2] and acked <= meta[1] then
    meta[2] = acked
    redis.call('HSET', outbox, ${F.known}, ack)
  end
  if meta[2] < 0 then return meta end
  local cut = math.min(meta[2], now_us() - tonumber(keep_us))
  if cut <= meta[3] then return meta end
  local index = outbox .. ${I}
  local gone = redis.call('ZRANGEBYSCORE', index, '-inf', string.format('%.0f', cut), 'LIMIT', 0, 1000)
  if #gone == 0 then return meta end
  redis.call('HDEL', outbox, unpack(gone))
  redis.call('ZREM', index, unpack(gone))
  -- The floor moves only over entries removed, to the highest of them (every entry up to cut, or
  -- up to the 1000th): one of the outbox's positions, so a mark raised to it (the repair of a mark
  -- the app slot lost, see Outbox) is one an older view of the outbox holds.
  local floor = tonumber(gone[#gone]) or cut
  meta[3] = floor
  redis.call('HSET', outbox, ${F.floor}, string.format('%.0f', floor))
  return meta
end

-- What a reader or an applier needs of the outbox: { last, floor, { position, delta, ... }, known }
-- with every entry above floor (all present). floor is the highest position known applied,
-- or 'from' when lower (a reader whose app read is older), never below the removed ones; known
-- is the highest position known applied (-1: none): an entry at or below it was applied once.
local function outbox_view(outbox, meta, from)
  local cut = meta[2]
  local from_position = tonumber(from)
  if from_position and from_position < cut then cut = from_position end
  if meta[3] > cut then cut = meta[3] end
  local text = string.format('%.0f', cut)
  -- Entries up to the last position given (the horizon when that is not recorded) only, and only
  -- at positions as the scripts write them (each entry is written with the last position, in one
  -- script): one added outside the store elsewhere is never shown, so never applied nor taken for
  -- a mark.
  local bound = horizon_us()
  if meta[1] > 0 then bound = math.min(bound, meta[1]) end
  local positions = redis.call('ZRANGEBYSCORE', outbox .. ${I}, '(' .. text, string.format('%.0f', bound))
  local entries = {}
  for first = 1, #positions, 1000 do
    local stop = math.min(#positions, first + 999)
    local deltas = redis.call('HMGET', outbox, unpack(positions, first, stop))
    for at = first, stop do
      if position_of(positions[at]) then
        entries[#entries + 1] = positions[at]
        entries[#entries + 1] = deltas[at - first + 1]
      end
    end
  end
  return { string.format('%.0f', meta[1]), text, entries, string.format('%.0f', meta[2]) }
end
`;

/**
 * What a write checks before it changes anything: the type of every key it
 * may change without having read it first (see {@link FOREIGN_TYPE}).
 */
const FOREIGN = `
-- checks: key, type, key, type, ... Returns the error reply the script answers, naming the first
-- key that holds another type, or nil when each is absent or of its type. An error reply ends at a
-- 0 byte and has no line breaks, and the key comes last: its control bytes, spaces and backslashes
-- are written as \\xHH.
local function foreign_key(checks)
  for at = 1, #checks, 2 do
    local found = redis.call('TYPE', checks[at]).ok
    if found ~= 'none' and found ~= checks[at + 1] then
      local key = string.gsub(checks[at], '[%z%c \\\\]', function(c) return string.format('\\\\x%02x', string.byte(c)) end)
      return redis.error_reply('${FOREIGN_TYPE} ' .. checks[at + 1] .. ' ' .. found .. ' ' .. key)
    end
  end
  return nil
end
`;

/**
 * Removes expired sessions of a shard (at most `limit`, nil for all) from its
 * indexes, and their keys if still there. Needs `now_ms` (NOW).
 */
const PURGE = `
local function purge_expired(base, expiry, shard_index, limit)
  -- None, or another type (written outside adk-state, which a write refuses to touch): nothing to purge.
  if redis.call('TYPE', expiry).ok ~= 'zset' then return end
  local cut = '(' .. string.format('%.0f', now_ms())
  local gone
  if limit then gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', cut, 'LIMIT', 0, limit)
  else gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', cut) end
  for _, pair in ipairs(gone) do
    -- A member that is not <user>\\0<session> (not written by these scripts) is only dropped.
    local split = string.find(pair, '\\0', 1, true)
    if split then
      local user = string.sub(pair, 1, split - 1)
      local session = string.sub(pair, split + 1)
      redis.call('DEL', base .. ${P.session} .. ':' .. pair, base .. ${P.events} .. ':' .. pair, base .. ${P.eventIds} .. ':' .. pair)
      -- The indexes may be of another type (another user's is not among the keys a write checks, and
      -- a listing of one user does not check the shard's): such an index is left as it is.
      redis.pcall('ZREM', shard_index, session .. '\\0' .. user)
      redis.pcall('ZREM', base .. ${P.userIndex} .. ':' .. user, session)
    end
    redis.call('ZREM', expiry, pair)
  end
end
`;

/** Shared Lua helpers of the scripts that write sessions; they take keys as parameters, never from KEYS. */
const HELPERS = `${NOW}${OUTBOX}${PURGE}${FOREIGN}
-- The checks of a create, an import or an append (after the given ones): the user bucket when the
-- write has user pairs, the expiry index with a time to live, and where its app delta or ack goes;
-- with 'answered' (a create, whose answer reads them after it wrote), the buckets and the outbox always.
local function foreign_write(checks, answered)
  if answered or tonumber(ARGV.nUser) > 0 then checks[#checks + 1] = KEYS.userState checks[#checks + 1] = 'hash' end
  if tonumber(ARGV.ttlMs) > 0 then checks[#checks + 1] = KEYS.expiry checks[#checks + 1] = 'zset' end
  if ARGV.mode == 'd' then
    if answered or tonumber(ARGV.nApp) > 0 then checks[#checks + 1] = KEYS.app checks[#checks + 1] = 'hash' end
  elseif answered or ARGV.ack ~= '' or ARGV.appDelta ~= '' then
    checks[#checks + 1] = KEYS.app
    checks[#checks + 1] = 'hash'
    checks[#checks + 1] = KEYS.app .. ${I}
    checks[#checks + 1] = 'zset'
  end
  return foreign_key(checks)
end
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

local function expire_session(session, events, event_ids, expiry, at, member)
  redis.call('PEXPIREAT', session, at)
  if redis.call('EXISTS', events) == 1 then
    redis.call('PEXPIREAT', events, at)
    redis.call('PEXPIREAT', event_ids, at)
  end
  redis.call('ZADD', expiry, at, member)
end

-- Records the acknowledgement a write carries (outbox only; also for a write that ends before its
-- app delta: stale, missing, already made): the outbox's meta after, or nil when it carries none.
local function keep_ack()
  if ARGV.mode == 'd' or ARGV.ack == '' then return nil end
  return outbox_ack(KEYS.app, ARGV.ack, ARGV.keepUs)
end

-- The app delta of a write. Direct ('d'): its pairs (after 'from') go into
-- the app bucket, KEYS.app. Outbox ('o'): its JSON text, ARGV.appDelta, goes
-- into the shard's outbox, KEYS.app, after the acknowledgement ARGV.ack is
-- recorded; returns the outbox view an applier needs (nil when nothing to apply).
local function app_write(from, count)
  if ARGV.mode == 'd' then
    if count > 0 then hset_pairs(KEYS.app, nil, from, count) end
    return nil
  end
  if ARGV.appDelta == '' then
    keep_ack()
    return nil
  end
  outbox_add(KEYS.app, ARGV.appDelta)
  return outbox_view(KEYS.app, outbox_ack(KEYS.app, ARGV.ack, ARGV.keepUs), '')
end

-- What a write that found its own earlier write answers on the outbox protocol (nil on the
-- direct one): the shard's outbox view, so that the caller applies its app delta if it waits there.
local function own_view()
  if ARGV.mode == 'd' then return nil end
  return outbox_view(KEYS.app, keep_ack() or outbox_meta(KEYS.app), '')
end
`;

/** The append's answer when the session hash is not what the scripts write (no revision, or a revision that is not a whole number). */
export const UNREADABLE_HEAD = -2;
/** The append's answer when a re-appended id's recorded position is not a place in the log. */
export const UNREADABLE_LOG = -3;

/** The keys of createSession, importSession and appendEvent: the user's shard, then the app bucket (direct) or the shard's outbox. */
const WRITE_KEYS = ['session', 'events', 'eventIds', 'userState', 'shardIndex', 'userIndex', 'expiry', 'app'] as const;

/**
 * What a write says of expiry, the listing indexes and its app delta, after
 * its own arguments. On the outbox protocol the shard records the write's
 * `ack` whatever the write answers, except data it cannot read.
 */
const WRITE_TAIL = [
  'ttlMs',
  'clock',
  'appMember',
  'userMember',
  'expiryMember',
  'mode',
  'appDelta',
  'ack',
  'keepUs',
] as const;

/** The fixed arguments createSession and importSession share: the listed time, revision, bucket sizes, then {@link WRITE_TAIL}. */
const NEW_SESSION_ARGS = ['updateTime', 'revision', 'life', 'nSession', 'nUser', 'nApp', ...WRITE_TAIL] as const;

/**
 * The start and the end of a new session, shared by createSession and
 * importSession: start_session clears what a deleted session of the key
 * left, writes the head (given), the session and user pairs and the app
 * delta; it returns where the arguments after the pairs begin, and the
 * outbox view when there is an app delta to apply. index_session adds the
 * session to the app's and the user's listing and sets or clears its expiry.
 */
const NEW_SESSION = `${HELPERS}
local function start_session(head)
  redis.call('DEL', KEYS.events, KEYS.eventIds)
  local next = hset_pairs(KEYS.session, head, ARGV_REST, tonumber(ARGV.nSession))
  next = hset_pairs(KEYS.userState, nil, next, tonumber(ARGV.nUser))
  local view = app_write(next, tonumber(ARGV.nApp))
  return next + 2 * tonumber(ARGV.nApp), view
end

-- A write with a time to live also removes a few expired sessions of the shard (before it
-- writes: an expired earlier life of this very key is among them).
local function purge_some()
  if tonumber(ARGV.ttlMs) > 0 then purge_expired(string.sub(KEYS.shardIndex, 1, -2), KEYS.expiry, KEYS.shardIndex, 100) end
end

local function index_session()
  redis.call('ZADD', KEYS.shardIndex, ARGV.updateTime, ARGV.appMember)
  redis.call('ZADD', KEYS.userIndex, ARGV.updateTime, ARGV.userMember)
  local at = expiry_time(tonumber(ARGV.ttlMs), ARGV.clock, KEYS.session, true)
  if at then
    expire_session(KEYS.session, KEYS.events, KEYS.eventIds, KEYS.expiry, at, ARGV.expiryMember)
  else
    redis.call('ZREM', KEYS.expiry, ARGV.expiryMember)
  end
end
`;

/**
 * createSession, with the create time as `updateTime`, then the session,
 * user and app pairs. Returns 0 when the session exists (made by another
 * call), else { userBucket, appBucket (direct) or the outbox view (outbox:
 * { last, floor, entries })}: also when this very call made it already.
 */
export const CREATE = define(
  'create',
  WRITE_KEYS,
  NEW_SESSION_ARGS,
  `${NEW_SESSION}
-- The answer: the user bucket, and the app bucket (direct) or the outbox view (the write's own, else the shard's).
local function created(view)
  if ARGV.mode == 'd' then view = redis.call('HGETALL', KEYS.app)
  elseif not view then view = own_view() end
  return { redis.call('HGETALL', KEYS.userState), view }
end
local foreign = foreign_write({ KEYS.session, 'hash', KEYS.shardIndex, 'zset', KEYS.userIndex, 'zset', KEYS.expiry, 'zset' }, true)
if foreign then return foreign end
if redis.call('EXISTS', KEYS.session) == 1 then
  -- Each call draws its own life: this create, sent again after its reply was lost, finds its own session.
  if redis.call('HGET', KEYS.session, ${F.life}) ~= ARGV.life then
    keep_ack()
    return 0
  end
  return created(nil)
end
purge_some()
local _, view = start_session({ ${F.revision}, ARGV.revision, ${F.life}, ARGV.life, ${F.updated}, ARGV.updateTime, ${F.count}, '0' })
index_session()
return created(view)
`,
);

/**
 * importSession: a whole session at once, as createSession with the given
 * revision and lastUpdateTime (`updateTime`), then every event in order (an
 * id seen twice replaces its earlier entry in place, as an append would).
 * After the pairs: the event count, then per event its entry and id field.
 * Returns 0 when the session exists (made by another call), else 1, or the
 * outbox view when there is an app delta to apply (always, on the outbox
 * protocol, when this very call made it already).
 */
export const IMPORT = define(
  'import',
  WRITE_KEYS,
  NEW_SESSION_ARGS,
  `${NEW_SESSION}
local foreign = foreign_write({ KEYS.session, 'hash', KEYS.shardIndex, 'zset', KEYS.userIndex, 'zset', KEYS.expiry, 'zset' })
if foreign then return foreign end
if redis.call('EXISTS', KEYS.session) == 1 then
  -- As a create: sent again after its reply was lost, the import finds its own session (and, on the
  -- outbox protocol, hands back the shard's outbox, so that its app delta is applied if it is not yet).
  if redis.call('HGET', KEYS.session, ${F.life}) ~= ARGV.life then
    keep_ack()
    return 0
  end
  return own_view() or 1
end
purge_some()
local next, view = start_session({ ${F.revision}, ARGV.revision, ${F.life}, ARGV.life, ${F.updated}, ARGV.updateTime })
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
redis.call('HSET', KEYS.session, ${F.count}, count)
index_session()
return view or 1
`,
);

/**
 * appendEvent: revision check, event stored or replaced in place, the
 * session and user deltas, the app delta (into the bucket, or the outbox),
 * lastUpdateTime, revision, indexes, expiry; all or nothing.
 * The session hash keeps the event count, so a new event's position is known
 * without asking the log, and HSETNX both tests for the id and records it.
 * After the fixed arguments: the session, user and app pairs.
 * Returns -1 when the session is missing, the stored revision as text (a
 * bulk reply, never confused with the integers) when stale, 0 when stored,
 * or the outbox view when there is an app delta to apply (also when this
 * very append was stored already: 0 on the direct protocol, the outbox view
 * on the other, whose apply may not have run); and, having
 * written nothing, {@link UNREADABLE_HEAD} or {@link UNREADABLE_LOG} when the
 * session hash or the log is not what the scripts write.
 */
export const APPEND = define(
  'append',
  WRITE_KEYS,
  ['expectedRevision', 'updateTime', 'entry', 'eventIdField', 'nSession', 'nUser', 'nApp', ...WRITE_TAIL] as const,
  `${HELPERS}
local meta = redis.pcall('HMGET', KEYS.session, ${F.revision}, ${F.count})
if meta.err then return foreign_key({ KEYS.session, 'hash' }) or meta end
local foreign = foreign_write({ KEYS.events, 'list', KEYS.eventIds, 'hash', KEYS.shardIndex, 'zset', KEYS.userIndex, 'zset' })
if foreign then return foreign end
local revision = meta[1]
if not revision then
  if redis.call('EXISTS', KEYS.session) == 1 then return ${UNREADABLE_HEAD} end
  keep_ack()
  return -1
end
if not string.find(revision, '^%d+$') then return ${UNREADABLE_HEAD} end
-- The event count is the log's length: a count that is not a number is taken from there.
local count = tonumber(meta[2]) or redis.call('LLEN', KEYS.events)
-- The record of the event each of the last appends wrote: the field of a revision (a number), and
-- its value: the revision, a space, and the event's position in the log (short, so that the ids
-- hash of a small session keeps Redis's compact encoding whatever the length of its ids).
local function recent_write(at) return ${F.recentWrite} .. (at % ${RECENT_WRITES}) end
local function record_of(at, position) return string.format('%.0f %.0f', at, position) end
if revision ~= ARGV.expectedRevision then
  -- This append, sent again after its reply was lost (a client that re-sends after reconnecting, a
  -- caller's retry), finds its own write: its event, as sent, still in the log, written by the
  -- write right after the revision it expected (as the record of the last appends says). Where
  -- that write has no record (an earlier version), only when it is the last write: its update
  -- time, at the end of the log or written again in place (the log's mark says which write did that).
  local after = tonumber(ARGV.expectedRevision) + 1
  if tonumber(revision) >= after then
    local record = redis.call('HGET', KEYS.eventIds, recent_write(after))
    local position = tonumber(redis.call('HGET', KEYS.eventIds, ARGV.eventIdField))
    local own = position and (record == record_of(after, position) or (not record and tonumber(revision) == after))
      and redis.call('LINDEX', KEYS.events, position) == ARGV.entry
    if own and not record then
      local last = redis.call('HMGET', KEYS.session, ${F.updated}, ${F.rewritten})
      own = last[1] == ARGV.updateTime
        and (position == redis.call('LLEN', KEYS.events) - 1
          or last[2] == redis.sha1hex(revision .. ' ' .. ARGV.entry))
    end
    if own then
      -- Its app delta, on the outbox protocol, may still wait in the outbox: the caller applies it.
      return own_view() or 0
    end
  end
  keep_ack()
  return revision
end
local new_revision = string.format('%.0f', tonumber(revision) + 1)
local head = { ${F.revision}, new_revision, ${F.updated}, ARGV.updateTime }
local written_at = count
if redis.call('HSETNX', KEYS.eventIds, ARGV.eventIdField, count) == 1 then
  redis.call('RPUSH', KEYS.events, ARGV.entry)
  head[5] = ${F.count}
  head[6] = count + 1
else
  -- A re-appended id: its entry is replaced where it stands (nothing is written before this check).
  local position = tonumber(redis.call('HGET', KEYS.eventIds, ARGV.eventIdField))
  if not position or position < 0 or position >= redis.call('LLEN', KEYS.events) then return ${UNREADABLE_LOG} end
  redis.call('LSET', KEYS.events, position, ARGV.entry)
  written_at = position
  -- Part of the log's mark: new with each write in place, and drawn from what is written, so that
  -- a server that lost writes and reached this revision again by others has another mark.
  head[5] = ${F.rewritten}
  head[6] = redis.sha1hex(new_revision .. ' ' .. ARGV.entry)
end
redis.call('HSET', KEYS.eventIds, recent_write(tonumber(revision) + 1), record_of(tonumber(revision) + 1, written_at))
local next = hset_pairs(KEYS.session, head, ARGV_REST, tonumber(ARGV.nSession))
next = hset_pairs(KEYS.userState, nil, next, tonumber(ARGV.nUser))
local view = app_write(next, tonumber(ARGV.nApp))
redis.call('ZADD', KEYS.shardIndex, ARGV.updateTime, ARGV.appMember)
redis.call('ZADD', KEYS.userIndex, ARGV.updateTime, ARGV.userMember)
local at = expiry_time(tonumber(ARGV.ttlMs), ARGV.clock, KEYS.session, false)
if at then
  expire_session(KEYS.session, KEYS.events, KEYS.eventIds, KEYS.expiry, at, ARGV.expiryMember)
  purge_expired(string.sub(KEYS.shardIndex, 1, -2), KEYS.expiry, KEYS.shardIndex, 100)
elseif count == 0 then
  -- The first event, through a service without a time to live, of a session that has one (made by
  -- a service with a TTL): the log and the id map it creates expire with the session.
  local keep = redis.call('PEXPIRETIME', KEYS.session)
  if keep > 0 then
    redis.call('PEXPIREAT', KEYS.events, keep)
    redis.call('PEXPIREAT', KEYS.eventIds, keep)
  end
end
return view or 0
`,
);

/**
 * getSession: the session hash, the user bucket, the app bucket (direct) or
 * the shard's outbox view from position `from` (outbox), and the filtered
 * tail of the log. The afterTimestamp walk goes back from the tail in growing
 * chunks and stops at the first event whose timestamp is <= afterTimestamp
 * (or at the `limit` bound), so it reads O(events returned) entries. Empty
 * arguments mean none. With `heldEvents` (a reader's copy: that many first
 * events, at `heldRevision`, under the log mark `heldMark`, the last of them
 * `heldLast`, its field in the `eventIds` hash, and its entry `heldEntry`
 * when known), only the later events, or
 * all of them when the log is no longer what the reader holds (another life,
 * an event replaced in place since, a lower revision, fewer events, another
 * event where the copy ends, or the same id there with another entry).
 * Returns 0 when the session is missing, else { head, events }: head is the
 * JSON text of { session, user, app bucket or outbox view, restart (0 | 1) },
 * events the log entries as they are.
 */
export const LOAD = define(
  'load',
  ['session', 'events', 'userState', 'app', 'eventIds'] as const,
  [
    'afterTimestamp',
    'limit',
    'mode',
    'from',
    'heldEvents',
    'heldRevision',
    'heldMark',
    'heldLast',
    'heldEntry',
  ] as const,
  `${NOW}${OUTBOX}${FOREIGN}
local function read_session()
  local session = redis.call('HGETALL', KEYS.session)
  if #session == 0 then return 0 end
  local length = redis.call('LLEN', KEYS.events)
  local floor = 0
  if ARGV.limit ~= '' then floor = math.max(0, length - tonumber(ARGV.limit)) end
  -- A reader that holds the first heldEvents events as of heldRevision, under the log mark
  -- heldMark, gets only the later ones, unless the log is no longer what it holds (restart: the
  -- whole log): another life or an event written again in place (the mark), a lower revision, a
  -- shorter log, or another event where the held copy ends (heldLast, the id's field in the ids
  -- hash, is not at that position: writes the server lost, and others since in their place), or
  -- the same id there with another entry (an id the caller derives, written again after the loss).
  local restart = 0
  if ARGV.heldEvents ~= '' then
    local held = tonumber(ARGV.heldEvents)
    local life, revision, rewritten = '', -1, nil
    for at = 1, #session, 2 do
      local field = session[at]
      -- A revision that is not a number sends the whole log (the client then finds what is wrong).
      if field == ${F.life} then life = session[at + 1]
      elseif field == ${F.revision} then revision = tonumber(session[at + 1]) or -1
      elseif field == ${F.rewritten} then rewritten = session[at + 1] end
    end
    local mark = life
    if rewritten then mark = life .. '/' .. rewritten end
    if mark ~= ARGV.heldMark or revision < tonumber(ARGV.heldRevision) or held > length then
      restart = 1
    elseif held > 0 and ARGV.heldLast ~= '' then
      -- The id map is not needed for the whole log: one of another type (written outside adk-state)
      -- only sends the reader the whole log.
      if tonumber(redis.pcall('HGET', KEYS.eventIds, ARGV.heldLast)) ~= held - 1 then
        restart = 1
      elseif ARGV.heldEntry ~= '' and redis.call('LINDEX', KEYS.events, held - 1) ~= ARGV.heldEntry then
        -- The entry itself, when the reader sent it (a small one): the same id with other content.
        restart = 1
      end
    end
    if restart == 0 then floor = held end
  end
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
        -- An entry without a timestamp (changed outside the store) is sent: the client then says so.
        if (tonumber(string.match(chunk[index], '^[^ ]*')) or math.huge) <= after then
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
  local app
  if ARGV.mode == 'd' then app = redis.call('HGETALL', KEYS.app)
  else app = outbox_view(KEYS.app, outbox_meta(KEYS.app), ARGV.from) end
  return { cjson.encode({ session, redis.call('HGETALL', KEYS.userState), app, restart }), events }
end
-- A key the read needs that holds another type (written outside adk-state) fails it, naming the
-- key; the types are looked at only then, so a read that succeeds pays nothing for it.
local ok, reply = pcall(read_session)
if ok then return reply end
local checks = { KEYS.session, 'hash', KEYS.events, 'list', KEYS.userState, 'hash', KEYS.app, 'hash' }
if ARGV.mode ~= 'd' then checks[#checks + 1] = KEYS.app .. ${I} checks[#checks + 1] = 'zset' end
return foreign_key(checks) or error(reply, 0)
`,
);

/** Removes a shard's sessions whose time to live has passed from its indexes (and their keys, if still there). */
const PURGE_EXPIRED = `${NOW}${PURGE}
`;

/** Members of a sorted set in the listing's order (the Lua function `window`). */

const WINDOW = `
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
 * deleteSession: the session hash, its log and id map, its index entries.
 * The app deltas of its events stay where they are: applied, or in the
 * shard's outbox on their way (they belong to the app, not to the session).
 */
export const DELETE = define(
  'delete',
  ['session', 'events', 'eventIds', 'shardIndex', 'userIndex', 'expiry'] as const,
  ['appMember', 'userMember', 'expiryMember'] as const,
  `${FOREIGN}
local foreign = foreign_key({ KEYS.shardIndex, 'zset', KEYS.userIndex, 'zset', KEYS.expiry, 'zset' })
if foreign then return foreign end
redis.call('DEL', KEYS.session, KEYS.events, KEYS.eventIds)
redis.call('ZREM', KEYS.shardIndex, ARGV.appMember)
redis.call('ZREM', KEYS.userIndex, ARGV.userMember)
redis.call('ZREM', KEYS.expiry, ARGV.expiryMember)
return 1
`,
);

/**
 * A listed session's head or user bucket, or the name of the type its key
 * holds instead of a hash (written outside adk-state): the listing goes on,
 * and the store lists the session with what can be read of it.
 */
const LISTED = `
local function hash_of(key)
  local found = redis.pcall('HGETALL', key)
  if found.err then return redis.call('TYPE', key).ok end
  return found
end
`;

/**
 * listSessions of one user, or of a whole app stored in one slot: a window
 * of `index` ordered by lastUpdateTime, ties by member (the encoded session
 * id, then user id) ascending in both orders, with each session's hash and
 * the user buckets (and the app bucket when `appState` is given).
 * `order` is 'asc' | 'desc', `limit` '' for all, `encodedUser` '' when
 * listing the app. Cost: O(log n + page) per distinct score in the window,
 * never O(all sessions).
 * Returns the JSON text of
 * { total, { member, sessionHash }..., { encodedUser, userHash }..., appHash or 0 },
 * a hash being the name of its key's type when that is not a hash (a
 * session's then followed by its score).
 */
export const LIST = define(
  'list',
  ['index', 'expiry', 'shardIndex', 'appState'] as const,
  ['order', 'offset', 'limit', 'encodedUser'] as const,
  `${PURGE_EXPIRED}${WINDOW}${LISTED}
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
  local head = hash_of(base .. ${P.session} .. ':' .. user .. '\\0' .. session)
  -- A head that is not a hash is listed with its index's lastUpdateTime.
  if type(head) == 'string' then sessions[#sessions + 1] = { member, head, scored[at + 1] }
  else sessions[#sessions + 1] = { member, head } end
  if not seen[user] then
    seen[user] = true
    users[#users + 1] = { user, hash_of(base .. ${P.userState} .. ':' .. user) }
  end
end
local app = 0
if KEYS.appState then app = redis.call('HGETALL', KEYS.appState) end
return cjson.encode({ total, sessions, users, app })
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
  `${PURGE_EXPIRED}${WINDOW}
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
 * Returns { { { member, sessionHash }..., { encodedUser, userHash }... } per shard }, a hash
 * being the name of its key's type when that is not a hash.
 */
export const FETCH = define(
  'fetch',
  [],
  [],
  `${LISTED}
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
    sessions[#sessions + 1] = { member, hash_of(base .. ${P.session} .. ':' .. user .. '\\0' .. session) }
    if not seen[user] then
      seen[user] = true
      users[#users + 1] = { user, hash_of(base .. ${P.userState} .. ':' .. user) }
    end
  end
  at = at + count + 1
  out[#out + 1] = { sessions, users }
end
return out
`,
);

/** One bucket as a flat field/value array. */
export const READ_BUCKET = define(
  'readBucket',
  ['bucket'] as const,
  [],
  `${FOREIGN}
local bucket = redis.pcall('HGETALL', KEYS.bucket)
if bucket.err then return foreign_key({ KEYS.bucket, 'hash' }) or bucket end
return bucket
`,
);

/**
 * How far ahead of the server's clock, in microseconds, a mark can be
 * without having been changed outside the store (a minute): more than the
 * clocks of a cluster's servers disagree. Only says which of the two a
 * lowered mark was (see {@link APPLY}).
 */
export const MARK_AHEAD_US = 60_000_000;

/**
 * The least time, in microseconds, a key's position can be ahead of the app
 * slot's clock and still be taken for when its value was made (see
 * {@link APPLY}): a second, far more than the clocks of a cluster's servers
 * differ, whatever `catchUpAfterMs` is.
 */
export const AHEAD_FLOOR_US = 1_000_000;

/**
 * The app slot's side of the outbox, applying: per shard, the entries above
 * the shard's mark, each delta into the app bucket, then the mark. The
 * entries of every shard are applied in the order they were made (their
 * positions), whichever shard made them: writes of several shards that a
 * drain applies together (their writers died between the steps, or the app
 * slot lost them before the shards were told) end with the one made last.
 * A group whose entries are all at or below the mark changes nothing, so an
 * applier that arrives late, or twice, is harmless. Each group says from
 * which position on it holds every entry (its floor); a group whose floor is
 * above the mark (the app slot lost marks, after a failover) is not applied,
 * and says so, for the applier to read the outbox again from the mark.
 *
 * Beside the bucket, each state key keeps the position of the entry whose
 * value it holds: when that write was made, on its shard's clock. An entry at
 * or below the shard's known position (`known`, what the shard was told the
 * app slot had applied) but above the mark was applied once and lost since by
 * the app slot (a failover to a replica that lagged): it is applied again
 * (caught up) only to the keys whose value was made before it. A key whose
 * value was made after it keeps that value, whichever of the two reached the
 * app slot first: a write made after the failover, a later one the replica
 * kept, or a later one lost too and caught up first. So is a later one that
 * an apply holding a view from before the failover brought back as new (its
 * view did not know the entry applied): the key keeps the entry's position,
 * not the time it landed. A catch-up never lands over a value made after it;
 * on the clock assumption the positions make already (clocks agree to well
 * within a failover's time). An entry made `lateUs` or more before this
 * server's clock is caught up too, known or not: its apply comes late (its
 * writer died between the steps and a drain or a reader applies it, an apply
 * held in the network past a failover, an entry the app slot lost before its
 * shard was told), and a value made since then keeps its key. Only an entry
 * applied sooner than that lands on every key (applied as new), as the second
 * step of a write does: such an entry that the app slot lost within `lateUs`
 * of its making and that comes back after a later write can put its value
 * back over it (see the README). A key's position more than `lateUs` (and
 * at least {@link AHEAD_FLOOR_US}) ahead of this server's clock is none that
 * clocks within the assumption give (a shard whose clock ran ahead, a record
 * changed outside the store): a catch-up lands on that key.
 *
 * A reader that found the mark of shard `lowerShard` above every position
 * the shard gave (the shard lost positions in a failover, or the mark was
 * changed outside the store) has it lowered here, from `lowerFrom` to
 * `lowerTo` (the last position the shard was told is applied) when it still
 * holds `lowerFrom`, with the entries at or below `lowerFrom` caught up in
 * the same script: no other apply comes between, to apply them as new. The
 * mark taken back is recorded (`loweredFrom`, no further than this server's
 * clock) until the mark passes it: an entry the shard made while the mark
 * covered it, after the view the lowering was sent with, is caught up too by
 * whichever apply meets it. Any apply does the same, to the group's known position or floor, with a mark
 * above the group's floor and below its last entry that is none of its
 * entries' positions (the shard's positions passed such a mark before a
 * read found it).
 *
 * `wantBucket` ('1' | '0') asks for the bucket back ('2': only when an
 * entry was caught up here); `lateUs` is the age, in microseconds, past which
 * an entry is caught up; `lowerShard` is '' for
 * no lowering. After the fixed arguments, per shard: its number, its floor,
 * its known position, its entry count, then position, delta, ... in
 * ascending order. A bucket, marks or write-times hash of another type
 * (written outside adk-state) is answered with {@link FOREIGN_TYPE} before
 * anything is written. Returns { { shard, mark, gap (0 | 1; 2 when lowered,
 * 3 when lowered from a mark more than {@link MARK_AHEAD_US} ahead of this
 * server's clock), caught up (unless `wantBucket` is '0': the highest position
 * of the shard's entries ever caught up, '-1' for none), ... }, bucket or 0 }.
 */
export const APPLY = define(
  'apply',
  ['appState', 'marks', 'written'] as const,
  ['wantBucket', 'lateUs', 'lowerShard', 'lowerFrom', 'lowerTo'] as const,
  `${NOW}${MARK}${FOREIGN}
local foreign = foreign_key({ KEYS.appState, 'hash', KEYS.marks, 'hash', KEYS.written, 'hash' })
if foreign then return foreign end
-- Sets the pairs of list (field, value, ...) in hash, 2,000 arguments a command.
local function hset_list(hash, list)
  for from = 1, #list, 2000 do
    redis.call('HSET', hash, unpack(list, from, math.min(#list, from + 1999)))
  end
end
-- This server's clock, read once: an entry made lateUs or more before it comes late (see catch_up
-- below), and a key's position more than lateUs (at least a second) ahead of it is none a clock
-- within the assumption gave (a shard's clock that ran ahead, or a record changed outside the store):
-- a catch-up does not take it for a value made after the entry.
local late_before, ahead_after = nil, nil
local function read_clock()
  local now = now_us()
  local late = tonumber(ARGV.lateUs)
  late_before, ahead_after = now - late, now + math.max(late, ${AHEAD_FLOOR_US})
end
-- An entry's pairs into the bucket, and beside each key the position of the entry that wrote it (the
-- time it was made, on the shard's clock); a lost entry applied again (caught up) only to the keys
-- whose value was made before it.
local function apply_entry(list, position_text, caught_up)
  local made = tonumber(position_text)
  local kept, stamps = list, {}
  if caught_up then kept = {} end
  for first = 1, #list, 2000 do
    local last = math.min(#list, first + 1999)
    local times = nil
    if caught_up then
      if not ahead_after then read_clock() end
      local keys = {}
      for index = first, last, 2 do keys[#keys + 1] = list[index] end
      times = redis.call('HMGET', KEYS.written, unpack(keys))
    end
    for index = first, last, 2 do
      local written = times and position_of(times[(index - first) / 2 + 1])
      if written and written > ahead_after then written = nil end
      if not written or written < made then
        if caught_up then
          kept[#kept + 1] = list[index]
          kept[#kept + 1] = list[index + 1]
        end
        stamps[#stamps + 1] = list[index]
        stamps[#stamps + 1] = position_text
      end
    end
  end
  hset_list(KEYS.written, stamps)
  hset_list(KEYS.appState, kept)
end
-- An entry is caught up when the shard was told it was applied (known, see above), or when it was
-- made lateUs or more before this server's clock (its apply comes late: a writer that died between
-- the steps, an apply held past a failover, one the app slot lost before its shard was told).
local function catch_up(position, known)
  if position <= known then return true end
  if not late_before then read_clock() end
  return position < late_before
end
-- The mark, caught-up position and record of a group once its entries are applied, and its part of
-- the reply: shard, mark, gap, caught up (see above).
local marks = {}
local any_caught = false
local function finish(shard, mark, gap, moved, caught, done, recorded, lowered_field)
  local caught_field = ${F.caughtUp} .. shard
  if gap ~= 1 then
    if moved then redis.call('HSET', KEYS.marks, shard, mark) end
    if caught then redis.call('HSET', KEYS.marks, caught_field, caught) end
    if recorded and done >= recorded then redis.call('HDEL', KEYS.marks, lowered_field) end
  end
  marks[#marks + 1] = shard
  marks[#marks + 1] = mark
  marks[#marks + 1] = gap
  if caught then any_caught = true end
  -- For a reader (who may ask for the bucket): how far this shard's entries were ever caught up.
  local caught_up = '-1'
  if ARGV.wantBucket ~= '0' then
    caught_up = redis.call('HGET', KEYS.marks, caught_field)
    if not position_of(caught_up) then caught_up = '-1' end
  end
  marks[#marks + 1] = caught_up
end
-- One group (a write's, a read's) is applied and finished as it is read: its entries are in order.
-- Several (a drain's) are finished after the entries of all of them were applied in the order they
-- were made (their positions), whichever shard made them.
local single = ARGV_REST + 4 + 2 * (tonumber(ARGV[ARGV_REST + 3]) or 0) > #ARGV
local groups, pending_at, pending_caught, pending_position
if not single then groups, pending_at, pending_caught, pending_position = {}, {}, {}, {} end
local at = ARGV_REST
while at <= #ARGV do
  local shard = ARGV[at]
  local floor = tonumber(ARGV[at + 1])
  local known = tonumber(ARGV[at + 2])
  local count = tonumber(ARGV[at + 3])
  local lowered_field = ${F.loweredFrom} .. shard
  local got = redis.call('HMGET', KEYS.marks, shard, lowered_field)
  local mark = got[1] or '-1'
  local done = position_of(mark)
  -- What an earlier lowering took back (see below), while the mark is below it.
  local recorded = position_of(got[2])
  -- A mark that is not a position (changed outside the store) counts as none.
  if not done then mark, done = '-1', -1 end
  local gap = 0
  local lowered = false
  local to = nil
  if shard == ARGV.lowerShard and done == tonumber(ARGV.lowerFrom) then
    lowered, to = true, tonumber(ARGV.lowerTo)
  elseif done > floor then
    -- A mark above the group's floor and below its last entry that is none of its entries'
    -- positions is none the shard gave (it lost positions in a failover, or the mark was changed
    -- outside the store): the entries it passed were taken for applied. It is lowered here as a
    -- reader lowers it (see above).
    local highest, found = -1, false
    for entry = at + 4, at + 2 + 2 * count, 2 do
      local position = position_of(ARGV[entry])
      if position then
        if position == done then found = true end
        if position > highest then highest = position end
      end
    end
    if done < highest and not found then lowered, to = true, math.max(known, floor) end
  end
  -- Only ever down: a mark a repair raised to a floor an earlier version wrote (a time, none of
  -- the shard's positions) is passed by the group's positions too, and one raised above it would
  -- skip entries.
  if lowered and to >= done then lowered = false end
  if lowered then
    gap = 2
    if done > now_us() + ${MARK_AHEAD_US} then gap = 3 end
    -- The entries at or below the mark it had are caught up: it may have covered them, or not.
    if done > known then known = done end
    -- And so are those this script does not see (made after the view it was sent with, while the
    -- mark covered them: taken for applied), whoever applies them later. None made after this
    -- lowering was covered: the record ends at this server's clock, which the shard's positions
    -- follow (an entry made after it is applied as new; on clocks that differ, see the README).
    local bound = math.min(done, now_us())
    if not recorded or bound > recorded then
      recorded = bound
      redis.call('HSET', KEYS.marks, lowered_field, string.format('%.0f', bound))
    end
    mark, done = string.format('%.0f', to), to
  end
  if recorded and recorded > known then known = recorded end
  local moved, caught = lowered, nil
  if floor > done then
    gap = 1
  else
    for entry = at + 4, at + 2 + 2 * count, 2 do
      -- An entry at what is not a position (see MARK) is passed over: it never becomes the mark.
      local position = position_of(ARGV[entry])
      if position and position > done then
        local caught_up = catch_up(position, known)
        if single then
          apply_entry(cjson.decode(ARGV[entry + 1]), ARGV[entry], caught_up)
        else
          pending_at[#pending_at + 1] = entry
          pending_caught[#pending_at] = caught_up
          pending_position[#pending_at] = position
        end
        if caught_up then caught = ARGV[entry] end
        done = position
        mark = ARGV[entry]
        moved = true
      end
    end
  end
  if single then
    finish(shard, mark, gap, moved, caught, done, recorded, lowered_field)
  else
    groups[#groups + 1] = { shard, mark, gap, moved, caught, done, recorded, lowered_field }
  end
  at = at + 4 + 2 * count
end
if not single then
  local order = {}
  for index = 1, #pending_at do order[index] = index end
  table.sort(order, function(first, second)
    if pending_position[first] ~= pending_position[second] then
      return pending_position[first] < pending_position[second]
    end
    return first < second
  end)
  for _, index in ipairs(order) do
    local entry = pending_at[index]
    apply_entry(cjson.decode(ARGV[entry + 1]), ARGV[entry], pending_caught[index])
  end
  for _, group in ipairs(groups) do finish(unpack(group, 1, 8)) end
end
local bucket = 0
if ARGV.wantBucket == '1' or (ARGV.wantBucket == '2' and any_caught) then
  bucket = redis.call('HGETALL', KEYS.appState)
end
return { marks, bucket }
`,
);

/**
 * Reads the app bucket and one shard's mark ('' for no shard, '-1' when the
 * shard has none yet). When the last drain of the app's outboxes began at
 * least `drainMs` ago by the server's clock, the read claims the next one
 * (its write is allowed to fail: a read must not). Returns { bucket, mark,
 * claimed (0 | 1), marks, lowered }: `lowered` is what a lowering of the
 * shard's mark took back (see `APPLY`; '-1' for none); `marks` is every
 * shard's mark that is a position (shard, mark, ...) when the read claimed a
 * drain or `allMarks` is '1', else 0: the drain has in it marks read before
 * the shards (see `Outbox.drain`).
 */
export const READ_APP = define(
  'readApp',
  ['appState', 'marks'] as const,
  ['shard', 'drainMs', 'allMarks'] as const,
  `${NOW}${MARK}${FOREIGN}
-- A marks hash of another type (written outside adk-state) fails the read, naming it: without the
-- marks a reader cannot tell which of the outboxes' entries the bucket holds already.
local function marks_field(field)
  local found = redis.pcall('HGET', KEYS.marks, field)
  if type(found) == 'table' then return nil, foreign_key({ KEYS.marks, 'hash' }) or found end
  return found
end
local mark, lowered = '', '-1'
if ARGV.shard ~= '' then
  local found = redis.pcall('HMGET', KEYS.marks, ARGV.shard, ${F.loweredFrom} .. ARGV.shard)
  if found.err then return foreign_key({ KEYS.marks, 'hash' }) or found end
  mark = found[1]
  -- None yet, or not a position (changed outside the store): none, as when applying.
  if not position_of(mark) then mark = '-1' end
  if position_of(found[2]) then lowered = found[2] end
end
local claimed = 0
if ARGV.drainMs ~= '' then
  local now = now_ms()
  local drained, failed = marks_field(${F.drained})
  if failed then return failed end
  local last = tonumber(drained) or 0
  if now - last >= tonumber(ARGV.drainMs) then
    local ok = redis.pcall('HSET', KEYS.marks, ${F.drained}, string.format('%.0f', now))
    if type(ok) == 'number' then claimed = 1 end
  end
end
local bucket = redis.pcall('HGETALL', KEYS.appState)
if bucket.err then return foreign_key({ KEYS.appState, 'hash' }) or bucket end
local all = 0
if claimed == 1 or ARGV.allMarks == '1' then
  local hash = redis.pcall('HGETALL', KEYS.marks)
  if hash.err then return foreign_key({ KEYS.marks, 'hash' }) or hash end
  all = {}
  for index = 1, #hash, 2 do
    -- A shard's field (digits), with a mark that is a position (see MARK): others count as none.
    if string.match(hash[index], '^%d+$') and position_of(hash[index + 1]) then
      all[#all + 1] = hash[index]
      all[#all + 1] = hash[index + 1]
    end
  end
end
return { bucket, mark, claimed, all, lowered }
`,
);

/**
 * One shard's outbox for a drain or an applier: records the acknowledgement
 * `ack` ('' for none), removes what is known applied and old enough, and
 * returns the view from the highest known-applied position, or from `from`
 * when lower: { last, floor, entries }. It also removes up to 32 of the
 * shard's expired sessions from its indexes.
 */
export const PEEK = define(
  'peek',
  ['outbox', 'shardIndex', 'expiry'] as const,
  ['ack', 'from', 'keepUs'] as const,
  `${NOW}${OUTBOX}${PURGE}
purge_expired(string.sub(KEYS.shardIndex, 1, -2), KEYS.expiry, KEYS.shardIndex, 32)
return outbox_view(KEYS.outbox, outbox_ack(KEYS.outbox, ARGV.ack, ARGV.keepUs), ARGV.from)
`,
);

/** Raises a position field to `value` when it is lower, missing or not a position (a repair); returns the field's value after. */
export const RAISE = define(
  'raise',
  ['hash'] as const,
  ['field', 'value'] as const,
  `${NOW}${MARK}
local text = redis.call('HGET', KEYS.hash, ARGV.field)
-- A value that is not a position as the scripts write it (changed outside the store) counts as none.
local current = position_of(text)
if current and current >= tonumber(ARGV.value) then return text end
redis.call('HSET', KEYS.hash, ARGV.field, ARGV.value)
return ARGV.value
`,
);

/**
 * The layout of a key prefix: returns what is recorded; when nothing is,
 * records `shards` (a write, `record` set) or returns '' (a read).
 */
export const LAYOUT = define(
  'layout',
  ['layout'] as const,
  ['shards', 'record'] as const,
  `
local recorded = redis.call('HGET', KEYS.layout, ${F.shards})
if recorded then return recorded end
-- A read records nothing: '' (no layout yet), and the first write records it.
if ARGV.record == '' then return '' end
redis.call('HSET', KEYS.layout, ${F.shards}, ARGV.shards)
return ARGV.shards
`,
);

/** Sends one command and resolves with its reply (see `connection.ts`). */
export type Send = (command: string, args: Array<string | number>) => Promise<unknown>;

/**
 * Runs `script` on the node that owns `keys[0]`: one round trip, two when the
 * server lacks the script. A write's {@link FOREIGN_TYPE} answer (nothing
 * written) becomes an {@link UnreadableDataError} naming the key.
 */
export async function runScript(
  send: Send,
  target: Script,
  keys: readonly string[],
  args: ReadonlyArray<string | number>,
): Promise<unknown> {
  try {
    return await send('evalsha', [target.sha, keys.length, ...keys, ...args]);
  } catch (error) {
    if (!isNoScript(error)) throw foreignType(error) ?? error;
    try {
      return await send('eval', [target.source, keys.length, ...keys, ...args]);
    } catch (error) {
      throw foreignType(error) ?? error;
    }
  }
}

/** The {@link FOREIGN_TYPE} answer as an {@link UnreadableDataError}, or undefined for any other error. */
function foreignType(error: unknown): UnreadableDataError | undefined {
  if (!(error instanceof Error) || !error.message.startsWith(`${FOREIGN_TYPE} `)) return undefined;
  const [, expected, found, key] = /^\S+ (\S+) (\S+) (\S+)/.exec(error.message) ?? [];
  if (key === undefined) return undefined;
  const name = key.replace(/\\x([0-9a-f]{2})/g, (_escape, hex: string) =>
    String.fromCharCode(Number.parseInt(hex, 16)),
  );
  return new UnreadableDataError(foreignKeyMessage(name, found as string, expected as string));
}

/** How an error names a key that holds another type than the scripts keep there. */
export function foreignKeyMessage(key: string, found: string, expected: string): string {
  return `the key ${JSON.stringify(key)} holds a ${found} where adk-state keeps a ${expected} (written outside adk-state)`;
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}
