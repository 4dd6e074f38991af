/**
 * The documents and indexes of the MongoDB layout. Four collections: sessions
 * (head and session state), events (one document per event, so no conversation
 * ever meets the 16 MB document limit), user state and app state. Every
 * document carries `schemaVersion`.
 */
import type { Bucket } from '@adk-state/core';
import type { IndexDescription } from 'mongodb';
import { decodeFieldName, encodeFieldName, encodeKeyPart, type KeyPart } from './encoding.js';

export const SCHEMA_VERSION = 1;

/** Events outlive their session's expiry by this long, so a reader never sees a session without part of its history. */
export const EVENT_EXPIRY_GRACE_MS = 10 * 60 * 1000;

/** A state bucket as stored: encoded field name to the value's JSON text. */
export type StateFields = Record<string, string>;

export interface SessionDoc {
  _id: { app: KeyPart; user: KeyPart; id: KeyPart };
  /** Unique per creation of the key: events belong to one incarnation, so a recreated id starts empty. */
  incarnation: string;
  /** Orders ties in listings as JavaScript compares the ids. */
  sortId: string;
  lastUpdateTime: number;
  revision: number;
  state: StateFields;
  createdAt: Date;
  /** Only with a session time-to-live. */
  expiresAt?: Date;
  schemaVersion: number;
}

export interface EventDoc {
  _id: { incarnation: string; id: KeyPart };
  /** Position in append order; a re-appended id keeps its own. */
  seq: number;
  timestamp: number;
  /** The event as JSON text, exactly as core encoded it. */
  json: string;
  expiresAt?: Date;
  schemaVersion: number;
}

export interface BucketDoc {
  _id: { app: KeyPart; user?: KeyPart };
  state: StateFields;
  schemaVersion: number;
}

export interface CollectionNames {
  sessions: string;
  events: string;
  userStates: string;
  appStates: string;
}

export function collectionNames(prefix: string): CollectionNames {
  return {
    sessions: `${prefix}sessions`,
    events: `${prefix}events`,
    userStates: `${prefix}user_states`,
    appStates: `${prefix}app_states`,
  };
}

export function sessionId(appName: string, userId: string, id: string): SessionDoc['_id'] {
  return { app: encodeKeyPart(appName), user: encodeKeyPart(userId), id: encodeKeyPart(id) };
}

export function userBucketId(appName: string, userId: string): BucketDoc['_id'] {
  return { app: encodeKeyPart(appName), user: encodeKeyPart(userId) };
}

export function appBucketId(appName: string): BucketDoc['_id'] {
  return { app: encodeKeyPart(appName) };
}

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
  if (fields) for (const name of Object.keys(fields)) bucket.set(decodeFieldName(name), fields[name] as string);
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

export function eventIndexes(withTtl: boolean): IndexDescription[] {
  const indexes: IndexDescription[] = [{ name: 'session_seq', key: { '_id.incarnation': 1, seq: 1 }, unique: true }];
  if (withTtl) indexes.push({ name: 'expiry', key: { expiresAt: 1 }, expireAfterSeconds: 0 });
  return indexes;
}
