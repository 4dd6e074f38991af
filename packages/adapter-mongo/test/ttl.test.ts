/**
 * The optional session time-to-live: sessions (and their events) expire
 * `expireAfterCreateSeconds` after creation. TTL indexes let MongoDB remove them;
 * until its monitor passes, expired sessions already read as gone.
 */
import type { Session } from '@google/adk';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_EXPIRY_GRACE_MS, MongoSessionService } from '../src/index.js';
import { collectionNames } from '../src/layout.js';
import { dropDatabase, event, mongoUrl, uniqueApp, uniqueDbName, usingStandIn } from './support.js';

const dbName = uniqueDbName('ttl');
const names = collectionNames('adk_');
const TTL_SECONDS = 3600;
let client: MongoClient;
let clockMs = Date.now();
let service: MongoSessionService;

beforeAll(async () => {
  client = new MongoClient(mongoUrl());
  service = new MongoSessionService({ client, dbName, expireAfterCreateSeconds: TTL_SECONDS, now: () => clockMs });
  await service.ready();
});

afterAll(async () => {
  await client.close();
  await dropDatabase(dbName);
});

/** The filter of the events of session `s1` of user `u1`. */
function eventsOf(appName: string) {
  return { '_id.app': appName, '_id.user': 'u1', '_id.session': 's1' };
}

async function storedSession(appName: string) {
  return client
    .db(dbName)
    .collection(names.sessions)
    .findOne({ _id: { app: appName, user: 'u1', id: 's1' } as never });
}

describe('session time-to-live', () => {
  it('creates TTL indexes on expiresAt in the sessions and events collections', async () => {
    for (const collection of [names.sessions, names.events]) {
      const indexes = await client.db(dbName).collection(collection).listIndexes().toArray();
      expect(indexes.find((index) => index.name === 'expiry')).toMatchObject({
        key: { expiresAt: 1 },
        expireAfterSeconds: 0,
      });
    }
  });

  it('stamps a session with its expiry and each event with the expiry of an append at its time plus the grace period', async () => {
    const appName = uniqueApp();
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
    await service.appendEvent({ session, event: event({ a: 1 }) });
    const stored = await storedSession(appName);
    expect(stored?.expiresAt).toEqual(new Date(clockMs + TTL_SECONDS * 1000));
    const events = await client.db(dbName).collection(names.events).find(eventsOf(appName)).toArray();
    expect(events.map((e) => e.expiresAt)).toEqual([new Date(clockMs + TTL_SECONDS * 1000 + EVENT_EXPIRY_GRACE_MS)]);
  });

  it('an expired session reads as gone before the TTL monitor removes it, and its id can be created again', async () => {
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    const session = (await service.createSession({ ...key, state: { old: true } })) as Session;
    await service.appendEvent({ session, event: event({ a: 1 }) });
    const created = clockMs;
    clockMs = created + TTL_SECONDS * 1000;
    try {
      expect(await service.getSession(key)).toBeUndefined();
      expect((await service.listSessions({ appName })).sessions).toEqual([]);
      const append = await service.appendEvent({ session, event: event({ a: 2 }) }).catch((error) => error.code);
      expect(append).toBe('SESSION_NOT_FOUND');
      const again = await service.createSession({ ...key, state: { fresh: true } });
      expect(again.state).toEqual({ fresh: true });
      expect((await service.getSession(key))?.events).toEqual([]);
    } finally {
      clockMs = created;
    }
  });

  it.skipIf(!usingStandIn())(
    "MongoDB's TTL monitor removes expired sessions and their events (stand-in: one monitor pass on demand)",
    async () => {
      const appName = uniqueApp();
      const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
      for (let i = 0; i < 3; i++) await service.appendEvent({ session, event: event({ i }) });
      const events = client.db(dbName).collection(names.events);
      const monitor = (at: number) => client.db('admin').command({ standInRunTtlMonitor: 1, now: new Date(at) });
      await monitor(clockMs + TTL_SECONDS * 1000 - 1);
      expect(await storedSession(appName)).not.toBeNull();
      await monitor(clockMs + TTL_SECONDS * 1000);
      expect(await storedSession(appName)).toBeNull();
      expect(await events.countDocuments(eventsOf(appName))).toBe(3);
      await monitor(clockMs + TTL_SECONDS * 1000 + EVENT_EXPIRY_GRACE_MS);
      expect(await events.countDocuments(eventsOf(appName))).toBe(0);
    },
  );

  it.skipIf(!usingStandIn())(
    'a session created again while the events of its expired predecessor wait for the monitor starts empty',
    async () => {
      const appName = uniqueApp();
      const key = { appName, userId: 'u1', sessionId: 's1' };
      const session = await service.createSession(key);
      for (let i = 0; i < 3; i++) await service.appendEvent({ session, event: event({ i }) });
      const events = client.db(dbName).collection(names.events);
      // The monitor has removed the session, not yet its events (they outlive it by the grace period).
      await client.db('admin').command({ standInRunTtlMonitor: 1, now: new Date(clockMs + TTL_SECONDS * 1000) });
      expect(await storedSession(appName)).toBeNull();
      expect(await events.countDocuments(eventsOf(appName))).toBe(3);
      const created = clockMs;
      clockMs = created + TTL_SECONDS * 1000;
      try {
        const again = await service.createSession({ ...key, state: { fresh: true } });
        expect(await events.countDocuments(eventsOf(appName))).toBe(0);
        await service.appendEvent({ session: again, event: event({ next: 1 }) });
        const loaded = await service.getSession(key);
        expect(loaded?.events.map((e) => e.actions.stateDelta)).toEqual([{ next: 1 }]);
        expect(loaded?.state).toEqual({ fresh: true, next: 1 });
      } finally {
        clockMs = created;
      }
    },
  );

  it('without expireAfterCreateSeconds nothing expires and no TTL index is made', async () => {
    const plainDb = uniqueDbName('nottl');
    const plain = new MongoSessionService({ client, dbName: plainDb });
    try {
      const appName = uniqueApp();
      await plain.createSession({ appName, userId: 'u1', sessionId: 's1' });
      const stored = await client
        .db(plainDb)
        .collection(names.sessions)
        .findOne({ _id: { app: appName, user: 'u1', id: 's1' } as never });
      expect(stored?.expiresAt).toBeUndefined();
      const indexes = await client.db(plainDb).collection(names.sessions).listIndexes().toArray();
      expect(indexes.some((index) => index.expireAfterSeconds !== undefined)).toBe(false);
    } finally {
      await client.db(plainDb).dropDatabase();
    }
  });
});
