/** The service's options: client or url, who closes what, and key prefixes that keep data apart. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';

describe('RedisSessionService options', () => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await client.quit();
  });

  it('makes its own client from a url and quits it on close()', async () => {
    const service = new RedisSessionService({
      url: inject('redisUrl'),
      keyPrefix: `${inject('testPrefix')}-${randomUUID()}:`,
    });
    const appName = `app-${randomUUID()}`;
    await service.createSession({ appName, userId: 'u', sessionId: 's', state: { a: 1 } });
    expect((await service.getSession({ appName, userId: 'u', sessionId: 's' }))?.state).toEqual({ a: 1 });
    await service.close();
    expect(service.client.status).toBe('end');
    await service.close();
  });

  it('never closes a client it was given', async () => {
    const service = new RedisSessionService({ client });
    await service.close();
    expect(client.status).toBe('ready');
    expect(await client.ping()).toBe('PONG');
  });

  it('keeps apps under different key prefixes apart, even prefixes that extend one another', async () => {
    const base = `${inject('testPrefix')}-${randomUUID()}`;
    const prefixes = [`${base}:`, `${base}:x`, `${base}`, `${base}::`];
    const appName = 'shared-app-name';
    for (const keyPrefix of prefixes) {
      const service = new RedisSessionService({ client, keyPrefix });
      await service.createSession({
        appName,
        userId: 'u',
        sessionId: 's',
        state: { who: keyPrefix, 'app:who': keyPrefix },
      });
    }
    for (const keyPrefix of prefixes) {
      const service = new RedisSessionService({ client, keyPrefix });
      expect((await service.getSession({ appName, userId: 'u', sessionId: 's' }))?.state).toEqual({
        who: keyPrefix,
        'app:who': keyPrefix,
      });
      expect((await service.listSessions({ appName })).totalItems).toBe(1);
    }
  });

  it("works with a client's own ioredis keyPrefix, and refuses one with braces", async () => {
    const prefixed = new Redis(inject('redisUrl'), { keyPrefix: `${inject('testPrefix')}-${randomUUID()}:` });
    try {
      const service = new RedisSessionService({ client: prefixed, keyPrefix: 'inner:' });
      const appName = `app-${randomUUID()}`;
      const session = await service.createSession({ appName, userId: 'u', sessionId: 's', state: { 'user:x': 1 } });
      await service.appendEvent({
        session,
        event: {
          ...session.events[0],
          id: 'e1',
          timestamp: 5,
          invocationId: 'i',
          author: 'a',
          actions: {
            stateDelta: { y: 2 },
            artifactDelta: {},
            requestedAuthConfigs: {},
            requestedToolConfirmations: {},
          },
        } as never,
      });
      expect((await service.getSession({ appName, userId: 'u', sessionId: 's' }))?.state).toEqual({
        y: 2,
        'user:x': 1,
      });
      expect((await service.listSessions({ appName })).sessions.map((listed) => listed.id)).toEqual(['s']);
      const keys = await prefixed.keys(`${prefixed.options.keyPrefix}inner:*`);
      expect(keys.length).toBeGreaterThan(0);
    } finally {
      prefixed.disconnect();
    }
    const braces = new Redis(inject('redisUrl'), { keyPrefix: '{tenant}:', lazyConnect: true });
    expect(() => new RedisSessionService({ client: braces })).toThrow(/client keyPrefix/);
  });
});
