/**
 * Failures are typed, bounded by the deadline and honest about what they
 * left behind, through both driver majors. Faults are injected with
 * MongoDB's `failCommand` fail point on a stand-in of each block's own: a
 * statement that fails before the commit leaves nothing, transient errors are
 * retried, an unanswered commit is retried or reported as possibly applied,
 * and a call abandoned at its deadline stops before its commit. A service
 * pointed at a closed port fails every call in bounded time.
 */
import { createServer } from 'node:net';
import { type StandIn, startStandIn } from '@adk-state/mongo-standin';
import type { Session } from '@google/adk';
import { MongoClient } from 'mongodb';
import { MongoClient as LowestMongoClient } from 'mongodb-lowest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MongoSessionService } from '../src/index.js';
import { event, uniqueApp } from './support.js';

/** The stand-in a test injects faults into (the one of the running block). */
let standIn: StandIn;
let admin: MongoClient;

type Mode = 'off' | 'alwaysOn' | { times: number };

async function failCommand(mode: Mode, data: Record<string, unknown> = {}): Promise<void> {
  await admin.db('admin').command({ configureFailPoint: 'failCommand', mode, data });
}

interface Failure {
  name: string;
  code: string;
  mayHaveApplied: boolean;
  timedOut: boolean;
  message: string;
}

async function failure(promise: Promise<unknown>): Promise<Failure> {
  try {
    await promise;
  } catch (error) {
    return error as Failure;
  }
  throw new Error('expected the call to fail');
}

/** Collects unhandled rejections while a test runs. */
function watchRejections(): { seen: unknown[]; stop(): void } {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => seen.push(reason);
  process.on('unhandledRejection', listener);
  return { seen, stop: () => process.off('unhandledRejection', listener) };
}

/**
 * Each driver on the path it takes: the current one on MongoDB 8.0 sends an
 * append as one `bulkWrite` command; on 7.0, and driver 6.0.0 anywhere,
 * an append starts with an `update` of the sessions collection.
 */
const drivers = [
  ['mongodb 7 on MongoDB 8.0', (url: string) => new MongoClient(url), '8.0', 'bulkWrite'],
  ['mongodb 7 on MongoDB 7.0', (url: string) => new MongoClient(url), '7.0', 'update'],
  [
    'mongodb 6.0.0 on MongoDB 8.0',
    (url: string) => new LowestMongoClient(url) as unknown as MongoClient,
    '8.0',
    'update',
  ],
] as const;

