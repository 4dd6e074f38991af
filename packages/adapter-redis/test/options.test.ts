/**
 * Option checks at construction (InvalidArgumentError, nothing left
 * running), the longest session TTL Redis is asked to keep, and the defaults
 * of a client made from `url` with `clientOptions` over them.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  MAX_RECONNECT_DELAY_MS,
  MAX_SESSION_TTL_SECONDS,
  RedisSessionService,
  URL_CLIENT_DEFAULTS,
} from '../src/index.js';

describe('option checks', () => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await client.quit();
  });

  /** A service given `value` for each option of `names` is refused with InvalidArgumentError naming it. */
  function expectRefused(names: string[], value: unknown): void {
    for (const name of names) {
      expect(() => new RedisSessionService({ client, [name]: value as number })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(name) }),
      );
    }
  }

  it.each([
    0,
    -1,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    1e16,
    MAX_SESSION_TTL_SECONDS + 1,
    '60',
    null,
  ])('refuses expireAfterIdleSeconds and expireAfterCreateSeconds %s with InvalidArgumentError', (value) => {
    expectRefused(['expireAfterIdleSeconds', 'expireAfterCreateSeconds'], value);
  });

  it.each([
    -1,
    Number.NaN,
    '1000',
    null,
  ])('refuses outboxKeepMs and catchUpAfterMs %s with InvalidArgumentError', (value) => {
    expectRefused(['outboxKeepMs', 'catchUpAfterMs'], value);
  });

  it('takes catchUpAfterMs from 0 to Infinity (never late)', () => {
    for (const catchUpAfterMs of [0, 2.5, 1_000, Number.POSITIVE_INFINITY]) {
      expect(() => new RedisSessionService({ client, catchUpAfterMs })).not.toThrow();
    }
  });

  it('refuses both clocks at once: a session expires on one', () => {
    expect(
      () => new RedisSessionService({ client, expireAfterIdleSeconds: 60, expireAfterCreateSeconds: 3600 }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/at most one/) }));
  });

  it('keeps a session for the longest TTL it accepts, and for a fraction of a second', async () => {
    expect(MAX_SESSION_TTL_SECONDS).toBe(2 ** 31 - 1);
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const appName = 'app';
    const longest = new RedisSessionService({ client, keyPrefix, expireAfterIdleSeconds: MAX_SESSION_TTL_SECONDS });
    await longest.createSession({ appName, userId: 'u', sessionId: 'long', state: { a: 1 } });
    expect((await longest.getSession({ appName, userId: 'u', sessionId: 'long' }))?.state).toEqual({ a: 1 });
    const [sessionKey] = await client.keys(`${keyPrefix}*:s:*long`);
    const ttlSeconds = await client.ttl(sessionKey as string);
    expect(ttlSeconds).toBeGreaterThan(MAX_SESSION_TTL_SECONDS - 60);
    expect(ttlSeconds).toBeLessThanOrEqual(MAX_SESSION_TTL_SECONDS);

    const brief = new RedisSessionService({ client, keyPrefix, expireAfterIdleSeconds: 0.5 });
    await brief.createSession({ appName, userId: 'u', sessionId: 'brief' });
    const [briefKey] = await client.keys(`${keyPrefix}*:s:*brief`);
    const ttlMs = await client.pttl(briefKey as string);
    expect(ttlMs).toBeGreaterThan(0);
    expect(ttlMs).toBeLessThanOrEqual(500);
  });

  it('refuses clientOptions next to a client, or that are not an object', () => {
    // @ts-expect-error the types refuse it too; JavaScript callers meet the runtime check
    expect(() => new RedisSessionService({ client, clientOptions: { connectTimeout: 1 } })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/clientOptions/) }),
    );
    for (const clientOptions of [null, 'fast', [1]]) {
      expect(() => new RedisSessionService({ url: inject('redisUrl'), clientOptions: clientOptions as never })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/clientOptions/) }),
      );
    }
    expect(
      () => new RedisSessionService({ url: inject('redisUrl'), clientOptions: { keyPrefix: '{tenant}:' } }),
    ).toThrow(/client keyPrefix/);
  });

  it('leaves no client of its own running when an option is refused', async () => {
    // A server that drops every connection at once: a client left behind would reconnect again and again.
    const sockets: Socket[] = [];
    const dropper = createServer((socket) => {
      sockets.push(socket);
      socket.destroy();
    });
    await new Promise<void>((resolve) => dropper.listen(0, '127.0.0.1', resolve));
    const { port } = dropper.address() as { port: number };
    try {
      const url = `redis://127.0.0.1:${port}`;
      expect(() => new RedisSessionService({ url, timeoutMs: -1 })).toThrow(/timeoutMs/);
      expect(() => new RedisSessionService({ url, clientOptions: { keyPrefix: '{x}' } })).toThrow(/keyPrefix/);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(sockets.length).toBeLessThanOrEqual(2);
    } finally {
      await new Promise((resolve) => dropper.close(resolve));
    }
  });
});

describe('a client made from url', () => {
  it('starts from the documented defaults, and clientOptions change any of them', async () => {
    const service = new RedisSessionService({ url: inject('redisUrl') });
    try {
      const options = (service.client as Redis).options;
      expect(options.maxRetriesPerRequest).toBe(0);
      expect(options.enableOfflineQueue).toBe(true);
      expect(options.connectTimeout).toBe(5_000);
      expect(options.commandTimeout).toBeUndefined();
      const delays = [1, 2, 3, 4, 5, 6, 10, 100, 10_000].map((attempt) => options.retryStrategy?.(attempt));
      expect(delays).toEqual([100, 200, 400, 800, 1600, 2000, 2000, 2000, 2000]);
      expect(Math.max(...(delays as number[]))).toBe(MAX_RECONNECT_DELAY_MS);
      // It never prints "[ioredis] Unhandled error event": the service listens.
      expect(service.client.listenerCount('error')).toBeGreaterThan(0);
    } finally {
      await service.close();
    }

    const tuned = new RedisSessionService({
      url: inject('redisUrl'),
      clientOptions: { maxRetriesPerRequest: 3, connectTimeout: 1_234, connectionName: 'adk-tuned' },
    });
    try {
      const options = (tuned.client as Redis).options;
      expect(options).toMatchObject({ maxRetriesPerRequest: 3, connectTimeout: 1_234, connectionName: 'adk-tuned' });
      expect(options.retryStrategy).toBe(URL_CLIENT_DEFAULTS.retryStrategy);
      await tuned.createSession({ appName: `app-${randomUUID()}`, userId: 'u', sessionId: 's' });
    } finally {
      await tuned.close();
    }
  });
});
