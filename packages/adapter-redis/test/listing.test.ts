/**
 * listSessions reads the index, not every session: a page costs O(page), and
 * ties on lastUpdateTime come out in JavaScript's id order (UTF-16 code
 * units), in both orders and across page boundaries.
 */
import { randomUUID } from 'node:crypto';
import { compareSessions } from '@adk-state/core/store';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { countCommands, hasRedisServer, type RedisServer, startRedisServer } from './support/index.js';

const available = await hasRedisServer();

/** Ids whose UTF-8 byte order and UTF-16 order disagree, plus ordinary ones. */
const TIE_IDS = ['\uffff', '\u{10000}', '\u{1F680}', '\ud800', '\udfff', '\ue000', 'a', 'B', 'a\u0000', 'a\u0001', 'é'];

describe.skipIf(!available)('listing (server of its own)', () => {
  let server: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    client = new Redis(server.url);
  });
  afterAll(async () => {
    await client?.quit();
    await server?.stop();
  });

  it('orders ties by id exactly as compareSessions does, in every window of both orders', async () => {
    let clock = 0;
    // Two update times, each shared by many sessions.
    const service = new RedisSessionService({ client, now: () => (clock++ % 2 === 0 ? 5_000 : 7_000) });
    const appName = `app-${randomUUID()}`;
    const heads: Array<{ id: string; userId: string; lastUpdateTime: number }> = [];
    for (const [index, id] of TIE_IDS.entries()) {
      const userId = index % 3 === 0 ? 'u1' : 'u2';
      const session = await service.createSession({ appName, userId, sessionId: id });
      heads.push({ id, userId, lastUpdateTime: session.lastUpdateTime });
    }
    for (const order of ['asc', 'desc'] as const) {
      for (const userId of [undefined, 'u1', 'u2']) {
        const expected = heads
          .filter((head) => userId === undefined || head.userId === userId)
          .sort(compareSessions(order))
          .map((head) => head.id);
        const all = await service.listSessions({ appName, ...(userId ? { userId } : {}), order });
        expect(all.sessions.map((session) => session.id)).toEqual(expected);
        for (let limit = 1; limit <= 4; limit++) {
          for (let offset = 0; offset <= expected.length; offset++) {
            const window = await service.listSessions({ appName, ...(userId ? { userId } : {}), order, limit, offset });
            expect(window.sessions.map((session) => session.id)).toEqual(expected.slice(offset, offset + limit));
            expect(window.totalItems).toBe(expected.length);
          }
        }
      }
    }
  });

  it('with one shard, a page costs O(page): the sessions read do not grow with the app', async () => {
    const service = new RedisSessionService({ client, keyPrefix: 'one-shard:', shards: 1 });
    const appName = `app-${randomUUID()}`;
    for (let index = 0; index < 300; index++) {
      await service.createSession({ appName, userId: `u${index % 7}`, sessionId: `s${index}` });
    }
    for (const order of ['asc', 'desc'] as const) {
      const commands = await countCommands(server.url, () =>
        service.listSessions({ appName, limit: 5, page: 9, order }),
      );
      // Five session hashes, at most five user buckets, one app bucket.
      expect(commands.get('hgetall') ?? 0).toBeLessThanOrEqual(11);
      expect(commands.get('evalsha')).toBe(1);
      for (const [command, calls] of commands) expect(calls, command).toBeLessThanOrEqual(11);
    }
    const page = await service.listSessions({ appName, limit: 5, page: 9 });
    expect(page.totalItems).toBe(300);
    expect(page.sessions).toHaveLength(5);
  });

  it('over many shards, a page reads the hashes of the page only, in two round trips on a single server', async () => {
    const service = new RedisSessionService({ client, keyPrefix: 'sixteen-shards:', shards: 16 });
    const appName = `app-${randomUUID()}`;
    for (let index = 0; index < 300; index++) {
      await service.createSession({ appName, userId: `u${index % 37}`, sessionId: `s${index}` });
    }
    for (const order of ['asc', 'desc'] as const) {
      const commands = await countCommands(server.url, () =>
        service.listSessions({ appName, limit: 5, page: 9, order }),
      );
      // Every shard's count and window with the app bucket beside it, then five session hashes and at most five user buckets.
      expect(commands.get('hgetall') ?? 0).toBeLessThanOrEqual(11);
      expect(commands.get('evalsha')).toBe(3);
      expect(commands.get('zcard')).toBe(16);
    }
    const page = await service.listSessions({ appName, limit: 5, page: 9 });
    expect(page.totalItems).toBe(300);
    expect(page.sessions).toHaveLength(5);
  });
});