describe.each(drivers)('honest outcomes (%s)', (_name, makeClient, serverVersion, firstWrite) => {
  let client: MongoClient;

  beforeAll(async () => {
    standIn = await startStandIn({ ttlMonitorIntervalMs: 0, serverVersion });
    admin = new MongoClient(standIn.url);
    client = makeClient(standIn.url);
  });

  afterEach(async () => {
    await failCommand('off');
  });

  afterAll(async () => {
    await client.close();
    await admin.close();
    await standIn.stop();
  });

  /** A service on this driver's client, with one session holding one event. */
  async function fixture(timeoutMs = 10_000) {
    const service = new MongoSessionService({ client, dbName: 'outcomes', timeoutMs });
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    const session: Session = await service.createSession({ ...key, state: { n: 0 } });
    await service.appendEvent({ session, event: event({ n: 1 }) });
    const stored = async () => {
      const loaded = await service.getSession(key);
      return { events: loaded?.events.length, n: loaded?.state.n, user: await service.getUserState(key) };
    };
    return { service, key, session, stored };
  }

  /** Client sessions the service still holds: none once its calls have settled. */
  async function expectSessionsEnded(): Promise<void> {
    const active = (client as unknown as { s: { activeSessions: Set<unknown> } }).s.activeSessions;
    for (let waited = 0; active.size > 0 && waited < 5_000; waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(active.size).toBe(0);
  }

  it('a statement that fails before the commit reports the write as not applied, and nothing is', async () => {
    const { service, session, stored } = await fixture();
    await failCommand({ times: 1 }, { failCommands: [firstWrite], errorCode: 2 });
    const error = await failure(service.appendEvent({ session, event: event({ n: 2, 'user:u': 2 }) }));
    expect(error).toMatchObject({
      name: 'BackendError',
      code: 'BACKEND_ERROR',
      mayHaveApplied: false,
      timedOut: false,
    });
    expect(error.message).toContain('Nothing was written');
    expect(await stored()).toEqual({ events: 1, n: 1, user: {} });
    await expectSessionsEnded();
  });

  it('a document past 16 MiB is refused as mongod refuses it: not applied, the session as it was', async () => {
    const { service, key, session, stored } = await fixture();
    const big = 'x'.repeat(17 * 1024 * 1024);
    const appended = await failure(service.appendEvent({ session, event: event({ n: 2, big }) }));
    expect(appended).toMatchObject({ name: 'BackendError', mayHaveApplied: false, timedOut: false });
    expect(await stored()).toEqual({ events: 1, n: 1, user: {} });
    // A session's state that grows past the limit in steps: the step that would pass it is refused.
    const part = 'y'.repeat(6 * 1024 * 1024);
    await service.appendEvent({ session, event: event({ a: part }) });
    await service.appendEvent({ session, event: event({ b: part }) });
    const grown = await failure(service.appendEvent({ session, event: event({ c: part }) }));
    expect(grown).toMatchObject({ name: 'BackendError', mayHaveApplied: false, timedOut: false });
    const loaded = (await service.getSession(key)) as Session;
    expect(Object.keys(loaded.state).sort()).toEqual(['a', 'b', 'n']);
    expect(loaded.events).toHaveLength(3);
    const created = await failure(service.createSession({ ...key, sessionId: 'big', state: { big } }));
    expect(created).toMatchObject({ name: 'BackendError', mayHaveApplied: false });
    expect(await service.getSession({ ...key, sessionId: 'big' })).toBeUndefined();
    // The session takes the next append as if nothing had happened.
    await service.appendEvent({ session, event: event({ n: 3 }) });
    expect(await stored()).toEqual({ events: 4, n: 3, user: {} });
    await expectSessionsEnded();
  });

  it('a creation whose first statement fails is not applied', async () => {
    const { service, key } = await fixture();
    await failCommand({ times: 1 }, { failCommands: ['update'], errorCode: 2 });
    const error = await failure(service.createSession({ ...key, sessionId: 'new', state: { 'app:x': 1 } }));
    expect(error).toMatchObject({ name: 'BackendError', mayHaveApplied: false });
    expect(await service.getSession({ ...key, sessionId: 'new' })).toBeUndefined();
    expect(await service.getAppState(key)).toEqual({});
  });

  it('a transient error or a dropped connection before the commit is retried, and the write applied once', async () => {
    const { service, session, stored } = await fixture();
    await failCommand(
      { times: 1 },
      { failCommands: [firstWrite], errorCode: 112, errorLabels: ['TransientTransactionError'] },
    );
    await service.appendEvent({ session, event: event({ n: 2, 'user:u': 2 }) });
    expect(await stored()).toEqual({ events: 2, n: 2, user: { u: 2 } });
    await failCommand({ times: 1 }, { failCommands: [firstWrite], closeConnection: true });
    await service.appendEvent({ session, event: event({ n: 3 }) });
    expect(await stored()).toMatchObject({ events: 3, n: 3 });
  });

  it('a commit refused as transient runs the whole transaction again, once', async () => {
    const { service, session, stored } = await fixture();
    await failCommand(
      { times: 1 },
      { failCommands: ['commitTransaction'], errorCode: 251, errorLabels: ['TransientTransactionError'] },
    );
    await service.appendEvent({ session, event: event({ n: 2, 'user:u': 2 }) });
    expect(await stored()).toEqual({ events: 2, n: 2, user: { u: 2 } });
  });

  it('an unanswered commit is retried until it is answered, and the write applied once', async () => {
    const { service, session, stored } = await fixture();
    await failCommand({ times: 3 }, { failCommands: ['commitTransaction'], closeConnection: true });
    await service.appendEvent({ session, event: event({ n: 2 }) });
    expect(await stored()).toMatchObject({ events: 2, n: 2 });
  });

  it('a commit whose outcome stays unknown reports that the write may have been applied', async () => {
    const { service, session } = await fixture();
    await failCommand('alwaysOn', { failCommands: ['commitTransaction'], errorCode: 50 });
    const error = await failure(service.appendEvent({ session, event: event({ n: 2 }) }));
    expect(error).toMatchObject({ name: 'BackendError', mayHaveApplied: true, timedOut: false });
    expect(error.message).toContain('may have been applied');
    await failCommand('off');
    await expectSessionsEnded();
  });

  it('a call abandoned at its deadline stops before its commit: nothing applied, nothing left pending', async () => {
    const watch = watchRejections();
    try {
      const { service, session, stored } = await fixture(1_000);
      await failCommand({ times: 1 }, { failCommands: [firstWrite], blockConnection: true, blockTimeMS: 2_000 });
      const started = Date.now();
      const error = await failure(service.appendEvent({ session, event: event({ n: 2 }) }));
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(error).toMatchObject({ name: 'BackendError', timedOut: true, mayHaveApplied: true });
      // Past the stalled statement: the abandoned transaction never committed.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await stored()).toMatchObject({ events: 1, n: 1 });
      await expectSessionsEnded();

      await failCommand({ times: 1 }, { failCommands: ['find'], blockConnection: true, blockTimeMS: 2_000 });
      const read = await failure(service.getUserState({ appName: 'a', userId: 'u' }));
      expect(read).toMatchObject({ name: 'BackendError', timedOut: true, mayHaveApplied: false });
      await new Promise((resolve) => setTimeout(resolve, 1_500));

      // The same service and session object work on.
      await service.appendEvent({ session, event: event({ n: 2 }) });
      expect(await stored()).toMatchObject({ events: 2, n: 2 });
    } finally {
      watch.stop();
    }
    expect(watch.seen).toEqual([]);
  });
});

describe('a service whose server is gone', () => {
  it('rejects each call with a BackendError within 8 s, reads and writes as not applied, and closes', async () => {
    const port = await closedPort();
    const watch = watchRejections();
    const service = new MongoSessionService({
      url: `mongodb://127.0.0.1:${port}/?replicaSet=rs0`,
      dbName: 'gone',
      timeoutMs: 3_000,
    });
    const key = { appName: 'app', userId: 'u1', sessionId: 's1' };
    const session = { ...key, id: 's1', state: {}, events: [], lastUpdateTime: 0 } as unknown as Session;
    const calls: Record<string, () => Promise<unknown>> = {
      createSession: () => service.createSession(key),
      getSession: () => service.getSession(key),
      listSessions: () => service.listSessions({ appName: 'app' }),
      deleteSession: () => service.deleteSession(key),
      appendEvent: () => service.appendEvent({ session, event: event({ n: 1 }) }),
    };
    try {
      const started = Date.now();
      const outcomes = await Promise.all(
        Object.entries(calls).map(async ([name, call]) => [name, await failure(call())] as const),
      );
      expect(Date.now() - started).toBeLessThan(8_000);
      for (const [name, error] of outcomes) {
        expect(error, name).toMatchObject({ name: 'BackendError', code: 'BACKEND_ERROR', mayHaveApplied: false });
        expect(error.message, name).toContain(name);
      }
      await service.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      watch.stop();
    }
    expect(watch.seen).toEqual([]);
  });
});

/** A loopback port nothing listens on: bound once, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}
