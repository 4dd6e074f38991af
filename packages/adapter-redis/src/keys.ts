/**
 * Key layout and the encodings that make it collision-free and cluster-safe.
 *
 * The keys of one user (user bucket, sessions, events, index entries) start
 * with `<prefix>{<app tag>#<k>}:`, k the user's shard, so one script can
 * touch them atomically while the users of one app spread over many slots;
 * the app bucket has its own tag, `<prefix>{<app tag>}:`. With one shard,
 * every key of the app is in that one slot. The app tag is the app name with
 * `%`, `{`, `}` and `#` percent-escaped, so no id can move a key to another
 * slot; the prefix may not contain braces at all.
 *
 * Ids and state keys after the tag use {@link encodeText}: an injective,
 * well-formed (UTF-8 safe) encoding that never yields U+0000, so U+0000 can
 * separate the parts of a composite key, and whose byte order is the UTF-16
 * code unit order of JavaScript strings, so Redis's lexical tie order in a
 * sorted set is exactly the order of `compareSessions`.
 */
import { InvalidArgumentError } from '@adk-state/core';

/** Joins the parts of a composite key or index member (never produced by {@link encodeText}). */
export const SEPARATOR = '\u0000';

/**
 * The last part of every key of the layout, after its base
 * (`<prefix>{<tag>}:` or `<prefix>{<tag>#<k>}:`), and the parts that follow
 * it. The scripts build keys from a shard's base with the same letters
 * (written into their Lua from here).
 */
export const PART = {
  /** Hash: a session's head fields ({@link FIELD}) and its state. `s:<user>\0<session>` */
  session: 's',
  /** List: a session's event log. `e:<user>\0<session>` */
  events: 'e',
  /**
   * Hash: event id to its position in the log, and the record of which
   * event the last appends wrote ({@link FIELD.recentWrite}). `i:<user>\0<session>`
   */
  eventIds: 'i',
  /** Hash: the user bucket. `u:<user>` */
  userState: 'u',
  /** Sorted set: a user's sessions by lastUpdateTime. `m:<user>` */
  userIndex: 'm',
  /** Sorted set: a shard's sessions by lastUpdateTime. `l` */
  shardIndex: 'l',
  /** Sorted set: a shard's sessions with a time to live, by expiry time. `x` */
  expiry: 'x',
  /** Hash: a shard's outbox of `app:` deltas on their way to the app slot (cluster protocol). `o`; its positions: `oi` */
  outbox: 'o',
  /** Hash (app slot): the app bucket. `a` */
  appState: 'a',
  /** Hash (app slot): per shard, the outbox position applied up to; the last drain time. `w` */
  marks: 'w',
  /** Hash (app slot): per state key of the app bucket, the position of the outbox entry whose value it holds (µs). `k` */
  written: 'k',
} as const;

/** The outbox's sorted set of positions is the outbox's key with this suffix (same slot). */
export const OUTBOX_INDEX_SUFFIX = 'i';

/**
 * Fields that are not state. Every one starts with U+0000, and encoded state
 * keys never do.
 */
export const FIELD = {
  /** Session hash: the revision. */
  revision: '\u0000r',
  /** Session hash: lastUpdateTime (ms). */
  updated: '\u0000t',
  /** Session hash: the number of events in the log. */
  count: '\u0000n',
  /** Session hash: a token new with each create or import of the key (the first part of its `logMark`). */
  life: '\u0000g',
  /**
   * Session hash: a mark of the last write that replaced an event in place
   * (the SHA-1 of its revision and entry; the revision itself, as written by
   * earlier versions), the second part of the `logMark`.
   */
  rewritten: '\u0000w',
  /**
   * Event ids hash: the prefix of the fields that record the last
   * {@link RECENT_WRITES} appends, one field per revision modulo that number
   * (this prefix, then the remainder in decimal), each holding the revision, a
   * space and the position in the log of the event that append wrote. Writes
   * of a create or an import, and of earlier versions, have none.
   */
  recentWrite: '\u0000',
  /** Outbox: the last position given to an entry (microseconds of the shard's clock, or one more than the last). */
  last: '\u0000q',
  /** Outbox: the highest position known applied to the app slot. */
  known: '\u0000s',
  /** Outbox: every entry at or below this position has been removed (the highest removed). */
  floor: '\u0000f',
  /** Marks (app slot): the server time (ms) the last drain of the app's outboxes began. */
  drained: '\u0000d',
  /**
   * Marks (app slot): this prefix, then a shard's number: the highest
   * position of that shard's entries applied again after the app slot had
   * lost them (a catch-up).
   */
  caughtUp: '\u0000c',
  /**
   * Marks (app slot): this prefix, then a shard's number: the mark a
   * lowering took back (at most the app slot's clock then). The shard's
   * entries at or below it that are above the mark may have been taken for
   * applied, and are caught up, not applied as new. Removed once the mark
   * passes it.
   */
  loweredFrom: '\u0000l',
  /** Layout record: the number of shards. */
  shards: 'shards',
} as const;

