/**
 * Where everything lives under the root collection, and how a state bucket
 * becomes a map field and back:
 *
 * ```
 * <root>/{app}                               app document: app state
 * <root>/{app}/adk_users/{user}              user document: user state
 * <root>/{app}/adk_sessions/{user.session}   session document: head and session state
 * <root>/{app}/adk_sessions/{...}/adk_events/{event}   one document per event
 * ```
 *
 * Every `{...}` is an encoded id ({@link documentId}); every document also
 * keeps the original strings in fields, as {@link storeText} stores them
 * (bytes for a string that is not well-formed UTF-16).
 */
import { type Bucket, type SessionKey, unreadableText } from '@adk-state/core/store';
import type { CollectionReference, DocumentReference, Firestore } from '@google-cloud/firestore';
import {
  documentId,
  fieldName,
  isHashedField,
  isText,
  keyOfField,
  readText,
  type StoredText,
  storeText,
} from './encoding.js';

export const USERS = 'adk_users';
export const SESSIONS = 'adk_sessions';
export const EVENTS = 'adk_events';

/** One state entry as stored: the JSON text, or key and text when the field name is a hash. */
export type StoredEntry = StoredText | { key: StoredText; json: StoredText };

/** A state bucket as stored: field name to entry. */
export type StoredState = Record<string, StoredEntry>;

/** The fields of a session document. */
export interface SessionDocument {
  appName: StoredText;
  userId: StoredText;
  /**
   * `documentId(userId)`: what listing by user compares. Never the raw user
   * id, which may be longer than the 1,500 bytes Firestore takes in a query.
   */
  userKey: string;
  id: StoredText;
  /** `id` re-encoded so that Firestore's string order is JavaScript's, at most 1 KiB (see `idOrder`). */
  idOrder: string;
  lastUpdateTime: number;
  /** `lastUpdateTime` as a string that sorts numerically everywhere (see `numberKey`): the listing order. */
  lastUpdateKey: string;
  revision: number;
  /** How many event positions are taken; the next new event gets `eventCount + 1`. */
  eventCount: number;
  /** Random per creation: tells this session's events from those of a deleted one with the same key. */
  incarnation: string;
  state: StoredState;
  /**
   * The document ids of the last events (at most {@link RECENT_EVENTS}),
   * oldest first: the last n events are then read by id, without a query.
   * Absent on sessions written before the field existed (until they are
   * appended to), and shorter than `eventCount` on those.
   */
  recent?: string[];
  /**
   * The buckets a write (create or append) wrote in the same commit as the
   * session document, and the revision it wrote: `u` for the user's, `a`
   * for the app's, then `@` and the revision (`'ua@17'`, `'@18'`). Each such
   * write also changes the bucket's `written` field, so its update time is
   * that commit's: a read at one moment that shows the session at that
   * revision but a bucket older than it shows part of a commit, which
   * Firestore never does and an emulator may (see `tornBuckets`). A writer
   * that moves the revision without it (an older adapter, the seeder) leaves
   * it naming a revision that is gone, and it is not looked at. Absent on
   * sessions written before the field existed.
   */
  bucketsWritten?: string;
}

/**
 * Every field of {@link SessionDocument}, by name: the type makes the list
 * whole (a field added to the document and left out here does not compile),
 * so that an option naming a field of its own (`ttlField`) can be checked
 * against what the store writes.
 */
export const SESSION_DOCUMENT_FIELDS: Readonly<Record<keyof SessionDocument, true>> = {
  appName: true,
  userId: true,
  userKey: true,
  id: true,
  idOrder: true,
  lastUpdateTime: true,
  lastUpdateKey: true,
  revision: true,
  eventCount: true,
  incarnation: true,
  state: true,
  recent: true,
  bucketsWritten: true,
};

/** How many event document ids a session document keeps in `recent`. */
export const RECENT_EVENTS = 100;

/** The fields of an event document. */
export interface EventDocument {
  id: StoredText;
  timestamp: number;
  /** `timestamp` as a string that sorts numerically everywhere (see `numberKey`): what filters compare. */
  timestampKey: string;
  /** Position in append order, from 1, without gaps. */
  seq: number;
  /** The session revision that wrote this version of the event. */
  revision: number;
  incarnation: string;
  json: StoredText;
}

/** The document references of one session key. */
export interface SessionRefs {
  app: DocumentReference;
  user: DocumentReference;
  session: DocumentReference;
  events: CollectionReference;
}

export class Layout {
  readonly root: CollectionReference;

  constructor(firestore: Firestore, rootCollection: string) {
    this.root = firestore.collection(rootCollection);
  }

  app(appName: string): DocumentReference {
    return this.root.doc(documentId(appName));
  }

  user(appName: string, userId: string): DocumentReference {
    return this.app(appName).collection(USERS).doc(documentId(userId));
  }

  sessions(appName: string): CollectionReference {
    return this.app(appName).collection(SESSIONS);
  }

  session(key: SessionKey): SessionRefs {
    const app = this.app(key.appName);
    const session = app.collection(SESSIONS).doc(documentId(key.userId, key.sessionId));
    return {
      app,
      user: app.collection(USERS).doc(documentId(key.userId)),
      session,
      events: session.collection(EVENTS),
    };
  }

  event(refs: SessionRefs, eventId: string): DocumentReference {
    return refs.events.doc(documentId(eventId));
  }
}

/** A bucket (or delta) as stored entries, keyed by field name. */
export function encodeState(bucket: Bucket): StoredState {
  const state: StoredState = {};
  for (const [key, json] of bucket) {
    const name = fieldName(key);
    state[name] = isHashedField(name) ? { key: storeText(key), json: storeText(json) } : storeText(json);
  }
  return state;
}

/** The bucket that stored entries hold. */
export function decodeState(state: StoredState | undefined): Bucket {
  const bucket: Bucket = new Map();
  if (!state) return bucket;
  // What is not text stands in the bucket as such: reads of it fail as unreadable data, a listing leaves it out.
  if (typeof state !== 'object') {
    bucket.set('', unreadableText(`a stored state is a ${typeof state}, not a map`));
    return bucket;
  }
  for (const name of Object.keys(state)) {
    const entry = state[name] as StoredEntry | null;
    if (isText(entry)) bucket.set(keyOfField(name), readText(entry));
    else if (typeof entry === 'object' && entry !== null && isText(entry.key)) {
      const json: unknown = entry.json;
      bucket.set(
        readText(entry.key),
        isText(json)
          ? readText(json)
          : unreadableText(`the stored state entry ${JSON.stringify(name)} has no JSON text`),
      );
    } else {
      bucket.set(
        keyOfField(name),
        unreadableText(`the stored state entry ${JSON.stringify(name)} is ${String(entry)}`),
      );
    }
  }
  return bucket;
}

/** Dotted update paths (`state.<name>`) for a delta: field names are plain identifiers, so no quoting is needed. */
export function statePaths(delta: StoredState): Record<string, StoredEntry> {
  const paths: Record<string, StoredEntry> = {};
  for (const name of Object.keys(delta)) paths[`state.${name}`] = delta[name] as StoredEntry;
  return paths;
}
