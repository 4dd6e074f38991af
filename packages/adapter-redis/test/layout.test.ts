/**
 * The layout (`shards`) is recorded under the key prefix by the first
 * service that uses it; a service with another number of shards would read
 * and write other keys than the data's, so every call it makes is refused
 * with a typed error that names the recorded value, and it writes nothing.
 */
import { randomUUID } from 'node:crypto';
import { InvalidArgumentError } from '@adk-state/core';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisLayoutError, RedisSessionService } from '../src/index.js';
import { layoutKey } from '../src/keys.js';
import { testEvent } from './support/index.js';

describe('the layout record of a key prefix', () => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await client.quit();
  });

  async function keysUnder(prefix: string): Promise<string[]> {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
    return found.sort();
  }

  it('is written by the first call of the first service, and a service with another shards is refused on every call', async () => {
    const keyPrefix = `${inject('testPrefix')}-layout-${randomUUID().slice(0, 8)}:`;
    const first = new RedisSessionService({ client, keyPrefix, shards: 4 });
    const session = await first.createSession({ appName: 'app', userId: 'u1', sessionId: 's1', state: { 'app:a': 1 } });
    expect(await client.hget(layoutKey(keyPrefix), 'shards')).toBe('4');
    const before = await keysUnder(keyPrefix);

    for (const other of [
      new RedisSessionService({ client, keyPrefix }),
      new RedisSessionService({ client, keyPrefix, shards: 8 }),
    ]) {
      const calls = [
        () => other.createSession({ appName: 'app', userId: 'u2', state: { 'app:b': 2 } }),
        () => other.getSession({ appName: 'app', userId: 'u1', sessionId: 's1' }),
        () => other.appendEvent({ session, event: testEvent({ 'app:c': 3 }) }),
        () => other.listSessions({ appName: 'app' }),
        () => other.deleteSession({ appName: 'app', userId: 'u1', sessionId: 's1' }),
        () => other.getUserState({ appName: 'app', userId: 'u1' }),
        () => other.getAppState({ appName: 'app' }),
      ];
      for (const call of calls) {
        const failure = await call().then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(failure).toBeInstanceOf(RedisLayoutError);
        expect(failure).toBeInstanceOf(InvalidArgumentError);
        expect((failure as RedisLayoutError).recordedShards).toBe(4);
        expect((failure as Error).message).toMatch(/shards: 4/);
      }
    }
    expect(await keysUnder(keyPrefix)).toEqual(before);
    // The service with the recorded layout goes on as before.
    expect(await first.getAppState({ appName: 'app' })).toEqual({ a: 1 });
  });

  it('on a prefix with no record, reads write nothing, and the first write records the layout', async () => {
    const keyPrefix = `${inject('testPrefix')}-layout-${randomUUID().slice(0, 8)}:`;
    const reader = new RedisSessionService({ client, keyPrefix, shards: 4 });
    const key = { appName: 'app', userId: 'u1', sessionId: 's1' };
    // A tool that only looks (a listing, an inspection) leaves the prefix as it found it.
    expect(await reader.getAppState({ appName: 'app' })).toEqual({});
    expect(await reader.getUserState(key)).toEqual({});
    expect(await reader.getSession(key)).toBeUndefined();
    expect((await reader.listSessions({ appName: 'app' })).sessions).toEqual([]);
    expect(await keysUnder(keyPrefix)).toEqual([]);
    // So the service that writes first still chooses the layout.
    const writer = new RedisSessionService({ client, keyPrefix });
    await writer.createSession({ ...key, state: { n: 1 } });
    expect(await client.hget(layoutKey(keyPrefix), 'shards')).toBe('1');
    await expect(reader.getSession(key)).rejects.toBeInstanceOf(RedisLayoutError);
    await expect(reader.createSession({ ...key, sessionId: 's2' })).rejects.toBeInstanceOf(RedisLayoutError);
  });
});
