/** The benchmark seeder writes exactly the documents the service's own calls write. */
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoSessionService } from '../src/index.js';
import { seedHistory, seedSessions } from '../src/seed.js';
import { dropDatabase, event, mongoUrl, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('seed');
let client: MongoClient;
let service: MongoSessionService;

beforeAll(async () => {
  client = new MongoClient(mongoUrl());
  service = new MongoSessionService({ client, dbName, now: () => 5_000 });
});

afterAll(async () => {
  await client.close();
  await dropDatabase(dbName);
});

async function stored(appName: string, sessionId: string) {
  const db = client.db(dbName);
  const sessions = db.collection('adk_sessions');
  const head = await sessions.findOne({ _id: { app: appName, user: 'u1', id: sessionId } as never });
  if (!head) throw new Error(`no session ${appName}/${sessionId}`);
  const events = await db
    .collection('adk_events')
    .find({ '_id.app': appName, '_id.user': 'u1', '_id.session': sessionId })
    .sort({ seq: 1 })
    .toArray();
  // Each session starts at its own random revision: compare revisions and positions from there.
  const first = (head.revision as number) - events.length;
  return {
    // The log mark is random per creation, a write's token random per writer: compare that there is one.
    head: {
      ...head,
      revision: head.revision - first,
      logMark: typeof head.logMark,
      written: { rev: head.written.rev - first, token: typeof head.written.token },
      _id: { ...head._id, app: 'app' },
    },
    events: events.map(({ _id, seq, rev, w, ...fields }) => ({
      id: _id.id,
      seq: seq - first,
      rev: rev - first,
      w: typeof w,
      ...fields,
    })),
    user: (await sessions.findOne({ _id: { app: appName, user: 'u1' } as never }))?.state,
    app: (await sessions.findOne({ _id: { app: appName, user: null } as never }))?.state,
  };
}

describe('the benchmark seeder', () => {
  it('writes the documents that createSession and appendEvent write', async () => {
    const history = [event({ a: 1, 'user:u': 1 }), event({ 'app:x': [1], 'temp:t': 1 }), event({ a: 2 })];
    const viaService = uniqueApp();
    const session = await service.createSession({ appName: viaService, userId: 'u1', sessionId: 's1' });
    for (const appended of history) await service.appendEvent({ session, event: structuredClone(appended) });
    const seeded = uniqueApp();
    const stripped = history.map((appended) => {
      const copy = structuredClone(appended);
      delete (copy.actions.stateDelta as Record<string, unknown>)['temp:t'];
      return copy;
    });
    await seedHistory(service.store, { appName: seeded, userId: 'u1', sessionId: 's1' }, stripped, 5_000);
    expect(await stored(seeded, 's1')).toEqual(await stored(viaService, 's1'));
    const loaded = await service.getSession({ appName: seeded, userId: 'u1', sessionId: 's1' });
    expect(loaded?.events.map((e) => e.id)).toEqual(history.map((e) => e.id));
    expect(loaded?.state).toEqual({ a: 2, 'user:u': 1, 'app:x': [1] });
  });

  it('seeds many sessions that list in update order', async () => {
    const appName = uniqueApp();
    await seedSessions(service.store, appName, ['u1', 'u2'], 2500, 1_000);
    const page = await service.listSessions({ appName, userId: 'u2', limit: 3, page: 2 });
    expect(page.totalItems).toBe(1250);
    expect(page.sessions.map((s) => s.lastUpdateTime)).toEqual([1_007, 1_009, 1_011]);
  });
});
