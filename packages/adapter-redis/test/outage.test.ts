/**
 * A paused Redis (SIGSTOP): every call rejects at its deadline with a
 * BackendError that says a write may have been applied (the commands were
 * written to a live connection, and a paused server runs them once it is
 * resumed); after SIGCONT the same service works, every write was applied
 * whole, and close() never hangs on a paused server. Runs on a server of its
 * own, with a client made from `url` and with a client passed in.
 */
import { randomUUID } from 'node:crypto';
import type { Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import {
  hasRedisServer,
  type RedisServer,
  type Settled,
  settleWithin,
  startRedisServer,
  testEvent,
} from './support/index.js';

const available = await hasRedisServer();
const TIMEOUT_MS = 2_000;
/** The deadline plus a margin for a loaded machine. */
const LIMIT_MS = TIMEOUT_MS + 3_000;

/** Settles `promise` and times it; never waits past `LIMIT_MS` and 5 s more. */
function failureOf(promise: Promise<unknown>): Promise<Settled> {
  return settleWithin(promise, LIMIT_MS + 5_000);
}

async function eventually<T>(attempt: () => Promise<T>): Promise<T> {
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

describe.skipIf(!available)('a paused server (server of its own)', () => {
  let server: RedisServer;
  let given: Redis;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);

  beforeAll(async () => {
    server = await startRedisServer();
    given = new Redis(server.url);
  });
  afterAll(async () => {
    server?.resume();
    given?.disconnect();
    await server?.stop();
  });
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    // Whatever a test did, the server runs again for the next one.
    server.resume();
    process.off('unhandledRejection', onUnhandled);
  });

  const variants = [
    ['a client made from url', () => new RedisSessionService({ url: server.url, timeoutMs: TIMEOUT_MS })],
    ['a client passed in', () => new RedisSessionService({ client: given, timeoutMs: TIMEOUT_MS })],
  ] as const;

  for (const [label, make] of variants) {
    it(`with ${label}: calls reject at the deadline, may-have-applied writes were applied whole, the service recovers`, async () => {
      const service = make();
      try {
        const appName = `app-${randomUUID()}`;
        const key = { appName, userId: 'u1', sessionId: 's1' };
        const session = await service.createSession({ ...key, state: { n: 0 } });
        await service.appendEvent({ session, event: testEvent({ n: 1 }) });
        await service.createSession({ ...key, sessionId: 'doomed' });
        // Every write script is known to the server before it pauses. (A script it lacks is answered
        // NOSCRIPT once it runs again, and an abandoned call never sends it in full: nothing applied.)
        await service.deleteSession({ ...key, sessionId: 'never-created' });

        const calls: Record<string, () => Promise<unknown>> = {
          createSession: () => service.createSession({ ...key, sessionId: 'born', state: { b: 1 } }),
          appendEvent: () => service.appendEvent({ session, event: testEvent({ n: 2, 'user:n': 2, 'app:n': 2 }) }),
          deleteSession: () => service.deleteSession({ ...key, sessionId: 'doomed' }),
          getSession: () => service.getSession(key),
          listSessions: () => service.listSessions({ appName }),
          getUserState: () => service.getUserState(key),
          getAppState: () => service.getAppState({ appName }),
        };
        await server.pause();
        let outcomes: Array<[string, Awaited<ReturnType<typeof failureOf>>]>;
        try {
          outcomes = await Promise.all(
            Object.entries(calls).map(async ([name, call]) => [name, await failureOf(call())] as [string, never]),
          );
        } finally {
          server.resume();
        }
        for (const [name, outcome] of outcomes) {
          expect(outcome.settled, name).toBe(true);
          expect(outcome.ms, name).toBeLessThan(LIMIT_MS);
          expect(outcome.error, name).toMatchObject({ name: 'BackendError', code: 'BACKEND_ERROR', timedOut: true });
          const write = ['createSession', 'appendEvent', 'deleteSession'].includes(name);
          expect(outcome.error?.mayHaveApplied, name).toBe(write);
          if (write) expect(outcome.error?.message, name).toMatch(/may have been applied/);
        }

        // Resumed, the server ran every command it had been sent, each one whole.
        const stored = (await eventually(() => service.getSession(key))) as Session;
        expect(stored.events).toHaveLength(2);
        expect(JSON.parse(JSON.stringify(stored.state))).toEqual({ n: 2, 'user:n': 2, 'app:n': 2 });
        const born = await service.getSession({ ...key, sessionId: 'born' });
        expect(JSON.parse(JSON.stringify(born?.state))).toEqual({ b: 1, 'user:n': 2, 'app:n': 2 });
        expect(await service.getSession({ ...key, sessionId: 'doomed' })).toBeUndefined();
        // The caller's session object missed the append that was applied: it is stale now, and says so.
        await expect(service.appendEvent({ session, event: testEvent({ n: 3 }) })).rejects.toMatchObject({
          code: 'STALE_SESSION',
        });
        await service.appendEvent({ session: stored, event: testEvent({ n: 3 }) });
        expect((await service.getSession(key))?.state.n).toBe(3);
        expect(unhandled).toEqual([]);
      } finally {
        await service.close();
      }
    });
  }

  it('close() of a service made from url resolves while the server is paused, and its waiting call fails', async () => {
    const service = new RedisSessionService({ url: server.url, timeoutMs: Number.POSITIVE_INFINITY });
    const appName = `app-${randomUUID()}`;
    await service.createSession({ appName, userId: 'u', sessionId: 's' });
    await server.pause();
    try {
      const waiting = failureOf(service.getSession({ appName, userId: 'u', sessionId: 's' }));
      const closed = await failureOf(service.close());
      expect(closed).toMatchObject({ settled: true, error: undefined });
      expect(closed.ms).toBeLessThan(LIMIT_MS + 2_000);
      expect(service.client.status).toBe('end');
      // No deadline at all: only the closed connection ends this call.
      expect((await waiting).error).toMatchObject({ code: 'BACKEND_ERROR', mayHaveApplied: false });
    } finally {
      server.resume();
    }
    expect(unhandled).toEqual([]);
  });
});
