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

/**
 * A client that, once armed, holds the first command running `sha` until
 * `meanwhile` has run (started a tick later, after the caller's other
 * commands of that moment have left); `fired` says whether it did.
 */
function holdingOnce(client: Redis, sha: string | undefined, meanwhile: () => Promise<unknown>) {
  const hook = { armed: false, fired: false, client: undefined as unknown as Redis };
  hook.client = {
    get status() {
      return client.status;
    },
    call(command: string, args: Array<string | number>) {
      if (!hook.armed || hook.fired || command !== 'evalsha' || args[0] !== sha) return client.call(command, args);
      hook.fired = true;
      return new Promise((resolve) => setImmediate(resolve)).then(meanwhile).then(() => client.call(command, args));
    },
  } as unknown as Redis;
  return hook;
}

describe('app: keys over many shards (single server)', () => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await client.quit();
  });

  /** A new app with one session that holds one append of `delta`, and the service that wrote it. */
  async function sessionWithOneAppend(delta: Record<string, number>) {
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const writer = new RedisSessionService({ client, keyPrefix });
    const session = await writer.createSession(key);
    await writer.appendEvent({ session, event: testEvent(delta) });
    return { appName, key, writer, session };
  }

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

  it('a read whose app bucket is newer than its session read reads again: never the app half of a later append', async () => {
    const { key, writer, session } = await sessionWithOneAppend({ n: 1, 'app:n': 1 });
    // The session is read first, then an append lands whole, then the app bucket is read.
    const hook = holdingOnce(client, SCRIPT_SHAS.readApp, () =>
      writer.appendEvent({ session, event: testEvent({ n: 2, 'app:n': 2 }) }),
    );
    const reader = new RedisSessionService({ client: hook.client, keyPrefix });
    await reader.getSession(key);
    hook.armed = true;
    const loaded = (await reader.getSession(key)) as Session;
    expect(hook.fired).toBe(true);
    expect(loaded.events).toHaveLength(2);
    expect(loaded.state).toEqual({ n: 2, 'app:n': 2 });
  });

  it('a read whose session is newer than its app bucket lays the pending deltas over it, or reads again once they are forgotten', async () => {
    const { appName, key, writer, session } = await sessionWithOneAppend({ n: 1, 'app:a': 1 });
    // The app bucket is read first; then two appends land whole, the second forgetting the first's
    // pending app delta (known applied); then the session is read. The pending record no longer has
    // 'app:b', and the bucket read did not have it yet.
    const hook = holdingOnce(client, SCRIPT_SHAS.load, async () => {
      await writer.appendEvent({ session, event: testEvent({ n: 2, 'app:b': 2 }) });
      await writer.appendEvent({ session, event: testEvent({ n: 3 }) });
    });
    const reader = new RedisSessionService({ client: hook.client, keyPrefix });
    await reader.getSession(key);
    hook.armed = true;
    const loaded = (await reader.getSession(key)) as Session;
    expect(hook.fired).toBe(true);
    expect(loaded.state).toEqual({ n: 3, 'app:a': 1, 'app:b': 2 });

    // A write that died between its steps: its delta is pending and not in the bucket; a read lays it over.
    const dying = new RedisSessionService({ client: dyingBeforeAppStep(client), keyPrefix });
    const current = (await dying.getSession(key)) as Session;
    await dying.appendEvent({ session: current, event: testEvent({ n: 4, 'app:c': 4 }) }).catch(() => undefined);
    const held = holdingOnce(client, SCRIPT_SHAS.applyApp, async () => {
      expect(await writer.getAppState({ appName })).toEqual({ a: 1, b: 2 });
    });
    const rolling = new RedisSessionService({ client: held.client, keyPrefix });
    held.armed = true;
    const after = (await rolling.getSession(key)) as Session;
    expect(held.fired).toBe(true);
    expect(after.state).toEqual({ n: 4, 'app:a': 1, 'app:b': 2, 'app:c': 4 });
    expect(await writer.getAppState({ appName })).toEqual({ a: 1, b: 2, c: 4 });
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
