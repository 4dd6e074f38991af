/**
 * Bulk seeding for benchmarks: writes, with a few bulk inserts, exactly the
 * documents that `createSession` followed by one `appendEvent` per event
 * would write, so read workloads over long histories start in seconds.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { type Bucket, encodeEvent, mergeInto, type SessionKey, splitState, utf16OrderKey } from '@adk-state/core/store';
import type { Event } from '@google/adk';
import {
  appBucketId,
  type EventDoc,
  eventId,
  SCHEMA_VERSION,
  type SessionDoc,
  sessionId,
  stateSets,
  toStateFields,
  userBucketId,
} from '../src/layout.js';
import type { MongoStore } from '../src/store.js';

const BATCH = 1000;

/** A first revision drawn as core draws it for a new session. */
const firstRevision = () => randomInt(1, 2 ** 30);

async function mergeBucket(store: MongoStore, id: object, delta: Bucket): Promise<void> {
  if (delta.size === 0) return;
  await store.db
    .collection(store.names.sessions)
    .updateOne(
      { _id: id as never },
      { $set: stateSets(delta), $setOnInsert: { schemaVersion: SCHEMA_VERSION } },
      { upsert: true },
    );
}

/** Creates the session `key` (created at `createTime`) holding `events`, as the service would have stored them. */
export async function seedHistory(
  store: MongoStore,
  key: SessionKey,
  events: Event[],
  createTime = Date.now(),
): Promise<void> {
  await store.ready();
  const first = firstRevision();
  const session: Bucket = new Map();
  const user: Bucket = new Map();
  const app: Bucket = new Map();
  const docs: EventDoc[] = [];
  for (const [index, event] of events.entries()) {
    const writes = splitState(event.actions?.stateDelta as Record<string, unknown> | undefined);
    mergeInto(session, writes.session);
    mergeInto(user, writes.user);
    mergeInto(app, writes.app);
    const stored = encodeEvent(event);
    docs.push({
      _id: eventId(key.appName, key.userId, key.sessionId, stored.id),
      seq: first + index + 1,
      timestamp: stored.timestamp,
      json: stored.json,
      schemaVersion: SCHEMA_VERSION,
    });
  }
  const head: SessionDoc = {
    _id: sessionId(key.appName, key.userId, key.sessionId),
    sortId: utf16OrderKey(key.sessionId),
    lastUpdateTime: events.length > 0 ? (events[events.length - 1] as Event).timestamp : createTime,
    revision: first + events.length,
    state: toStateFields(session),
    createdAt: new Date(createTime),
    schemaVersion: SCHEMA_VERSION,
  };
  for (let i = 0; i < docs.length; i += BATCH) {
    await store.db.collection(store.names.events).insertMany(docs.slice(i, i + BATCH) as never[], { ordered: false });
  }
  await store.db.collection(store.names.sessions).insertOne(head as never);
  await mergeBucket(store, userBucketId(key.appName, key.userId), user);
  await mergeBucket(store, appBucketId(key.appName), app);
}

/** Creates `count` empty sessions of `appName`, spread round-robin over `users`, with increasing update times. */
export async function seedSessions(
  store: MongoStore,
  appName: string,
  users: string[],
  count: number,
  createTime = Date.now(),
): Promise<void> {
  await store.ready();
  for (let start = 0; start < count; start += BATCH) {
    const docs: SessionDoc[] = [];
    for (let i = start; i < Math.min(count, start + BATCH); i++) {
      const id = randomUUID();
      docs.push({
        _id: sessionId(appName, users[i % users.length] as string, id),
        sortId: utf16OrderKey(id),
        lastUpdateTime: createTime + i,
        revision: firstRevision(),
        state: {},
        createdAt: new Date(createTime),
        schemaVersion: SCHEMA_VERSION,
      });
    }
    await store.db.collection(store.names.sessions).insertMany(docs as never[], { ordered: false });
  }
}
