/**
 * Records changed outside adk-state (a log entry, a state value that is not
 * JSON): every read fails with a BackendError of kind 'unreadable-data' that
 * says nothing was written, through the log cache and without it; the rest
 * of the data stays readable, and removing the session clears it.
 */
import { randomUUID } from 'node:crypto';
import type { BackendError } from '@adk-state/core';
import { createEvent } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { appKeys, encodeText, sessionKeys } from '../src/keys.js';

async function failure(promise: Promise<unknown>): Promise<BackendError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect((error as BackendError)?.code).toBe('BACKEND_ERROR');
  return error as BackendError;
}

describe('the Redis store with records it cannot read', () => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await client.quit();
  });

  async function fixture() {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const cached = new RedisSessionService({ client, keyPrefix });
    const uncached = new RedisSessionService({ client, keyPrefix, logCacheBytes: 0 });
    const appName = 'app';
    const key = { appName, userId: 'u', sessionId: 's' };
    const session = await cached.createSession({ ...key, state: { a: 1, 'app:b': 2 } });
    await cached.appendEvent({
      session,
      event: createEvent({ id: 'e1', author: 'a', content: { parts: [{ text: 'hello' }] } }),
    });
    // Read once, so that the cached service holds the log.
    expect((await cached.getSession(key))?.events).toHaveLength(1);
    const keys = sessionKeys(keyPrefix, appName, 'u', 's');
    return { cached, uncached, key, keys, keyPrefix, app: appKeys(keyPrefix, appName) };
  }

  it('a log entry whose header or event is not JSON', async () => {
    for (const entry of ['1 "e1\n{"author":', '1 e1\n{}', 'nonsense', '1 "e1"\n{"author":']) {
      const { cached, key, keys, keyPrefix } = await fixture();
      await client.lset(keys.events, 0, entry);
      // A service that read the log before holds it (the entry was changed behind the revision's back);
      // one that reads it now, with the cache or without, cannot read it.
      const reading = new RedisSessionService({ client, keyPrefix });
      const uncached = new RedisSessionService({ client, keyPrefix, logCacheBytes: 0 });
      for (const service of [reading, uncached]) {
        for (const config of [undefined, { numRecentEvents: 1 }]) {
          const error = await failure(service.getSession({ ...key, config }));
          expect(error.kind).toBe('unreadable-data');
          expect(error.mayHaveApplied).toBe(false);
        }
      }
      // The session's state is still readable on its own, and the session can be removed.
      expect((await uncached.listSessions({ appName: key.appName })).sessions[0]?.state).toEqual({ a: 1, 'app:b': 2 });
      await cached.deleteSession(key);
      expect(await reading.getSession(key)).toBeUndefined();
      expect(await cached.getSession(key)).toBeUndefined();
    }
  });

  it('a session or app state value that is not JSON', async () => {
    const { cached, uncached, key, keys, app } = await fixture();
    await client.hset(keys.session, encodeText('a'), '{broken');
    for (const service of [cached, uncached]) {
      expect((await failure(service.getSession(key))).kind).toBe('unreadable-data');
      expect((await failure(service.listSessions({ appName: key.appName }))).kind).toBe('unreadable-data');
    }
    await client.hset(keys.session, encodeText('a'), '1');
    await client.hset(app.appState, encodeText('b'), 'NaN');
    expect((await failure(cached.getAppState({ appName: key.appName }))).kind).toBe('unreadable-data');
    expect((await failure(uncached.getSession(key))).kind).toBe('unreadable-data');
  });
});
