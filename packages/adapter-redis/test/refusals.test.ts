/**
 * The Redis store's words for a refused configuration: a wrong or missing
 * password is an authentication error and a database index the server does
 * not have an unknown-database error (nothing written, a retry fails the
 * same way), not an outage; and no error quotes ioredis's options.
 */

import { expectCode } from '@adk-state/conformance-tests';
import type { BackendError } from '@adk-state/core';
import { type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';

const failure = (promise: Promise<unknown>) => expectCode(promise, 'BACKEND_ERROR') as Promise<BackendError>;

describe('refusals of the configuration', () => {
  let guarded: RedisServer;
  let open: RedisServer;

  beforeAll(async () => {
    [guarded, open] = await Promise.all([
      startRedisServer({ args: ['--requirepass', 'right'] }),
      startRedisServer({ args: ['--databases', '4'] }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([guarded?.stop(), open?.stop()]);
  });

  for (const [label, userInfo] of [
    ['a wrong password', ':wrong@'],
    ['no password', ''],
  ] as const) {
    it(`${label} is an authentication error, for reads and writes alike`, async () => {
      const service = new RedisSessionService({
        url: `redis://${userInfo}127.0.0.1:${guarded.port}/0`,
        timeoutMs: 10_000,
      });
      try {
        for (const call of [
          service.getSession({ appName: 'a', userId: 'u', sessionId: 's' }),
          service.createSession({ appName: 'a', userId: 'u', sessionId: 's' }),
        ]) {
          const error = await failure(call);
          expect(error.kind).toBe('authentication');
          expect(error.mayHaveApplied).toBe(false);
          expect(error.timedOut).toBe(false);
          expect(error.message).toContain('refused the credentials');
          expect(error.message).not.toContain('retry when the backend is reachable');
          expect(error.message).not.toContain('may have been applied');
          expect(error.message).not.toContain('maxRetriesPerRequest');
        }
      } finally {
        await service.close();
      }
    });
  }

  it('a database index the server does not have is refused before any command runs in database 0', async () => {
    const service = new RedisSessionService({ url: `${open.url}/9`, timeoutMs: 10_000 });
    const zero = new Redis(open.url);
    try {
      for (let attempt = 0; attempt < 2; attempt++) {
        const error = await failure(service.createSession({ appName: 'a', userId: 'u', sessionId: `s${attempt}` }));
        expect(error.kind).toBe('unknown-database');
        expect(error.mayHaveApplied).toBe(false);
        expect(error.message).toContain('has no such database');
      }
      expect(await zero.dbsize()).toBe(0);
    } finally {
      await Promise.all([service.close(), zero.quit()]);
    }
  });

  it('a database index the server has works as before', async () => {
    const service = new RedisSessionService({ url: `${open.url}/3` });
    const three = new Redis(`${open.url}/3`);
    try {
      await service.createSession({ appName: 'a', userId: 'u', sessionId: 's' });
      expect(await service.getSession({ appName: 'a', userId: 'u', sessionId: 's' })).toBeDefined();
      expect(await three.dbsize()).toBeGreaterThan(0);
    } finally {
      await Promise.all([service.close(), three.quit()]);
    }
  });
});
