/**
 * `app:` keys over many shards: a write records its app delta as pending in
 * the user's slot, then applies it to the app's slot. A process that dies
 * between the two steps (simulated: the second command never leaves the
 * client) leaves the delta pending, and the next read or write of that
 * session rolls it forward, exactly once. On a cluster, the users of one app
 * spread evenly over the masters.
 */
import { randomUUID } from 'node:crypto';
import { BackendError } from '@adk-state/core';
import type { Session } from '@google/adk';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService, SCRIPT_SHAS } from '../src/index.js';
import { testEvent } from './support/index.js';

const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;

/** A client whose process "dies" before the app step: that command fails without leaving the client. */
function dyingBeforeAppStep(client: Redis) {
  return {
    get status() {
      return client.status;
    },
    call(command: string, args: Array<string | number>) {
      if (command === 'evalsha' && args[0] === SCRIPT_SHAS.applyApp) {
        return Promise.reject(new Error('the process died here'));
      }
      return client.call(command, args);
    },
  } as unknown as Redis;
}

describe('app: keys over many shards (single server)', () => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await client.quit();
  });

  it('a write that died between its two steps is rolled forward by the next read, exactly once', async () => {
    const appName = `app-${randomUUID()}`;
    const dying = new RedisSessionService({ client: dyingBeforeAppStep(client), keyPrefix });
    const session = await dying.createSession({ appName, userId: 'ada', sessionId: 's1' });
    const failure = await dying
      .appendEvent({ session, event: testEvent({ 'app:motto': 'first', own: 1 }, { timestamp: 10 }) })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BackendError);
    expect((failure as BackendError).mayHaveApplied).toBe(true);

    const other = new RedisSessionService({ client, keyPrefix });
    // The event and the session's own state are stored; the app delta waits in the user's slot.
    expect(await other.getAppState({ appName })).toEqual({});
    const loaded = (await other.getSession({ appName, userId: 'ada', sessionId: 's1' })) as Session;
    expect(loaded.events.map((event) => event.timestamp)).toEqual([10]);
    expect(loaded.state).toEqual({ own: 1, 'app:motto': 'first' });
    expect(await other.getAppState({ appName })).toEqual({ motto: 'first' });

    // Someone else changes the app key; a third process that meets the same pending record must not apply it again.
    const grace = await other.createSession({ appName, userId: 'grace', sessionId: 'g1' });
    await other.appendEvent({ session: grace, event: testEvent({ 'app:motto': 'second' }, { timestamp: 20 }) });
    const third = new RedisSessionService({ client, keyPrefix });
    const again = (await third.getSession({ appName, userId: 'ada', sessionId: 's1' })) as Session;
    expect(again.state['app:motto']).toBe('second');
    expect(await third.getAppState({ appName })).toEqual({ motto: 'second' });
  });

  it('deleting a session rolls its pending app delta forward', async () => {
    const appName = `app-${randomUUID()}`;
    const dying = new RedisSessionService({ client: dyingBeforeAppStep(client), keyPrefix });
    const session = await dying.createSession({ appName, userId: 'ada', sessionId: 's1' });
    await dying
      .appendEvent({ session, event: testEvent({ 'app:left': true }, { timestamp: 10 }) })
      .catch(() => undefined);
    const other = new RedisSessionService({ client, keyPrefix });
    await other.deleteSession({ appName, userId: 'ada', sessionId: 's1' });
    expect(await other.getAppState({ appName })).toEqual({ left: true });
  });
});

const nodes = inject('redisClusterNodes');

describe.skipIf(nodes.length === 0)('one app on a cluster of three masters (default shards)', () => {
  it('600 users of one app: the busiest master holds at most 1.25x the average keys', async () => {
    const cluster = new Cluster(nodes);
    const prefix = `${keyPrefix}spread-${randomUUID().slice(0, 8)}:`;
    try {
      const service = new RedisSessionService({ client: cluster, keyPrefix: prefix });
      const appName = 'one-app';
      const users = Array.from({ length: 600 }, (_, index) => `user-${index}`);
      for (let from = 0; from < users.length; from += 50) {
        await Promise.all(
          users.slice(from, from + 50).map(async (userId) => {
            const session = await service.createSession({ appName, userId, state: { 'user:name': userId } });
            await service.appendEvent({ session, event: testEvent({ step: 1 }, { timestamp: 1 }) });
          }),
        );
      }
      const counts: number[] = [];
      for (const master of cluster.nodes('master')) {
        let cursor = '0';
        let count = 0;
        do {
          const [next, keys] = await master.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
          cursor = next;
          count += keys.length;
        } while (cursor !== '0');
        counts.push(count);
      }
      expect(counts).toHaveLength(3);
      const average = counts.reduce((sum, count) => sum + count, 0) / counts.length;
      expect(Math.max(...counts) / average).toBeLessThanOrEqual(1.25);
      const listed = await service.listSessions({ appName, limit: 10, page: 3, order: 'desc' });
      expect(listed.totalItems).toBe(600);
      expect(listed.sessions).toHaveLength(10);
    } finally {
      await cluster.quit();
    }
  });
});
