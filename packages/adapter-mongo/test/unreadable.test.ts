/**
 * Documents changed outside adk-state (a revision or time that is not a
 * number, a state field that is not JSON text, an event without its text):
 * reads fail with a BackendError of kind 'unreadable-data' that says nothing
 * was written, an append built on the right revision neither lands nor
 * claims to, and the session reads again once put right.
 */
import { BackendError } from '@adk-state/core';
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

async function failure(promise: Promise<unknown>): Promise<BackendError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(BackendError);
  return error as BackendError;
}

describe('MongoDB documents changed outside adk-state', () => {
  it('fail reads and appends as unreadable data, with nothing written, and read again once put right', async () => {
    const service = (options = {}) => new MongoSessionService({ client, dbName, ...options });
    const appName = uniqueApp();
    const key = { appName, userId: 'u', sessionId: 's' };
    const created = await service().createSession({ ...key, state: { a: 1 } });
    await service().appendEvent({ session: created, event: event({ b: 2 }) });
    const db = client.db(dbName);
    const sessions = db.collection(names.sessions);
    const events = db.collection(names.events);
    const headId = { _id: { app: appName, user: 'u', id: 's' } as never };
    const eventFilter = { '_id.app': appName, '_id.user': 'u', '_id.session': 's' };
    const head = (await sessions.findOne(headId)) as Document;
    const stored = (await events.findOne(eventFilter)) as Document;
    const onHead = (fields: Document) => () => sessions.updateOne(headId, { $set: fields });
    const onEvent = (fields: Document) => () => events.updateOne({ _id: stored._id }, { $set: fields });
    const damages: Array<[string, () => Promise<unknown>, () => Promise<unknown>]> = [
      ['revision', onHead({ revision: 'seven' }), onHead({ revision: head.revision })],
      ['lastUpdateTime', onHead({ lastUpdateTime: 'now' }), onHead({ lastUpdateTime: head.lastUpdateTime })],
      ['a state field', onHead({ 'state.a': 5 }), onHead({ 'state.a': '1' })],
      ['the state', onHead({ state: 'all' }), onHead({ state: head.state })],
      ['an event text', onEvent({ json: 12 }), onEvent({ json: stored.json })],
      ['an event time', onEvent({ timestamp: 'then' }), onEvent({ timestamp: stored.timestamp })],
    ];
    for (const [label, damage, repair] of damages) {
      const held = (await service().getSession(key))!;
      await damage();
      for (const reader of [service(), service({ logCacheBytes: 0 })]) {
        const error = await failure(reader.getSession(key));
        expect(error.kind, label).toBe('unreadable-data');
        expect(error.mayHaveApplied, label).toBe(false);
      }
      // A listing shows the session with what can be read of it (and warns). It ranges over the numeric
      // lastUpdateTime, so a session whose time is not a number falls out of it (as the buckets beside
      // the sessions, which have none).
      const listed = (await service().listSessions({ appName })).sessions;
      expect(
        listed.map((session) => session.id),
        label,
      ).toEqual(label === 'lastUpdateTime' ? [] : ['s']);
      if (label === 'revision') {
        // Built on the right revision, the append finds another one stored, and cannot reload.
        const error = await failure(
          service({ onStale: 'reload' }).appendEvent({ session: held, event: event({ c: 3 }) }),
        );
        expect(error.kind, label).toBe('unreadable-data');
        expect(error.mayHaveApplied, label).toBe(false);
        expect(await events.countDocuments(eventFilter), label).toBe(1);
      }
      await repair();
      expect((await service().getSession(key))?.state, label).toEqual({ a: 1, b: 2 });
    }
  });
});
