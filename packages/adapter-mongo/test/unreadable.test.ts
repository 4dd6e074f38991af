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
