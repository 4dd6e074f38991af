/**
 * Scope rules: a state key's prefix decides its bucket. `app:` keys belong to
 * the app, `user:` keys to the user, `temp:` keys to the current invocation
 * only, and every other key to the session.
 */
import type { Event } from '@google/adk';
import { AdkStateError, InvalidArgumentError, StateValueError } from './errors.js';
import { decodeEntries, decodeValue, defineEntry, encodeStateValue } from './values.js';

export const APP_PREFIX = 'app:';
export const USER_PREFIX = 'user:';
export const TEMP_PREFIX = 'temp:';

/** One scope's stored entries: un-prefixed key to the value's JSON text. */
export type Bucket = Map<string, string>;

/** A state map or delta split into its scopes, values validated and encoded. */
export interface ScopedWrites {
  session: Bucket;
  user: Bucket;
  app: Bucket;
  /** `temp:` entries, with their prefix, as given (never stored). */
  temp: Map<string, unknown>;
}

/** Which scope a state key belongs to. */
export function scopeOf(key: string): 'app' | 'user' | 'temp' | 'session' {
  if (key.startsWith(APP_PREFIX)) return 'app';
  if (key.startsWith(USER_PREFIX)) return 'user';
  if (key.startsWith(TEMP_PREFIX)) return 'temp';
  return 'session';
}

/**
 * Splits a state map (initial state or an event's delta) into its scopes.
 * Every value that would be stored is validated first, so a rejected value
 * means nothing is written.
 */
export function splitState(state: Record<string, unknown> | undefined): ScopedWrites {
  const writes: ScopedWrites = { session: new Map(), user: new Map(), app: new Map(), temp: new Map() };
  if (state === undefined || state === null) return writes;
  let key: string | undefined;
  try {
    for (key of Object.keys(state)) {
      // By its descriptor: a getter would give the store one value and the caller's state another.
      const entry = Object.getOwnPropertyDescriptor(state, key);
      if (entry === undefined) continue;
      if (entry.get !== undefined || entry.set !== undefined) {
        throw new StateValueError(key, '$', 'is an accessor property (a getter or setter), not a value');
      }
      const value = entry.value;
      const scope = scopeOf(key);
      if (scope === 'temp') {
        writes.temp.set(key, value);
        continue;
      }
      const [bucket, bucketKey] = storedPlace(writes, scope, key);
      bucket.set(bucketKey, encodeStateValue(key, value));
    }
  } catch (error) {
    if (error instanceof AdkStateError) throw error;
    // A Proxy whose traps throw, a value too large for a string: refused as the value it happened in.
    const reason = error instanceof Error ? error.message : String(error);
    if (key === undefined) throw new InvalidArgumentError('state', `cannot be read (${reason})`);
    throw new StateValueError(key, '$', `cannot be read or encoded (${reason})`);
  }
  return writes;
}

/** Takes the write of one (prefixed, not `temp:`) state key out of `writes`. */
export function dropWrite(writes: ScopedWrites, key: string): void {
  const scope = scopeOf(key);
  if (scope === 'temp') return;
  const [bucket, bucketKey] = storedPlace(writes, scope, key);
  bucket.delete(bucketKey);
}

function storedPlace(writes: ScopedWrites, scope: 'app' | 'user' | 'session', key: string): [Bucket, string] {
  if (scope === 'app') return [writes.app, key.slice(APP_PREFIX.length)];
  if (scope === 'user') return [writes.user, key.slice(USER_PREFIX.length)];
  return [writes.session, key];
}

/** Decodes one bucket into a fresh plain object of un-prefixed keys. */
export function bucketToObject(bucket: Bucket | undefined): Record<string, unknown> {
  if (!bucket) return {};
  return decodeEntries([...bucket.keys()], [...bucket.values()]) ?? decodeOneByOne(bucket, undefined, undefined);
}

/**
 * The flat state a caller sees: the session bucket, then `app:` + key for each
 * app entry, then `user:` + key for each user entry. Every value is a fresh copy.
 */
export function combineState(
  session: Bucket,
  user: Bucket | undefined,
  app: Bucket | undefined,
): Record<string, unknown> {
  const keys: string[] = [];
  const texts: string[] = [];
  for (const [key, text] of session) {
    keys.push(key);
    texts.push(text);
  }
  if (app) {
    for (const [key, text] of app) {
      keys.push(APP_PREFIX + key);
      texts.push(text);
    }
  }
  if (user) {
    for (const [key, text] of user) {
      keys.push(USER_PREFIX + key);
      texts.push(text);
    }
  }
  return decodeEntries(keys, texts) ?? decodeOneByOne(session, user, app);
}

/** {@link combineState} value by value: a bad stored text fails alone, and a later key wins. */
function decodeOneByOne(session: Bucket, user: Bucket | undefined, app: Bucket | undefined): Record<string, unknown> {
  const state: Record<string, unknown> = {};
  for (const [key, text] of session) defineEntry(state, key, decodeValue(text));
  if (app) for (const [key, text] of app) defineEntry(state, APP_PREFIX + key, decodeValue(text));
  if (user) for (const [key, text] of user) defineEntry(state, USER_PREFIX + key, decodeValue(text));
  return state;
}

/** Applies `delta` on top of `bucket` in place (top-level replace, no deep merge). */
export function mergeInto(bucket: Bucket, delta: Bucket): Bucket {
  for (const [key, text] of delta) bucket.set(key, text);
  return bucket;
}

/**
 * `event`, or a copy of it whose delta leaves out its `temp:` keys (the
 * caller's event is left as it is): the event as an append or an import stores it.
 */
export function withoutTemp(event: Event): Event {
  const delta: unknown = event.actions?.stateDelta;
  if (typeof delta !== 'object' || delta === null) return event;
  const keys = Object.keys(delta);
  if (!keys.some((key) => scopeOf(key) === 'temp')) return event;
  const kept: Record<string, unknown> = {};
  for (const key of keys) {
    if (scopeOf(key) !== 'temp') defineEntry(kept, key, (delta as Record<string, unknown>)[key]);
  }
  return { ...event, actions: { ...event.actions, stateDelta: kept } } as Event;
}
