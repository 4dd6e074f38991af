/**
 * A backend that is not there at all: the client points at a loopback port
 * that nothing listens on. Every call must fail typed, within its deadline,
 * and leave nothing behind that could end the host process.
 */
import net from 'node:net';
import { BackendError } from '@adk-state/core';
import { TEST_PROJECT_ID } from '@adk-state/test-servers/firestore/env';
import { createEvent, createEventActions, type Session } from '@google/adk';
import { Firestore } from '@google-cloud/firestore';
import { afterAll, expect, it } from 'vitest';
import { TRANSACTION_GRACE_MS } from '../src/calls.js';
import { FirestoreSessionService, FirestoreStore } from '../src/index.js';

/** A loopback port that was just bound and closed again: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
process.on('unhandledRejection', onUnhandled);
afterAll(() => {
  process.off('unhandledRejection', onUnhandled);
});

/** The codes of the process warnings emitted from now until `stop()` (delivered on a later tick, so it waits one). */
function warningsWhile(): { stop(): Promise<string[]> } {
  const codes: string[] = [];
  const onWarning = (warning: Error & { code?: string }) => codes.push(warning.code ?? warning.name);
  process.on('warning', onWarning);
  return {
    async stop() {
      await new Promise((resolve) => setImmediate(resolve));
      process.off('warning', onWarning);
      return codes;
    },
  };
}

/** A client of a loopback port (by default one that refuses connections). */
async function deadClient(port?: number): Promise<Firestore> {
  // The client reads FIRESTORE_EMULATOR_HOST when it is made, and prefers it to `host`: point it at the port.
  const emulatorHost = process.env.FIRESTORE_EMULATOR_HOST;
  process.env.FIRESTORE_EMULATOR_HOST = `127.0.0.1:${port ?? (await closedPort())}`;
  try {
    return new Firestore({
      projectId: TEST_PROJECT_ID,
      credentials: { client_email: 'test@example.com', private_key: 'dummy' },
    });
  } finally {
    process.env.FIRESTORE_EMULATOR_HOST = emulatorHost;
  }
}

it('with nothing listening, each method rejects with a BackendError within 8 s, nothing is left unhandled, and close() resolves', async () => {
  const firestore = await deadClient();
  const service = new FirestoreSessionService({ firestore, timeoutMs: 3_000 });
  const key = { appName: 'dead-app', userId: 'u1', sessionId: 's1' };
  const session: Session = { ...key, id: key.sessionId, state: {}, events: [], lastUpdateTime: 0 };
  const event = createEvent({
    invocationId: 'inv',
    author: 'agent',
    timestamp: Date.now(),
    actions: createEventActions({ stateDelta: { n: 1, 'user:n': 1, 'app:n': 1 } }),
  });
  const calls: Record<string, () => Promise<unknown>> = {
    createSession: () => service.createSession(key),
    getSession: () => service.getSession(key),
    listSessions: () => service.listSessions({ appName: key.appName }),
    deleteSession: () => service.deleteSession(key),
    appendEvent: () => service.appendEvent({ session, event }),
    getUserState: () => service.getUserState(key),
    getAppState: () => service.getAppState(key),
  };
  const outcomes = await Promise.all(
    Object.entries(calls).map(async ([name, call]) => {
      const started = Date.now();
      try {
        await call();
        return { name, error: undefined, ms: Date.now() - started };
      } catch (error) {
        return { name, error, ms: Date.now() - started };
      }
    }),
  );
  for (const { name, error, ms } of outcomes) {
    expect(error, name).toBeInstanceOf(BackendError);
    expect(ms, name).toBeLessThan(8_000);
    expect(typeof (error as BackendError).mayHaveApplied, name).toBe('boolean');
    if (['getSession', 'listSessions', 'getUserState', 'getAppState'].includes(name)) {
      expect((error as BackendError).mayHaveApplied, name).toBe(false);
    }
  }
  // The client still retries the abandoned calls' reads; close() waits for them to end, so that the
  // client is terminated with none of them in it. (A retry that finds the client terminated rejects
  // where nothing listens, "The client has already been terminated".)
  const warned = warningsWhile();
  await expect(service.close()).resolves.toBeUndefined();
  expect(await warned.stop()).toEqual([]);
  await firestore.terminate();
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  expect(unhandled).toEqual([]);
}, 90_000);

