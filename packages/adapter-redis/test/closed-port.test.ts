/**
 * A service made from a `url` where nothing listens (a loopback port bound
 * and closed again): every call rejects with a BackendError well within its
 * deadline, says that nothing was written, names the connection error, and
 * the process sees no unhandled rejection and no "[ioredis] Unhandled error
 * event"; close() then resolves.
 */
import type { Session } from '@google/adk';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { freePort, type Settled, settleWithin, testEvent } from './support/index.js';

const TIMEOUT_MS = 3_000;
/** How long a call may take in all: the deadline and a margin for a loaded machine. */
const LIMIT_MS = 8_000;

/** Settles `promise` and times it; never waits past `LIMIT_MS`. */
function settle(promise: Promise<unknown>): Promise<Settled> {
  return settleWithin(promise, LIMIT_MS);
}

describe('a service made from the url of a closed port', () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  let printed: string[];

  beforeEach(() => {
    unhandled.length = 0;
    printed = [];
    process.on('unhandledRejection', onUnhandled);
    const record = (...args: unknown[]) => {
      printed.push(args.map(String).join(' '));
    };
    vi.spyOn(console, 'error').mockImplementation(record);
    vi.spyOn(console, 'warn').mockImplementation(record);
    const write = process.stderr.write.bind(process.stderr);
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: unknown, ...rest: unknown[]) => {
      printed.push(String(chunk));
      return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
    });
  });
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled);
    vi.restoreAllMocks();
  });

  it('rejects every call with a not-applied BackendError within 8 s, prints nothing, and closes', async () => {
    const port = await freePort();
    const service = new RedisSessionService({ url: `redis://127.0.0.1:${port}`, timeoutMs: TIMEOUT_MS });
    const key = { appName: 'app', userId: 'u', sessionId: 's' };
    const session: Session = { id: 's', appName: 'app', userId: 'u', state: {}, events: [], lastUpdateTime: 0 };
    const calls: Record<string, () => Promise<unknown>> = {
      createSession: () => service.createSession({ ...key, state: { a: 1 } }),
      getSession: () => service.getSession(key),
      listSessions: () => service.listSessions({ appName: 'app' }),
      deleteSession: () => service.deleteSession(key),
      appendEvent: () => service.appendEvent({ session, event: testEvent({ a: 2 }) }),
      getUserState: () => service.getUserState({ appName: 'app', userId: 'u' }),
      getAppState: () => service.getAppState({ appName: 'app' }),
    };
    const outcomes = await Promise.all(
      Object.entries(calls).map(async ([name, call]) => [name, await settle(call())] as const),
    );
    for (const [name, outcome] of outcomes) {
      expect(outcome.settled, `${name} settles within ${LIMIT_MS} ms`).toBe(true);
      expect(outcome.ms, name).toBeLessThan(LIMIT_MS);
      expect([outcome.error?.name, outcome.error?.code], name).toEqual(['BackendError', 'BACKEND_ERROR']);
      // Nothing could reach a server that is not there, and the error says so.
      expect(outcome.error?.mayHaveApplied, name).toBe(false);
      expect(outcome.error?.message, name).toMatch(/ECONNREFUSED/);
      expect(outcome.error?.message, name).toMatch(/Nothing was written/);
    }
    // Calls made later fail the same way (the client keeps reconnecting, with a capped backoff).
    const later = await settle(service.getSession(key));
    expect(later.error?.code).toBe('BACKEND_ERROR');
    expect(later.ms).toBeLessThan(LIMIT_MS);

    const closed = await settle(service.close());
    expect(closed).toMatchObject({ settled: true, error: undefined });
    expect(service.client.status).toBe('end');
    // Give a stray rejection or a late error event the chance to show up.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(unhandled).toEqual([]);
    expect(printed.filter((line) => /Unhandled error event|ioredis/i.test(line))).toEqual([]);
  });

  it('also rejects in time when the deadline is shorter than a connection attempt', async () => {
    // A port that takes connections and never answers them: the deadline ends each call.
    const { createServer } = await import('node:net');
    const sockets = new Set<import('node:net').Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address() as import('node:net').AddressInfo;
    const service = new RedisSessionService({ url: `redis://127.0.0.1:${address.port}`, timeoutMs: 500 });
    try {
      const outcome = await settle(service.createSession({ appName: 'app', userId: 'u', sessionId: 's' }));
      expect(outcome.settled).toBe(true);
      expect(outcome.error).toMatchObject({ code: 'BACKEND_ERROR', timedOut: true });
      // It waited in the client's queue for a connection that never became ready: it may still be sent later.
      expect(outcome.error?.mayHaveApplied).toBe(true);
      const read = await settle(service.getSession({ appName: 'app', userId: 'u', sessionId: 's' }));
      expect(read.error).toMatchObject({ code: 'BACKEND_ERROR', timedOut: true, mayHaveApplied: false });
      expect(await settle(service.close())).toMatchObject({ settled: true, error: undefined });
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
    expect(unhandled).toEqual([]);
    expect(printed.filter((line) => /Unhandled error event|ioredis/i.test(line))).toEqual([]);
  });
});
