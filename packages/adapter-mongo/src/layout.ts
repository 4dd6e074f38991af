/**
 * The documents and indexes of the MongoDB layout. Two collections, both
 * keyed by app and user first (a shard key for sharded clusters): sessions,
 * which holds each session's head and state and the user and app state
 * buckets, so that a session and the buckets an append changes are written
 * by one command; and events, one document per event, so no conversation
 * ever meets the 16 MB document limit. Every document carries
 * `schemaVersion`.
 */
import { randomBytes } from 'node:crypto';
import { type Bucket, unreadableText } from '@adk-state/core/store';
import type { Document, IndexDescription } from 'mongodb';
import { decodeFieldName, encodeFieldName, encodeKeyPart, type KeyPart } from './encoding.js';

export const SCHEMA_VERSION = 1;

/** Events outlive their session's expiry by this long, so a reader never sees a session without part of its history. */
export const EVENT_EXPIRY_GRACE_MS = 10 * 60 * 1000;

/** A state bucket as stored: encoded field name to the value's JSON text. */
export type StateFields = Record<string, string>;

export interface SessionDoc {
  _id: { app: KeyPart; user: KeyPart; id: KeyPart };
  /** Orders ties in listings as JavaScript compares the ids. */
  sortId: string;
  lastUpdateTime: number;
  revision: number;
  state: StateFields;
  createdAt: Date;
  /**
   * Random per creation and import: tells this life of the key from any
   * other, for incremental reads. Absent on sessions created before the
   * field existed (those are always read whole).
   */
  logMark?: string;
  /**
   * The write that brought the session to revision `rev`: a token unique to
   * that append (or import), also kept on the event it wrote (`w`). A reader
   * that holds the session at that revision checks it, so that writes the
   * backend lost and others made since at the same revisions (a rollback)
   * are not taken for the ones it read. Absent after `createSession`, and
   * stale (another `rev`) after a write by a version without it.
   */
  written?: { rev: number; token: string };
  /** Only with a session time-to-live. */
  expiresAt?: Date;
  schemaVersion: number;
}

export interface EventDoc {
  _id: { app: KeyPart; user: KeyPart; session: KeyPart; id: KeyPart };
  /** Position in append order (the revision that first wrote the event); a re-appended id keeps its own. */
  seq: number;
  /**
   * The revision that wrote this version of the event: `seq`, or later for a
   * re-appended id. Absent on events written before the field existed.
   */
  rev?: number;
  /** The token of the write that wrote this version (`SessionDoc.written`); absent on events written before it existed. */
  w?: string;
  timestamp: number;
  /** The event as JSON text, exactly as core encoded it. */
  json: string;
  expiresAt?: Date;
  schemaVersion: number;
}

/** A user bucket (`user` is the user id) or the app bucket (`user` is null), in the sessions collection. */
export interface BucketDoc {
  _id: { app: KeyPart; user: KeyPart | null };
  state: StateFields;
  schemaVersion: number;
}

export interface CollectionNames {
  /** Session heads and state, and the user and app state buckets. */
  sessions: string;
  events: string;
}

export function collectionNames(prefix: string): CollectionNames {
  return { sessions: `${prefix}sessions`, events: `${prefix}events` };
}

export function sessionId(appName: string, userId: string, id: string): SessionDoc['_id'] {
  return { app: encodeKeyPart(appName), user: encodeKeyPart(userId), id: encodeKeyPart(id) };
}

export function userBucketId(appName: string, userId: string): BucketDoc['_id'] {
  return { app: encodeKeyPart(appName), user: encodeKeyPart(userId) };
}

/** The app bucket's `_id`: no user (null, which no user id can be), so it carries both shard key fields. */
export function appBucketId(appName: string): BucketDoc['_id'] {
  return { app: encodeKeyPart(appName), user: null };
}

export function eventId(appName: string, userId: string, session: string, id: string): EventDoc['_id'] {
  return {
    app: encodeKeyPart(appName),
    user: encodeKeyPart(userId),
    session: encodeKeyPart(session),
    id: encodeKeyPart(id),
  };
}

/** The filter of one session's events: an equality on the shard key fields and the session, served by `session_seq`. */
export function eventsOf(appName: string, userId: string, session: string): Document {
  return {
    '_id.app': encodeKeyPart(appName),
    '_id.user': encodeKeyPart(userId),
    '_id.session': encodeKeyPart(session),
  };
}

