/**
 * Honest outcomes: a failed write says "not applied" (`mayHaveApplied:
 * false`) only when its command never left the client, and "may have been
 * applied" whenever it was written to a connection. A client passed in keeps
 * its listeners as they were. Runs on a server of its own (it pauses client writes).
 */
import { randomUUID } from 'node:crypto';
import { BackendError } from '@adk-state/core';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisSessionService, RedisStore } from '../src/index.js';
import { freePort, hasRedisServer, type RedisServer, startRedisServer } from './support/index.js';

const available = await hasRedisServer();

interface Failure {
  code?: string;
  message?: string;
  mayHaveApplied?: boolean;
  timedOut?: boolean;
}

const failureOf = (promise: Promise<unknown>): Promise<Failure | undefined> =>
  promise.then(
    () => undefined,
    (error: unknown) => error as Failure,
  );

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!available)('honest outcomes of failed writes (server of its own)', () => {
  let server: RedisServer;
  let admin: Redis;
  let reader: RedisSessionService;
  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
    reader = new RedisSessionService({ client: admin });
  });
  afterAll(async () => {
    await admin?.quit();
    await server?.stop();
  });

  const key = () => ({ appName: `app-${randomUUID()}`, userId: 'u', sessionId: 's' });

  it('a client that has ended: not applied, and nothing is sent', async () => {
    const client = new Redis(server.url);
    await client.quit();
    const service = new RedisSessionService({ client });
    const failure = await failureOf(service.createSession(key()));
    expect(failure).toMatchObject({ code: 'BACKEND_ERROR', mayHaveApplied: false });
    expect(failure?.message).toMatch(/Connection is closed/);
    expect(failure?.message).toMatch(/Nothing was written/);
  });

  it('a client without an offline queue that is not connected yet: not applied, and indeed not stored', async () => {
    const client = new Redis(server.url, { lazyConnect: true, enableOfflineQueue: false });
    // Its own handshake meets the same refusal while it connects.
    client.on('error', () => {});
    try {
      const service = new RedisSessionService({ client });
      const target = key();
      const failure = await failureOf(service.createSession({ ...target, state: { a: 1 } }));
      expect(failure).toMatchObject({ code: 'BACKEND_ERROR', mayHaveApplied: false });
      expect(failure?.message).toMatch(/enableOfflineQueue/);
      expect(await reader.getSession(target)).toBeUndefined();
    } finally {
      client.disconnect();
    }
  });

  it("a client passed in that cannot connect: not applied, and the client's listeners stay as they were", async () => {
    const port = await freePort();
    const client = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 1, retryStrategy: () => 20 });
    client.on('error', () => {});
    try {
      const before = { error: client.listenerCount('error'), ready: client.listenerCount('ready') };
      // Many services on one client: while their commands wait, the client has one listener more, not one each.
      const services = Array.from({ length: 12 }, () => new RedisSessionService({ client }));
      expect({ error: client.listenerCount('error'), ready: client.listenerCount('ready') }).toEqual(before);
      const pending = Promise.all(
        services.flatMap((service) => [
          failureOf(service.createSession(key())),
          failureOf(service.deleteSession(key())),
        ]),
      );
      expect(client.listenerCount('ready')).toBe(before.ready + 1);
      const failures = await pending;
      for (const failure of failures) {
        expect(failure).toMatchObject({ code: 'BACKEND_ERROR', mayHaveApplied: false });
        expect(failure?.message).toMatch(/the client gave up on the command/i);
      }
      expect({ error: client.listenerCount('error'), ready: client.listenerCount('ready') }).toEqual(before);
    } finally {
      client.disconnect();
    }
  });

  it('a command written to a connection that then dies: may have been applied', async () => {
    const connectionName = `adk-outcome-${randomUUID().slice(0, 8)}`;
    const client = new Redis(server.url, { maxRetriesPerRequest: 0, connectionName, retryStrategy: () => 5 });
    client.on('error', () => {});
    try {
      const service = new RedisSessionService({ client });
      const target = key();
      await service.createSession({ ...target, sessionId: 'warm-up' });
      await admin.call('client', 'pause', '10000', 'WRITE');
      const outcome = failureOf(service.createSession(target));
      await sleep(50);
      const list = String(await admin.call('client', 'list'));
      const id = list
        .split('\n')
        .find((line) => line.includes(` name=${connectionName} `))
        ?.match(/(?:^| )id=(\d+)/)?.[1];
      expect(id).toBeDefined();
      await admin.call('client', 'kill', 'id', id as string);
      const failure = await outcome;
      await admin.call('client', 'unpause');
      expect(failure).toMatchObject({ code: 'BACKEND_ERROR', mayHaveApplied: true });
      expect(failure?.message).toMatch(/may have been applied/);
    } finally {
      await admin.call('client', 'unpause');
      client.disconnect();
    }
  });

  it('a store call abandoned before its command was sent: not applied, timed out, nothing sent', async () => {
    const store = new RedisStore(admin as never, { keyPrefix: `adk-outcome-${randomUUID()}:` });
    const controller = new AbortController();
    controller.abort();
    const sessionKey = key();
    const input = {
      key: sessionKey,
      state: new Map(),
      userDelta: new Map(),
      appDelta: new Map(),
      createTime: Date.now(),
      revision: 1,
    };
    const failure = await failureOf(store.createSession(input, { signal: controller.signal, deadline: Date.now() }));
    expect(failure).toBeInstanceOf(BackendError);
    expect(failure).toMatchObject({ mayHaveApplied: false, timedOut: true });
    expect(await store.loadSession(sessionKey, {})).toBeUndefined();
    // A live call counts its round trips for the call's span.
    const usage = { roundTrips: 0, bytes: 0 };
    const live = new AbortController();
    expect(
      await store.createSession(input, { signal: live.signal, deadline: Date.now() + 10_000, usage }),
    ).toMatchObject({
      status: 'created',
    });
    expect(usage.roundTrips).toBeGreaterThanOrEqual(1);
  });
});