it('a client terminated without closing the service first, while it still retries the calls, leaves nothing unhandled', async () => {
  const firestore = await deadClient();
  const service = new FirestoreSessionService({ firestore, timeoutMs: 1_000 });
  const key = { appName: 'dead-app', userId: 'u1', sessionId: 's1' };
  const failed = await Promise.allSettled([
    service.getSession(key),
    service.listSessions({ appName: key.appName }),
    service.getUserState(key),
    service.createSession(key),
  ]);
  expect(failed.map((each) => each.status === 'rejected' && each.reason instanceof BackendError)).toEqual([
    true,
    true,
    true,
    true,
  ]);
  // Against the advice of the README (close() first): the client's retries of those reads then find it
  // terminated. They would come within about 10 s (five attempts, 1 s apart and growing).
  await firestore.terminate();
  await new Promise((resolve) => setTimeout(resolve, 12_000));
  expect(unhandled).toEqual([]);
}, 60_000);

it("once the deadline has passed, the store's own work against a dead backend ends too, with nothing unhandled", async () => {
  // The store alone, without the service's race against the deadline: every promise it returns settles.
  const store = new FirestoreStore({ firestore: await deadClient() });
  const call = () => ({ signal: AbortSignal.timeout(2_000), deadline: Date.now() + 2_000 });
  const key = { appName: 'dead-app', userId: 'u1', sessionId: 's1' };
  const bucket = (entries: Array<[string, string]>) => new Map(entries);
  const settled = await Promise.allSettled([
    store.createSession(
      {
        key,
        state: bucket([]),
        userDelta: bucket([['n', '1']]),
        appDelta: bucket([['n', '1']]),
        createTime: 1,
        revision: 1,
      },
      call(),
    ),
    store.appendEvent(
      {
        key,
        expectedRevision: 1,
        event: { id: 'e1', timestamp: 2, json: '{"id":"e1"}' },
        sessionDelta: bucket([['n', '2']]),
        userDelta: bucket([['n', '2']]),
        appDelta: bucket([['n', '2']]),
        lastUpdateTime: 2,
      },
      call(),
    ),
    store.loadSession(key, {}, call()),
    store.loadSession(key, { limit: 3 }, call()),
    store.listSessions({ appName: key.appName, order: 'asc', offset: 0, limit: 10 }, call()),
    store.deleteSession(key, call()),
    store.readUserState(key.appName, key.userId, call()),
    store.readAppState(key.appName, call()),
  ]);
  expect(settled.map((each) => each.status)).toEqual(Array(settled.length).fill('rejected'));
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(unhandled).toEqual([]);
}, 120_000);

/** A loopback server that accepts connections and never answers; `close()` drops them and stops it. */
async function silentServer(): Promise<{ port: number; close(): void }> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

it('against a server that never answers, close() gives up after closeWaitMs and says so in a warning', async () => {
  // A transaction's first read runs past the deadline (its grace).
  const server = await silentServer();
  const firestore = await deadClient(server.port);
  const service = new FirestoreSessionService({ firestore, timeoutMs: 500, closeWaitMs: 1_000 });
  await expect(service.createSession({ appName: 'silent-app', userId: 'u1', sessionId: 's1' })).rejects.toBeInstanceOf(
    BackendError,
  );
  const warned = warningsWhile();
  const started = Date.now();
  await service.close();
  const waited = Date.now() - started;
  expect(await warned.stop()).toEqual(['ADK_STATE_CALLS_RUNNING']);
  expect(waited).toBeGreaterThanOrEqual(900);
  expect(waited).toBeLessThan(5_000);
  // The client is left open here; the server goes, and the client's retries of the read end on their own.
  server.close();
  expect(unhandled).toEqual([]);
}, 30_000);

it("against a server that never answers, a transaction's work in the client ends within its grace and the client's pauses", async () => {
  const server = await silentServer();
  try {
    const store = new FirestoreStore({ firestore: await deadClient(server.port) });
    const started = Date.now();
    const deadline = started + 500;
    const write = store.createSession(
      {
        key: { appName: 'silent-app', userId: 'u1', sessionId: 's2' },
        state: new Map(),
        userDelta: new Map(),
        appDelta: new Map(),
        createTime: 1,
        revision: 1,
      },
      { signal: AbortSignal.timeout(500), deadline },
    );
    // The store's own promise (the service gives up at the deadline; this is what runs on in the client).
    await expect(write).rejects.toBeDefined();
    // Not minutes (the client's own bounds): the reads' grace, then the client's pauses between attempts.
    expect(Date.now() - deadline).toBeLessThan(TRANSACTION_GRACE_MS + 20_000);
    expect(unhandled).toEqual([]);
  } finally {
    server.close();
  }
}, 60_000);