/**
 * Session heads only: every head has a numeric `lastUpdateTime`, the bucket
 * documents of the sessions collection have none. A range on the listing
 * indexes' second field, so a listing never reads a bucket.
 */
export const SESSION_HEADS: Document = { lastUpdateTime: { $gte: Number.NEGATIVE_INFINITY } };

/**
 * Session heads whose `lastUpdateTime` was changed outside adk-state to
 * something that is not a number: {@link SESSION_HEADS} misses them, and a
 * listing must not hide them. Bounds on the same indexes, so a listing still
 * reads no bucket: a word, a date, a document (any type but number and null)
 * by type; a time removed or set to null by the head's `sortId`, a string
 * every head has and no bucket has (the index holds a bucket's missing
 * `lastUpdateTime` and `sortId` both as null).
 */
export const DAMAGED_HEADS: Document = {
  $or: [
    {
      lastUpdateTime: {
        $type: [
          'string',
          'object',
          'array',
          'binData',
          'objectId',
          'bool',
          'date',
          'regex',
          'javascript',
          'timestamp',
          'minKey',
          'maxKey',
        ],
      },
    },
    { lastUpdateTime: null, sortId: { $type: 'string' } },
  ],
};

/** The stored form of a whole bucket. */
export function toStateFields(bucket: Bucket): StateFields {
  const fields: StateFields = {};
  for (const [key, text] of bucket) {
    Object.defineProperty(fields, encodeFieldName(key), {
      value: text,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return fields;
}

/** `$set` entries that write only the keys of `delta` under `state`. */
export function stateSets(delta: Bucket): Record<string, string> {
  const sets: Record<string, string> = {};
  for (const [key, text] of delta) sets[`state.${encodeFieldName(key)}`] = text;
  return sets;
}

export function fromStateFields(fields: StateFields | undefined): Bucket {
  const bucket: Bucket = new Map();
  if (fields === undefined || fields === null) return bucket;
  // What is not text stands in the bucket as such: reads of it fail as unreadable data, a listing leaves it out.
  if (typeof fields !== 'object') {
    bucket.set('', unreadableText(`a stored state is a ${typeof fields}, not a document`));
    return bucket;
  }
  for (const name of Object.keys(fields)) {
    const text: unknown = fields[name];
    bucket.set(
      decodeFieldName(name),
      typeof text === 'string'
        ? text
        : unreadableText(
            `the stored state field ${JSON.stringify(name)} is ${text === null ? 'null' : `a ${typeof text}`}, not JSON text`,
          ),
    );
  }
  return bucket;
}

/** The indexes every query of the store is served by. */
export function sessionIndexes(withTtl: boolean): IndexDescription[] {
  const indexes: IndexDescription[] = [
    { name: 'app_time_asc', key: { '_id.app': 1, lastUpdateTime: 1, sortId: 1 } },
    { name: 'app_time_desc', key: { '_id.app': 1, lastUpdateTime: -1, sortId: 1 } },
    { name: 'user_time_asc', key: { '_id.app': 1, '_id.user': 1, lastUpdateTime: 1, sortId: 1 } },
    { name: 'user_time_desc', key: { '_id.app': 1, '_id.user': 1, lastUpdateTime: -1, sortId: 1 } },
  ];
  if (withTtl) indexes.push({ name: 'expiry', key: { expiresAt: 1 }, expireAfterSeconds: 0 });
  return indexes;
}

/**
 * The log of one session in append order. Not unique: the revision
 * compare-and-set already keeps positions apart, and a stale writer whose
 * event upsert shares a command with its (failed) revision check must meet a
 * stale session, not a duplicate key.
 */
export function eventIndexes(withTtl: boolean): IndexDescription[] {
  const indexes: IndexDescription[] = [
    { name: 'session_seq', key: { '_id.app': 1, '_id.user': 1, '_id.session': 1, seq: 1 } },
    // The incremental read's second clause: the event versions written at and after a revision.
    { name: 'session_rev', key: { '_id.app': 1, '_id.user': 1, '_id.session': 1, rev: 1 } },
  ];
  if (withTtl) indexes.push({ name: 'expiry', key: { expiresAt: 1 }, expireAfterSeconds: 0 });
  return indexes;
}

/**
 * A maker of write tokens (`SessionDoc.written`, `EventDoc.w`): a random
 * prefix of its own, then a count, so no two makers' tokens meet.
 */
export function writeTokens(): () => string {
  const prefix = randomBytes(9).toString('base64url');
  let count = 0;
  return () => {
    count += 1;
    return `${prefix}${count.toString(36)}`;
  };
}
