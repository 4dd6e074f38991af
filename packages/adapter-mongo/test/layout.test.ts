/**
 * The MongoDB layout: the documented collections and indexes, the buckets
 * beside the sessions (never listed), keys that
 * MongoDB treats specially stored escaped and read back exactly, ids that
 * BSON cannot carry kept apart, listing ties in JavaScript's order, one
 * document per event (no 16 MB cap on a conversation), schema versions.
 */
import type { Session } from '@google/adk';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoSessionService, SchemaVersionError } from '../src/index.js';
import { collectionNames } from '../src/layout.js';
import { dropDatabase, event, mongoUrl, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('layout');
const names = collectionNames('adk_');
let client: MongoClient;
let service: MongoSessionService;

beforeAll(async () => {
  client = new MongoClient(mongoUrl());
  service = new MongoSessionService({ client, dbName });
  await service.ready();
});

afterAll(async () => {
  await client.close();
  await dropDatabase(dbName);
});

function own(entries: Array<[string, unknown]>): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const [key, value] of entries) {
    Object.defineProperty(result, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return result;
}

describe('the MongoDB layout', () => {
  it('creates the documented collections and indexes', async () => {
    const db = client.db(dbName);
    const collections = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
    expect(collections).toEqual(expect.arrayContaining([names.sessions, names.events]));
    const sessionIndexes = await db.collection(names.sessions).listIndexes().toArray();
    expect(sessionIndexes.map((index) => [index.name, index.key])).toEqual([
      ['_id_', { _id: 1 }],
      ['app_time_asc', { '_id.app': 1, lastUpdateTime: 1, sortId: 1 }],
      ['app_time_desc', { '_id.app': 1, lastUpdateTime: -1, sortId: 1 }],
      ['user_time_asc', { '_id.app': 1, '_id.user': 1, lastUpdateTime: 1, sortId: 1 }],
      ['user_time_desc', { '_id.app': 1, '_id.user': 1, lastUpdateTime: -1, sortId: 1 }],
    ]);
    const eventIndexes = await db.collection(names.events).listIndexes().toArray();
    expect(eventIndexes.map((index) => [index.name, index.key, index.unique ?? false])).toEqual([
      ['_id_', { _id: 1 }, false],
      ['session_seq', { '_id.app': 1, '_id.user': 1, '_id.session': 1, seq: 1 }, false],
      ['session_rev', { '_id.app': 1, '_id.user': 1, '_id.session': 1, rev: 1 }, false],
    ]);
  });

  it('stores a session, its events and its buckets as the README describes', async () => {
    const appName = uniqueApp();
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { a: 1 } });
    const db = client.db(dbName);
    const find = () => db.collection(names.sessions).findOne({ _id: { app: appName, user: 'u1', id: 's1' } as never });
    // A new session starts at a random revision; the append bumps it by one.
    const first = (await find())?.revision as number;
    expect(Number.isInteger(first) && first >= 1 && first < 2 ** 30).toBe(true);
    const appended = event({ b: 'x', 'user:c': true, 'app:d': [1] });
    await service.appendEvent({ session, event: appended });
    const stored = await find();
    expect(stored).toMatchObject({
      _id: { app: appName, user: 'u1', id: 's1' },
      sortId: 's1',
      lastUpdateTime: appended.timestamp,
      revision: first + 1,
      state: { a: '1', b: '"x"' },
      schemaVersion: 1,
    });
    expect(stored?.createdAt).toBeInstanceOf(Date);
    expect(stored?.logMark).toEqual(expect.any(String));
    // The token of the write at this revision, also on the event it wrote.
    expect(stored?.written).toEqual({ rev: first + 1, token: expect.any(String) });
    const events = await db
      .collection(names.events)
      .find({ '_id.app': appName, '_id.user': 'u1', '_id.session': 's1' })
      .toArray();
    expect(events).toEqual([
      {
        _id: { app: appName, user: 'u1', session: 's1', id: appended.id },
        seq: first + 1,
        rev: first + 1,
        w: stored?.written.token,
        timestamp: appended.timestamp,
        json: JSON.stringify(appended),
        schemaVersion: 1,
      },
    ]);
    // The buckets live in the sessions collection, next to the sessions they belong to.
    const buckets = db.collection(names.sessions);
    expect(await buckets.findOne({ _id: { app: appName, user: 'u1' } as never })).toEqual({
      _id: { app: appName, user: 'u1' },
      schemaVersion: 1,
      state: { c: 'true' },
    });
    expect(await buckets.findOne({ _id: { app: appName, user: null } as never })).toEqual({
      _id: { app: appName, user: null },
      schemaVersion: 1,
      state: { d: '[1]' },
    });
  });

  it('the buckets that share the sessions collection are never listed or counted', async () => {
    const appName = uniqueApp();
    for (const userId of ['u1', 'u2']) {
      await service.createSession({ appName, userId, sessionId: 's1', state: { 'user:me': userId, 'app:n': 1 } });
    }
    const all = await service.listSessions({ appName });
    expect(all.totalItems).toBe(2);
    expect(all.sessions.map((session) => [session.userId, session.state])).toEqual([
      ['u1', { 'user:me': 'u1', 'app:n': 1 }],
      ['u2', { 'user:me': 'u2', 'app:n': 1 }],
    ]);
    const one = await service.listSessions({ appName, userId: 'u2', limit: 1 });
    expect([one.totalItems, one.sessions.map((session) => session.id)]).toEqual([1, ['s1']]);
    const db = client.db(dbName);
    expect(await db.collection(names.sessions).countDocuments({ '_id.app': appName })).toBe(5);
  });

  it("state keys with '.', '$', '%', NUL, '__proto__', lone surrogates or nothing round-trip, stored escaped", async () => {
    const appName = uniqueApp();
    const keys = ['a.b', '$set', 'a.$b', '%2E', '%', 'nul\u0000byte', '__proto__', 'lone\ud800', '\udc00', '', 'plain'];
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
    const delta = own(keys.flatMap((key) => [[key, `s-${key}`] as [string, unknown], [`user:${key}`, { [key]: key }]]));
    await service.appendEvent({ session, event: event(delta) });
    const loaded = await service.getSession({ appName, userId: 'u1', sessionId: 's1' });
    for (const key of keys) {
      expect(Object.getOwnPropertyDescriptor(loaded?.state, key)?.value, key).toBe(`s-${key}`);
      expect(Object.getOwnPropertyDescriptor(loaded?.state, `user:${key}`)?.value, key).toEqual({ [key]: key });
    }
    expect(Object.getPrototypeOf(loaded?.state)).toBe(Object.prototype);
    const stored = await client
      .db(dbName)
      .collection(names.sessions)
      .findOne({ _id: { app: appName, user: 'u1', id: 's1' } as never });
    const fieldNames = Object.keys(stored?.state ?? {});
    expect(fieldNames).toHaveLength(keys.length);
    for (const name of fieldNames) {
      expect(name.includes('.') || name.includes('$') || name.includes('\u0000'), name).toBe(false);
    }
    expect(fieldNames).toContain('a%002Eb');
    expect(fieldNames).toContain('%');
  });

  it('an id with a lone surrogate is stored apart from the replacement character BSON would make of it', async () => {
    const appName = uniqueApp();
    const ids = ['\ud800', '\ufffd', 'x\udc00y', 'x\ufffdy'];
    for (const sessionId of ids)
      await service.createSession({ appName, userId: '\udbff', sessionId, state: { me: sessionId } });
    for (const sessionId of ids) {
      const loaded = await service.getSession({ appName, userId: '\udbff', sessionId });
      expect(loaded?.id).toBe(sessionId);
      expect(loaded?.userId).toBe('\udbff');
      expect(loaded?.state.me).toBe(sessionId);
    }
    expect(await service.getSession({ appName, userId: '\ufffd', sessionId: '\ud800' })).toBeUndefined();
    const listed = await service.listSessions({ appName, userId: '\udbff' });
    expect(listed.sessions.map((s) => s.id).sort()).toEqual([...ids].sort());
  });

  it("listing breaks ties by id in JavaScript's string order, which is not UTF-8 byte order", async () => {
    const appName = uniqueApp();
    const frozen = new MongoSessionService({ client, dbName, now: () => 1_000 });
    const ids = ['\uffff', '\u{10000}', 'b', 'a', '\ue000', '\ud7ff'];
    for (const sessionId of ids) await frozen.createSession({ appName, userId: 'u1', sessionId });
    const listed = await frozen.listSessions({ appName });
    expect(listed.sessions.map((s) => s.id)).toEqual([...ids].sort());
    const descending = await frozen.listSessions({ appName, order: 'desc', limit: 2, page: 2 });
    expect(descending.sessions.map((s) => s.id)).toEqual([...ids].sort().slice(2, 4));
  });

  it('one document per event: a conversation larger than 16 MB is stored and read back whole', async () => {
    const appName = uniqueApp();
    const session = await service.createSession({ appName, userId: 'u1' });
    const chunk = 'x'.repeat(512 * 1024);
    const appended: string[] = [];
    for (let i = 0; i < 34; i++) {
      appended.push((await service.appendEvent({ session, event: event({ i }, { customMetadata: { chunk } }) })).id);
    }
    const loaded = await service.getSession({ appName, userId: 'u1', sessionId: session.id });
    expect(loaded?.events.map((e) => e.id)).toEqual(appended);
    expect(loaded?.events.every((e) => (e.customMetadata?.chunk as string).length === chunk.length)).toBe(true);
    const tail = await service.getSession({
      appName,
      userId: 'u1',
      sessionId: session.id,
      config: { numRecentEvents: 2 },
    });
    expect(tail?.events.map((e) => e.id)).toEqual(appended.slice(-2));
  });

  it('deleting a session removes its event documents in the same transaction', async () => {
    const appName = uniqueApp();
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
    for (let i = 0; i < 5; i++) await service.appendEvent({ session, event: event({ i }) });
    const sessions = client.db(dbName).collection(names.sessions);
    const events = client.db(dbName).collection(names.events);
    const ofSession = { '_id.app': appName, '_id.user': 'u1', '_id.session': 's1' };
    expect(await events.countDocuments(ofSession)).toBe(5);
    await service.deleteSession({ appName, userId: 'u1', sessionId: 's1' });
    expect(await events.countDocuments(ofSession)).toBe(0);
    expect(await sessions.countDocuments({ _id: { app: appName, user: 'u1', id: 's1' } as never })).toBe(0);
  });

  it('a document written by a newer schema version is refused, not misread', async () => {
    const appName = uniqueApp();
    await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
    await client
      .db(dbName)
      .collection(names.sessions)
      .updateOne({ _id: { app: appName, user: 'u1', id: 's1' } as never }, { $set: { schemaVersion: 2 } });
    const failure = await service
      .getSession({ appName, userId: 'u1', sessionId: 's1' })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(SchemaVersionError);
    expect((failure as SchemaVersionError).code).toBe('BACKEND_ERROR');
  });

  it('two collection prefixes keep two stores apart in one database', async () => {
    const appName = uniqueApp();
    const other = new MongoSessionService({ client, dbName, collectionPrefix: 'other_' });
    await service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { 'app:x': 1 } });
    expect(await other.getSession({ appName, userId: 'u1', sessionId: 's1' })).toBeUndefined();
    expect(await other.getAppState({ appName })).toEqual({});
    const created = (await other.createSession({ appName, userId: 'u1', sessionId: 's1' })) as Session;
    expect(created.state).toEqual({});
    const collections = (await client.db(dbName).listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
    expect(collections).toEqual(expect.arrayContaining(['other_sessions', 'other_events']));
  });
});