/** How many of a session's last appends the event ids hash records ({@link FIELD.recentWrite}). */
export const RECENT_WRITES = 16;

export const REVISION_FIELD = FIELD.revision;
export const UPDATED_FIELD = FIELD.updated;

/** `text` as a Lua string literal (U+0000 as a decimal escape), for writing layout names into scripts. */
export function luaString(text: string): string {
  let out = "'";
  for (const char of text) {
    if (char === '\u0000') out += '\\000';
    else if (char === "'" || char === '\\') out += `\\${char}`;
    else out += char;
  }
  return `${out}'`;
}

/** The key that records the layout (`shards`) of every app under `prefix`: brace-free, so no app key can equal it. */
export function layoutKey(prefix: string): string {
  return `${prefix}layout`;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 and U+0001 are code units the encoding escapes.
const NEEDS_ENCODING = /[\u0000\u0001\uD800-\uFFFF]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0001 starts an escape in encoded text.
const NEEDS_DECODING = /[\u0001\uD800-\uFFFF]/;

/**
 * Encodes a JavaScript string so that (a) distinct strings stay distinct after
 * UTF-8 conversion (lone surrogates included), (b) the result holds no U+0000,
 * and (c) comparing results byte by byte (as Redis does) orders them like
 * comparing the originals by UTF-16 code units (as JavaScript does).
 *
 * Per code unit c: U+0000 and U+0001 become U+0001 U+0001 and U+0001 U+0002;
 * U+0002..U+D7FF stay as they are; U+D800..U+FFFF (surrogates and the code
 * units above them) become the code point c + 0x800 (U+E000..U+107FF).
 * Strings made only of U+0002..U+D7FF (almost every real id) are unchanged.
 * Apart from the two escapes (Redis keys hold no U+0000 here), this is core's
 * `utf16OrderKey` (`@adk-state/core/store`), the order key every store uses.
 */
export function encodeText(text: string): string {
  if (!NEEDS_ENCODING.test(text)) return text;
  let out = '';
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    if (unit === 0) out += '\u0001\u0001';
    else if (unit === 1) out += '\u0001\u0002';
    else if (unit < 0xd800) out += text[index];
    else out += String.fromCodePoint(unit + 0x800);
  }
  return out;
}

/** The inverse of {@link encodeText}. */
export function decodeText(encoded: string): string {
  if (!NEEDS_DECODING.test(encoded)) return encoded;
  let out = '';
  let escaped = false;
  for (const char of encoded) {
    const point = char.codePointAt(0) as number;
    if (escaped) {
      out += point === 1 ? '\u0000' : '\u0001';
      escaped = false;
    } else if (point === 1) escaped = true;
    else if (point < 0xd800) out += char;
    else out += String.fromCharCode(point - 0x800);
  }
  return out;
}

