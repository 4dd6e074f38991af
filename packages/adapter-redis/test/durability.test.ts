/**
 * Durability with the append-only file: an acknowledged append survives a
 * killed and restarted redis-server, and a server killed while it applies a
 * large append comes back with all of it or none of it.
 */
import { randomUUID } from 'node:crypto';
import type { Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { hasRedisServer, startRedisServer, testEvent } from './support/index.js';

const available = await hasRedisServer();

const event = (stateDelta: Record<string, unknown>, text = 'hi') => testEvent(stateDelta, { text });

describe.skipIf(!available)('durability with appendonly yes (servers of their own)', () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  it('acknowledged appends survive SIGKILL and a restart of redis-server', async () => {
    const server = await startRedisServer({ appendonly: true, appendfsync: 'always' });
    cleanup.push(() => server.stop());
    const writer = new RedisSessionService({ url: server.url });
    cleanup.push(() => writer.close());
    const appName = `app-${randomUUID()}`;
    const session = await writer.createSession({
      appName,
      userId: 'u1',
      sessionId: 's1',
      state: { a: 0, 'user:u': 0, 'app:x': 0, 'temp:t': 1 },
    });
    const appended: string[] = [];
    for (let index = 1; index <= 10; index++) {
      const stored = await writer.appendEvent({
        session,
        event: event({ a: index, 'user:u': index, 'app:x': index }, `turn ${index}`),
      });
      appended.push(stored.id);
    }

    await server.kill('SIGKILL');
    await server.restart();

    const reader = new RedisSessionService({ url: server.url });
    cleanup.push(() => reader.close());
    const loaded = await reader.getSession({ appName, userId: 'u1', sessionId: 's1' });
    expect(loaded?.state).toEqual({ a: 10, 'user:u': 10, 'app:x': 10 });
    expect(loaded?.events.map((stored) => stored.id)).toEqual(appended);
    expect(loaded?.events[9]?.content?.parts?.[0]?.text).toBe('turn 10');
    expect(await reader.getUserState({ appName, userId: 'u1' })).toEqual({ u: 10 });
    expect(await reader.getAppState({ appName })).toEqual({ x: 10 });
    expect((await reader.listSessions({ appName })).sessions.map((listed) => listed.id)).toEqual(['s1']);

    // The writer's client reconnects by itself, and its session object is still current.
    await writer.appendEvent({ session, event: event({ a: 11 }) });
    expect((await reader.getSession({ appName, userId: 'u1', sessionId: 's1' }))?.state.a).toBe(11);
  });

  it('a server killed while it applies a large append restarts with all of it or none of it', async () => {
    const server = await startRedisServer({ appendonly: true, appendfsync: 'always' });
    cleanup.push(() => server.stop());
    // Fail fast instead of re-sending the request after reconnecting.
    const client = new Redis(server.url, { maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    cleanup.push(async () => client.disconnect());
    const service = new RedisSessionService({ client });
    const appName = `app-${randomUUID()}`;
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { before: true } });

    const delta: Record<string, unknown> = {};
    for (let index = 0; index < 200_000; index++) delta[`k${index}`] = index;
    delta['user:big'] = 'yes';
    delta['app:big'] = 'yes';
    const big = event(delta);
    const outcome = service.appendEvent({ session, event: big }).then(
      () => 'stored' as const,
      (error: { code?: string; cause?: unknown }) => error,
    );
    // Kill the server as soon as it stops answering a second connection: it is busy with the append.
    const probe = new Redis(server.url, { maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    for (let attempt = 0; attempt < 2_000; attempt++) {
      const answered = await Promise.race([
        probe.ping().then(
          () => true,
          () => true,
        ),
        new Promise((resolve) => setTimeout(() => resolve(false), 10)),
      ]);
      if (!answered) break;
    }
    await server.kill('SIGKILL');
    probe.disconnect();
    const result = await outcome;
    if (result !== 'stored') {
      expect(result.code).toBe('BACKEND_ERROR');
      expect(result.cause).toBeInstanceOf(Error);
    }

    await server.restart();
    const reader = new RedisSessionService({ url: server.url });
    cleanup.push(() => reader.close());
    const loaded = (await reader.getSession({ appName, userId: 'u1', sessionId: 's1' })) as Session;
    const keys = Object.keys(loaded.state).filter((key) => key.startsWith('k'));
    const app = await reader.getAppState({ appName });
    const user = await reader.getUserState({ appName, userId: 'u1' });
    if (loaded.events.length === 0) {
      expect(keys).toHaveLength(0);
      expect(app).toEqual({});
      expect(user).toEqual({});
      expect(result).not.toBe('stored');
    } else {
      expect(loaded.events.map((stored) => stored.id)).toEqual([big.id]);
      expect(keys).toHaveLength(200_000);
      expect(app).toEqual({ big: 'yes' });
      expect(user).toEqual({ big: 'yes' });
    }
    expect(loaded.state.before).toBe(true);
  }, 60_000);
});
