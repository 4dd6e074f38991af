/**
 * Connection loss: an operation whose connection is killed fails with a
 * BackendError that carries the client's error, and an append is never
 * half-applied. Runs on a server of its own (it pauses the server).
 */
import { randomUUID } from 'node:crypto';
import type { Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { hasRedisServer, type RedisServer, startRedisServer, testEvent } from './support/index.js';

const available = await hasRedisServer();

const event = (stateDelta: Record<string, unknown>) => testEvent(stateDelta);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!available)('connection loss (server of its own)', () => {
  let server: RedisServer;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
  });
  afterAll(async () => {
    await admin?.quit();
    await server?.stop();
  });

  /** A client that reports a lost request at once instead of re-sending it after reconnecting. */
  function failFastClient(connectionName: string): Redis {
    const client = new Redis(server.url, { maxRetriesPerRequest: 0, connectionName, retryStrategy: () => 5 });
    client.on('error', () => {});
    return client;
  }

  async function killConnections(connectionName: string): Promise<number> {
    const list = String(await admin.call('client', 'list'));
    let killed = 0;
    for (const line of list.split('\n')) {
      const id = /(?:^| )id=(\d+)/.exec(line)?.[1];
      if (id && line.includes(` name=${connectionName} `))
        killed += Number(await admin.call('client', 'kill', 'id', id));
    }
    return killed;
  }

  it('an append whose connection dies before the server ran it fails clearly and stores nothing', async () => {
    const client = failFastClient('adk-conn-paused');
    const service = new RedisSessionService({ client });
    const appName = `app-${randomUUID()}`;
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { n: 0 } });
    const pending = event({ n: 1, 'user:u': 1, 'temp:t': 1 });
    // Hold every write on the server, send the append, then cut its connection.
    await admin.call('client', 'pause', '10000', 'WRITE');
    const outcome = service.appendEvent({ session, event: pending }).then(
      () => undefined,
      (error: Error & { code?: string; cause?: unknown }) => error,
    );
    await sleep(50);
    expect(await killConnections('adk-conn-paused')).toBe(1);
    const error = await outcome;
    await admin.call('client', 'unpause');

    expect(error?.code).toBe('BACKEND_ERROR');
    expect(error?.name).toBe('BackendError');
    expect(error?.message).toMatch(/appendEvent/);
    expect(error?.cause).toBeInstanceOf(Error);
    // The caller's objects are as they were: the event keeps its temp: key, the session did not move.
    expect(pending.actions.stateDelta).toEqual({ n: 1, 'user:u': 1, 'temp:t': 1 });
    expect(session.events).toEqual([]);
    expect(session.state).toEqual({ n: 0 });

    const loaded = (await service.getSession({ appName, userId: 'u1', sessionId: 's1' })) as Session;
    expect(loaded.events).toEqual([]);
    expect(loaded.state).toEqual({ n: 0 });
    // The client reconnected by itself and the same session object is still current.
    await service.appendEvent({ session, event: event({ n: 2 }) });
    expect((await service.getSession({ appName, userId: 'u1', sessionId: 's1' }))?.state).toEqual({ n: 2 });
    client.disconnect();
  });

  it('connections killed again and again during appends never leave a half-applied append', async () => {
    const client = failFastClient('adk-conn-storm');
    const service = new RedisSessionService({ client, onStale: 'reload' });
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'u1', sessionId: 's1' };
    let session = await service.createSession({ ...key });
    let stop = false;
    const killer = (async () => {
      while (!stop) {
        await killConnections('adk-conn-storm');
        await sleep(3);
      }
    })();
    const failures: Array<Error & { code?: string; cause?: unknown }> = [];
    let succeeded = 0;
    for (let index = 0; index < 300; index++) {
      try {
        await service.appendEvent({
          session,
          event: event({ last: index, [`k${index}`]: index, 'user:count': index }),
        });
        succeeded++;
      } catch (error) {
        failures.push(error as Error & { code?: string; cause?: unknown });
        // After a failure the outcome is unknown: start again from what is stored.
        for (;;) {
          try {
            session = (await service.getSession(key)) as Session;
            break;
          } catch {
            await sleep(1);
          }
        }
      }
    }
    stop = true;
    await killer;

    expect(failures.length).toBeGreaterThan(0);
    for (const failure of failures) {
      expect(failure.code).toBe('BACKEND_ERROR');
      expect(failure.cause).toBeInstanceOf(Error);
    }
    const loaded = (await service.getSession(key)) as Session;
    // Every stored event's delta is in the state, and every delta in the state has its event.
    const fromEvents = loaded.events.map((stored) => Number(Object.keys(stored.actions.stateDelta)[1]?.slice(1)));
    const fromState = Object.keys(loaded.state)
      .filter((stateKey) => /^k\d+$/.test(stateKey))
      .map((stateKey) => Number(stateKey.slice(1)))
      .sort((a, b) => a - b);
    expect(fromState).toEqual(fromEvents);
    expect(loaded.events.length).toBeGreaterThanOrEqual(succeeded);
    expect(loaded.state.last).toBe(fromEvents[fromEvents.length - 1]);
    expect(loaded.state['user:count']).toBe(fromEvents[fromEvents.length - 1]);
    // One revision per stored append: a fresh copy appends without being stale.
    await service.appendEvent({ session: loaded, event: event({ done: true }) });
    client.disconnect();
  });
});