const TAG_ESCAPES = /[%{}#]/g;

/**
 * The hash tag of an app: its encoded name with `%`, `{`, `}` and `#`
 * percent-escaped, so `#` only ever separates the app from a shard number.
 */
export function appTag(appName: string): string {
  const encoded = encodeText(appName);
  TAG_ESCAPES.lastIndex = 0;
  if (!TAG_ESCAPES.test(encoded)) return encoded;
  return encoded.replace(TAG_ESCAPES, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * How many hash slots the users of one app are spread over on a `Cluster`
 * client when `shards` is not given. With 256, one app's users land on a
 * three-master cluster within a few percent of a third each (the shards'
 * slots are spread as 256 random draws; see the README). A single-server
 * client keeps an app in one slot (`shards: 1`) unless told otherwise.
 */
export const DEFAULT_SHARDS = 256;

/** The `shards` of a service not given one: {@link DEFAULT_SHARDS} on a cluster, 1 on one server. */
export function defaultShards(isCluster: boolean): number {
  return isCluster ? DEFAULT_SHARDS : 1;
}

/**
 * The shard of a user: FNV-1a (32 bits) over the UTF-16 code units of the
 * user id, modulo `shards`. Part of the key layout: changing it (or
 * `shards`) moves users to other keys.
 */
export function shardOf(userId: string, shards: number): number {
  if (shards === 1) return 0;
  let hash = 0x811c9dc5;
  for (let index = 0; index < userId.length; index++) {
    hash ^= userId.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % shards;
}

/** Checks a key prefix: braces would let the prefix pick the hash slot or break the app's tag. */
export function assertKeyPrefix(prefix: unknown, argument = 'keyPrefix'): asserts prefix is string {
  if (typeof prefix !== 'string') throw new InvalidArgumentError(argument, 'must be a string');
  if (/[{}]/.test(prefix)) {
    throw new InvalidArgumentError(
      argument,
      `must not contain '{' or '}' (the app name is the hash tag of every key), got ${JSON.stringify(prefix)}`,
    );
  }
}

/** The keys of an app's own slot, `<prefix>{<tag>}:`. */
export interface AppKeys {
  /** `<prefix>{<tag>}:` */
  base: string;
  /** Hash: the app bucket. */
  appState: string;
  /** Hash: per shard, the outbox position applied up to (cluster protocol). */
  marks: string;
  /** Hash: per state key, the position of the outbox entry whose value it holds (µs; cluster protocol). */
  written: string;
}

/** The keys of one shard of an app, `<prefix>{<tag>#<k>}:` (`<prefix>{<tag>}:` with one shard). */
export interface ShardKeys {
  base: string;
  /** The shard's number, 0 to shards - 1. */
  shard: number;
  /** Sorted set of the shard's sessions: member `session \0 user`, score lastUpdateTime. */
  shardIndex: string;
  /** Sorted set of the shard's sessions with a time to live: member `user \0 session`, score expiry (ms). */
  expiry: string;
  /** Hash: the shard's outbox of app deltas (cluster protocol). */
  outbox: string;
}

/** The keys of one user of an app (all in the user's shard). */
export interface UserKeys extends ShardKeys {
  app: AppKeys;
  /** True when the user's shard is the app's own slot (`shards: 1`). */
  sameSlot: boolean;
  encodedUser: string;
  /** Hash: the user bucket. */
  userState: string;
  /** Sorted set of the user's sessions: member `session`, score lastUpdateTime. */
  userIndex: string;
}

/** The keys of one session (all in the user's shard). */
export interface SessionKeys extends UserKeys {
  /** Hash: revision, life token, lastUpdateTime, event count, last in-place replacement and the session bucket. */
  session: string;
  /** List: the event log, one entry per event (see `encodeEntry`). */
  events: string;
  /** Hash: event id to its position in the log. */
  eventIds: string;
  /** `user \0 session`: the expiry member. */
  pair: string;
  appMember: string;
  userMember: string;
  expiryMember: string;
}

export function appKeys(prefix: string, appName: string): AppKeys {
  const base = `${prefix}{${appTag(appName)}}:`;
  return { base, appState: base + PART.appState, marks: base + PART.marks, written: base + PART.written };
}

/** The keys of shard `shard` of `shards`. */
export function shardKeys(prefix: string, appName: string, shard: number, shards: number): ShardKeys {
  const tag = appTag(appName);
  const base = shards === 1 ? `${prefix}{${tag}}:` : `${prefix}{${tag}#${shard}}:`;
  return { base, shard, shardIndex: base + PART.shardIndex, expiry: base + PART.expiry, outbox: base + PART.outbox };
}

export function userKeys(prefix: string, appName: string, userId: string, shards = 1): UserKeys {
  const encodedUser = encodeText(userId);
  const shard = shardKeys(prefix, appName, shardOf(userId, shards), shards);
  const { base } = shard;
  return {
    ...shard,
    app: appKeys(prefix, appName),
    sameSlot: shards === 1,
    encodedUser,
    userState: `${base}${PART.userState}:${encodedUser}`,
    userIndex: `${base}${PART.userIndex}:${encodedUser}`,
  };
}

export function sessionKeys(
  prefix: string,
  appName: string,
  userId: string,
  sessionId: string,
  shards = 1,
): SessionKeys {
  const user = userKeys(prefix, appName, userId, shards);
  const { encodedUser, base } = user;
  const encodedSession = encodeText(sessionId);
  const pair = encodedUser + SEPARATOR + encodedSession;
  return {
    ...user,
    session: `${base}${PART.session}:${pair}`,
    events: `${base}${PART.events}:${pair}`,
    eventIds: `${base}${PART.eventIds}:${pair}`,
    pair,
    appMember: encodedSession + SEPARATOR + encodedUser,
    userMember: encodedSession,
    expiryMember: pair,
  };
}
