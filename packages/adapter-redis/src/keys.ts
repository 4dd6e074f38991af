/**
 * Key layout and the encodings that make it collision-free and cluster-safe.
 *
 * Every key of one app starts with `<prefix>{<app tag>}:`, so Redis Cluster
 * puts all of an app's keys (sessions, events, user and app buckets, indexes)
 * in one hash slot, and one script can touch them atomically. The app tag is
 * the app name with `%`, `{` and `}` percent-escaped, so no id can move a key
 * to another slot; the prefix may not contain braces at all.
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
 * Session hash fields that hold metadata: the revision, the lastUpdateTime
 * and (written by the scripts only) `\0n`, the event count. State fields are
 * encoded, so they never start with U+0000.
 */
export const REVISION_FIELD = '\u0000r';
export const UPDATED_FIELD = '\u0000t';

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

const TAG_ESCAPES = /[%{}]/g;

/** The hash tag of an app: its encoded name with `%`, `{`, `}` percent-escaped. */
export function appTag(appName: string): string {
  const encoded = encodeText(appName);
  TAG_ESCAPES.lastIndex = 0;
  if (!TAG_ESCAPES.test(encoded)) return encoded;
  return encoded.replace(TAG_ESCAPES, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
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

/** All the keys of one app. */
export interface AppKeys {
  /** `<prefix>{<tag>}:`, the start of every key of the app. */
  base: string;
  /** Hash: the app bucket. */
  appState: string;
  /** Sorted set of every session of the app: member `session \0 user`, score lastUpdateTime. */
  appIndex: string;
  /** Sorted set of sessions with a time to live: member `user \0 session`, score expiry (ms). */
  expiry: string;
}

/** The keys of one user of an app. */
export interface UserKeys extends AppKeys {
  encodedUser: string;
  /** Hash: the user bucket. */
  userState: string;
  /** Sorted set of the user's sessions: member `session`, score lastUpdateTime. */
  userIndex: string;
}

/** The keys of one session. */
export interface SessionKeys extends UserKeys {
  /** Hash: revision, lastUpdateTime and the session bucket. */
  session: string;
  /** List: the event log, one entry per event (see `encodeEntry`). */
  events: string;
  /** Hash: event id to its position in the log. */
  eventIds: string;
  appMember: string;
  userMember: string;
  expiryMember: string;
}

/** `<prefix>{<tag>}:`, the start of every key of the app. */
export function appBase(prefix: string, appName: string): string {
  return `${prefix}{${appTag(appName)}}:`;
}

export function appKeys(prefix: string, appName: string, base = appBase(prefix, appName)): AppKeys {
  return { base, appState: `${base}a`, appIndex: `${base}l`, expiry: `${base}x` };
}

export function userKeys(prefix: string, appName: string, userId: string, base = appBase(prefix, appName)): UserKeys {
  const encodedUser = encodeText(userId);
  return {
    ...appKeys(prefix, appName, base),
    encodedUser,
    userState: `${base}u:${encodedUser}`,
    userIndex: `${base}m:${encodedUser}`,
  };
}

export function sessionKeys(
  prefix: string,
  appName: string,
  userId: string,
  sessionId: string,
  base = appBase(prefix, appName),
): SessionKeys {
  const user = userKeys(prefix, appName, userId, base);
  const { encodedUser } = user;
  const encodedSession = encodeText(sessionId);
  const pair = encodedUser + SEPARATOR + encodedSession;
  return {
    ...user,
    session: `${base}s:${pair}`,
    events: `${base}e:${pair}`,
    eventIds: `${base}i:${pair}`,
    appMember: encodedSession + SEPARATOR + encodedUser,
    userMember: encodedSession,
    expiryMember: pair,
  };
}
