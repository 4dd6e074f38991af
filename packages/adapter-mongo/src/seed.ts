/**
 * `@adk-state/adapter-mongo/seed`: bulk seeding for benchmarks and load
 * tests. Writes, with a few bulk inserts, exactly the documents that
 * `createSession` followed by one `appendEvent` per event would write (this
 * package's tests compare them document by document), so that read workloads
 * over long histories or many sessions start in seconds. Each seeder then
 * reads its work back through the service and throws if the service does not
 * see what was meant: a drift from the layout fails loudly instead of seeding
 * the wrong data.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { StateSessionService } from '@adk-state/core';
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
  writeTokens,
} from './layout.js';
import type { MongoStore } from './store.js';

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

/**
 * Creates the session `key`, which must not exist yet, created at
 * `createTime` and holding `events` (without `temp:` keys, which an append
 * never stores), as the service would have stored them; merges the events'
 * `user:` and `app:` keys into the user's and the app's state. `store` is the
 * store of a `MongoSessionService` (`service.store`).
 */
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
  const token = writeTokens();
  let written: SessionDoc['written'];
  for (const [index, event] of events.entries()) {
    const writes = splitState(event.actions?.stateDelta as Record<string, unknown> | undefined);
    mergeInto(session, writes.session);
    mergeInto(user, writes.user);
    mergeInto(app, writes.app);
    const stored = encodeEvent(event);
    written = { rev: first + index + 1, token: token() };
    docs.push({
      _id: eventId(key.appName, key.userId, key.sessionId, stored.id),
      seq: first + index + 1,
      rev: first + index + 1,
      w: written.token,
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
    logMark: randomUUID(),
    ...(written ? { written } : {}),
    schemaVersion: SCHEMA_VERSION,
  };
  for (let i = 0; i < docs.length; i += BATCH) {
    await store.db.collection(store.names.events).insertMany(docs.slice(i, i + BATCH) as never[], { ordered: false });
  }
  await store.db.collection(store.names.sessions).insertOne(head as never);
  await mergeBucket(store, userBucketId(key.appName, key.userId), user);
  await mergeBucket(store, appBucketId(key.appName), app);

  const check = await new StateSessionService(store).getSession({ ...key, config: { numRecentEvents: 2 } });
  const ids = (list: Event[] | undefined) => list?.map((event) => event.id).join() ?? '';
  if (!check || ids(check.events) !== ids(events.slice(-2))) {
    throw new Error('seedHistory: the seeded history does not read back as appended');
  }
}

/**
 * Creates `count` empty sessions with random ids in `appName`, an app with no
 * sessions yet, spread round-robin over `users`, the `i`-th updated at
 * `createTime + i`.
 */
export async function seedSessions(
  store: MongoStore,
  appName: string,
  users: string[],
  count: number,
  createTime = Date.now(),
): Promise<void> {
  await store.ready();
  if (count <= 0 || users.length === 0) return;
  let lastId = '';
  for (let start = 0; start < count; start += BATCH) {
    const docs: SessionDoc[] = [];
    for (let i = start; i < Math.min(count, start + BATCH); i++) {
      const id = randomUUID();
      lastId = id;
      docs.push({
        _id: sessionId(appName, users[i % users.length] as string, id),
        sortId: utf16OrderKey(id),
        lastUpdateTime: createTime + i,
        revision: firstRevision(),
        state: {},
        createdAt: new Date(createTime),
        logMark: randomUUID(),
        schemaVersion: SCHEMA_VERSION,
      });
    }
    await store.db.collection(store.names.sessions).insertMany(docs as never[], { ordered: false });
  }

  const page = await new StateSessionService(store).listSessions({ appName, limit: 1, order: 'desc' });
  if (page.totalItems !== count || page.sessions[0]?.id !== lastId) {
    throw new Error('seedSessions: the seeded sessions do not list as created');
  }
}
