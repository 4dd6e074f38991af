/**
 * Documents changed outside adk-state, beyond what the conformance suite's
 * damaged-records group changes (see `damage.ts`): a state that is not a
 * document, an event time that is not a number. Reads fail with a
 * BackendError of kind 'unreadable-data'; a listing still shows the session.
 */
import { expectCode } from '@adk-state/conformance-tests';
import type { BackendError } from '@adk-state/core';
import { type Document, MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoSessionService } from '../src/index.js';
import { collectionNames } from '../src/layout.js';
import { dropDatabase, event, mongoUrl, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('unreadable');
const names = collectionNames('adk_');
let client: MongoClient;

beforeAll(async () => {
  client = new MongoClient(mongoUrl());
  await new MongoSessionService({ client, dbName }).ready();
});

afterAll(async () => {
  await client.close();
  await dropDatabase(dbName);
});

const failure = (promise: Promise<unknown>) => expectCode(promise, 'BACKEND_ERROR') as Promise<BackendError>;

describe('MongoDB documents changed outside adk-state (beyond the conformance damage group)', () => {
  it('a state that is not a document and an event time that is not a number fail reads as unreadable data', async () => {
    const service = new MongoSessionService({ client, dbName });
    const appName = uniqueApp();
    const key = { appName, userId: 'u', sessionId: 's' };
    const created = await service.createSession({ ...key, state: { a: 1 } });
    await service.appendEvent({ session: created, event: event({ b: 2 }) });
    const db = client.db(dbName);
    const headId = { _id: { app: appName, user: 'u', id: 's' } as never };
    const eventFilter = { '_id.app': appName, '_id.user': 'u', '_id.session': 's' };
    const head = (await db.collection(names.sessions).findOne(headId)) as Document;
    const stored = (await db.collection(names.events).findOne(eventFilter)) as Document;

    await db.collection(names.sessions).updateOne(headId, { $set: { state: 'all' } });
    expect((await failure(service.getSession(key))).kind).toBe('unreadable-data');
    // A listing still shows it, with what can be read.
    expect((await service.listSessions({ appName })).sessions.map((session) => session.id)).toEqual(['s']);
    await db.collection(names.sessions).updateOne(headId, { $set: { state: head.state } });

    await db.collection(names.events).updateOne({ _id: stored._id }, { $set: { timestamp: 'then' } });
    expect((await failure(new MongoSessionService({ client, dbName }).getSession(key))).kind).toBe('unreadable-data');
    await db.collection(names.events).updateOne({ _id: stored._id }, { $set: { timestamp: stored.timestamp } });
    expect((await new MongoSessionService({ client, dbName }).getSession(key))?.state).toEqual({ a: 1, b: 2 });
  });
});

describe('heads whose lastUpdateTime was changed to something that is not a number', () => {
  it('are listed (as of time 0) and counted, on every page, in both orders, for the app and for their user', async () => {
    const service = new MongoSessionService({ client, dbName });
    const appName = uniqueApp();
    for (const [index, sessionId] of ['a', 'b', 'c', 'd', 'e', 'f', 'g'].entries()) {
      const userId = index % 2 === 0 ? 'u' : 'v';
      const created = await service.createSession({ appName, userId, sessionId });
      // user: and app: keys, so that the user and app buckets (which have no time) exist.
      await service.appendEvent({
        session: created,
        event: event({ n: index, 'user:last': index, 'app:last': index }),
      });
    }
    const sessions = client.db(dbName).collection(names.sessions);
    const damage = async (user: string, id: string, value: unknown) =>
      sessions.updateOne(
        { _id: { app: appName, user, id } as never },
        value === undefined ? { $unset: { lastUpdateTime: '' } } : { $set: { lastUpdateTime: value } },
      );
    await damage('u', 'c', 'then');
    await damage('v', 'b', new Date(0));
    // Null and removed: the index holds both as a bucket's missing time.
    await damage('v', 'f', null);
    await damage('u', 'g', undefined);
    const pageIds = async (order: 'asc' | 'desc', userId?: string) => {
      const seen: string[] = [];
      for (let page = 1; page <= 6; page++) {
        const listed = await service.listSessions({ appName, ...(userId ? { userId } : {}), order, page, limit: 2 });
        expect(listed.totalItems).toBe(userId === 'u' ? 4 : userId === 'v' ? 3 : 7);
        seen.push(...listed.sessions.map((session) => session.id));
      }
      return seen;
    };
    // Damaged first ascending (their time reads as 0), last descending; the others by their times.
    const asc = await pageIds('asc');
    expect(asc.slice(0, 4).sort()).toEqual(['b', 'c', 'f', 'g']);
    expect(asc.slice(4)).toEqual(['a', 'd', 'e']);
    const desc = await pageIds('desc');
    expect(desc.slice(0, 3)).toEqual(['e', 'd', 'a']);
    expect(desc.slice(3).sort()).toEqual(['b', 'c', 'f', 'g']);
    const mine = await pageIds('asc', 'u');
    expect(mine.slice(0, 2).sort()).toEqual(['c', 'g']);
    expect(mine.slice(2)).toEqual(['a', 'e']);
    const theirs = await pageIds('desc', 'v');
    expect(theirs[0]).toBe('d');
    expect(theirs.slice(1).sort()).toEqual(['b', 'f']);
    const whole = await service.listSessions({ appName });
    expect(whole.sessions.map((session) => [session.id, session.lastUpdateTime === 0])).toEqual([
      ...asc.slice(0, 4).map((id) => [id, true]),
      ['a', false],
      ['d', false],
      ['e', false],
    ]);
    // No bucket is listed: the user and app buckets have no time either.
    expect(await sessions.countDocuments({ '_id.app': appName, '_id.id': { $exists: false } })).toBeGreaterThan(0);
    for (const sessionId of ['f', 'g']) {
      const userId = sessionId === 'f' ? 'v' : 'u';
      expect((await failure(service.getSession({ appName, userId, sessionId }))).kind).toBe('unreadable-data');
    }
    // Their reads fail as unreadable data; the listing gave the state that reads.
    expect((await failure(service.getSession({ appName, userId: 'u', sessionId: 'c' }))).kind).toBe('unreadable-data');
    expect(whole.sessions.find((session) => session.id === 'c')?.state).toEqual({
      n: 2,
      'user:last': 6,
      'app:last': 6,
    });
  });
});

describe('listSessionKeys', () => {
  it("names every head of the app, one whose lastUpdateTime and sortId were both removed too (the listing's indexes read it as a bucket); never a bucket", async () => {
    const service = new MongoSessionService({ client, dbName });
    const appName = uniqueApp();
    for (const [userId, sessionId] of [
      ['u', 'a'],
      ['u', 'bare'],
      ['v', 'b'],
      ['v.dot', 'c$'],
    ] as const) {
      const created = await service.createSession({ appName, userId, sessionId });
      await service.appendEvent({ session: created, event: event({ 'user:seen': true, 'app:seen': true }) });
    }
    await service.createSession({ appName: `${appName}-other`, userId: 'u', sessionId: 'elsewhere' });
    await client
      .db(dbName)
      .collection(names.sessions)
      .updateOne(
        { _id: { app: appName, user: 'u', id: 'bare' } as never },
        { $unset: { lastUpdateTime: '', sortId: '' } },
      );
    expect((await service.listSessions({ appName })).sessions.map((session) => session.id)).toEqual(['a', 'b', 'c$']);
    expect(await service.store.listSessionKeys(appName, undefined)).toEqual([
      { userId: 'u', sessionId: 'a' },
      { userId: 'u', sessionId: 'bare' },
      { userId: 'v', sessionId: 'b' },
      { userId: 'v.dot', sessionId: 'c$' },
    ]);
    expect(await service.store.listSessionKeys(appName, 'u')).toEqual([
      { userId: 'u', sessionId: 'a' },
      { userId: 'u', sessionId: 'bare' },
    ]);
    expect(await service.store.listSessionKeys(appName, 'nobody')).toEqual([]);
    expect((await failure(service.getSession({ appName, userId: 'u', sessionId: 'bare' }))).kind).toBe(
      'unreadable-data',
    );
  });
});
