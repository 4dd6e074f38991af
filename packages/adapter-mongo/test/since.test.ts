/**
 * Reads of a session read before, beyond the conformance suite's lost-writes
 * test: the token of the write at the held revision (`SessionDoc.written`,
 * `EventDoc.w`) next to writes by a version of the adapter without it, which
 * leave the head's token at an older revision and their events without one.
 */
import type { Session } from '@google/adk';
import { type Document, MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoSessionService } from '../src/index.js';
import { collectionNames, eventId, sessionId } from '../src/layout.js';
import { mongoLostWrites } from './damage.js';
import { dropDatabase, event, mongoUrl, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('since');
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

const texts = (session: Session | undefined) => session?.events.map((e) => e.content?.parts?.[0]?.text);

/**
 * A session written by `writer`, read by `reader` (which keeps what it read)
 * and by `plain` (which keeps nothing: the reference), with the writes of
 * either version of the adapter.
 */
async function cast() {
  const writer = new MongoSessionService({ client, dbName });
  const reader = new MongoSessionService({ client, dbName });
  const plain = new MongoSessionService({ client, dbName, logCacheBytes: 0 });
  const key = { appName: uniqueApp(), userId: 'u', sessionId: 's' };
  const db = client.db(dbName);
  const head = { _id: sessionId(key.appName, key.userId, key.sessionId) } as Document;
  let session = await writer.createSession({ ...key, state: { n: 0 } });
  const put = async (n: number, text: string) => {
    const added = event({ n }, { content: { role: 'model', parts: [{ text }] } });
    await writer.appendEvent({ session, event: added });
    return added;
  };
  /** What an append of a version without the token leaves: no token on its event, the head's for an older revision. */
  const asOldWriter = async (n: number, text: string) => {
    const before = (await db.collection(names.sessions).findOne(head)) as Document;
    const added = await put(n, text);
    await db
      .collection(names.events)
      .updateOne({ _id: eventId(key.appName, key.userId, key.sessionId, added.id) } as Document, {
        $unset: { w: '' },
      });
    await db
      .collection(names.sessions)
      .updateOne(head, before.written ? { $set: { written: before.written } } : { $unset: { written: '' } });
  };
  const same = async (label: string) => {
    const [held, fresh] = [await reader.getSession(key), await plain.getSession(key)];
    expect(texts(held), label).toEqual(texts(fresh));
    expect(held?.state, label).toEqual(fresh?.state);
    return held;
  };
  /** The writer goes on from what is stored now (after a rollback, say). */
  const reload = async () => {
    session = (await plain.getSession(key)) as Session;
  };
  return { writer, plain, key, put, asOldWriter, same, reload, session: () => session };
}

describe('a reader that holds a session, and writers with and without the write token', () => {
  it('reads what a plain read reads after each kind of write, and nothing when nothing changed', async () => {
    const { writer, plain, key, put, asOldWriter, same, session } = await cast();
    for (let n = 1; n <= 3; n++) await put(n, `turn ${n}`);
    await same('read first');
    // Nothing written since: the head's token is the held one.
    expect(texts(await same('read again'))).toEqual(['turn 1', 'turn 2', 'turn 3']);
    await asOldWriter(4, 'turn 4, old writer');
    await same('after a write without the token');
    await asOldWriter(5, 'turn 5, old writer');
    await same('after another');
    await same('read again after it');
    await put(6, 'turn 6');
    await same('after a write with the token');
    // An id appended again, in place: the reader reads the session whole again.
    const old = (await plain.getSession(key)) as Session;
    const second = old.events[1];
    const rewritten = event(
      { n: 7 },
      { id: second?.id, content: { role: 'model', parts: [{ text: 'turn 2 again' }] } },
    );
    await writer.appendEvent({ session: session(), event: rewritten });
    const read = await same('after a write in place');
    expect(texts(read)?.[1]).toBe('turn 2 again');
    expect(read?.events).toHaveLength(6);
  });

  it('a copy read after a write without a token is read whole once that write is lost and another made with one', async () => {
    for (const further of [0, 1]) {
      const { key, put, asOldWriter, same, reload } = await cast();
      const rollback = mongoLostWrites(() => client, dbName);
      await put(1, 'turn 1');
      const restore = await rollback.snapshot(key);
      await asOldWriter(2, 'turn 2, old writer, lost');
      await same('read after the old write');
      await restore();
      await reload();
      // The same revision again, by a writer with tokens (and, the second time, one more write past it).
      await put(2, 'turn 2 after the loss');
      if (further) await put(3, 'turn 3');
      const read = await same(`after the loss, ${further} write(s) past the held revision`);
      expect(texts(read)?.[1]).toBe('turn 2 after the loss');
    }
  });

  it('a head whose token was lost with its write, at the same revision as the held copy, makes the read whole', async () => {
    const writer = new MongoSessionService({ client, dbName });
    const reader = new MongoSessionService({ client, dbName });
    const key = { appName: uniqueApp(), userId: 'u', sessionId: 's' };
    const db = client.db(dbName);
    const head = { _id: sessionId(key.appName, key.userId, key.sessionId) } as Document;
    const session = await writer.createSession(key);
    await writer.appendEvent({ session, event: event({ n: 1 }) });
    expect((await reader.getSession(key))?.events).toHaveLength(1);
    // Another token at the held revision, as a write made there after a rollback leaves: the held copy is not trusted.
    await db.collection(names.sessions).updateOne(head, { $set: { 'written.token': 'another write' } });
    const eventDoc = { '_id.session': key.sessionId, '_id.app': key.appName } as Document;
    await db.collection(names.events).updateOne(eventDoc, {
      $set: { json: JSON.stringify({ ...session.events[0], invocationId: 'after the loss' }) },
    });
    expect((await reader.getSession(key))?.events[0]?.invocationId).toBe('after the loss');
  });
});
