/**
 * Scripts are sent in full only when the server lacks them: on first use and
 * after SCRIPT FLUSH (a restart or failover looks the same), EVALSHA gets
 * NOSCRIPT and the script is re-sent once with EVAL; later calls are one
 * EVALSHA again. Runs on a server of its own, since it flushes the script cache.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { SCRIPT_SHAS } from '../src/store.js';
import {
  countCommands,
  countRoundTrips,
  hasRedisServer,
  type RedisServer,
  startRedisServer,
  testEvent,
} from './support/index.js';

const available = await hasRedisServer();

const event = (stateDelta: Record<string, unknown>) => testEvent(stateDelta);

describe.skipIf(!available)('script loading (server of its own)', () => {
  const connectionName = 'adk-scripts';
  let server: RedisServer;
  let client: Redis;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    client = new Redis(server.url, { connectionName });
    admin = new Redis(server.url);
  });
  afterAll(async () => {
    await client?.quit();
    await admin?.quit();
    await server?.stop();
  });

  it('loads a script on NOSCRIPT, and again after SCRIPT FLUSH, then runs it by its SHA', async () => {
    const service = new RedisSessionService({ client });
    const appName = `app-${randomUUID()}`;
    const trips = (operation: () => Promise<unknown>) =>
      countRoundTrips(server.url, connectionName, operation).then((result) => result.commands);

    let session = await service.createSession({ appName, userId: 'u', sessionId: 's' });
    expect(await trips(() => service.appendEvent({ session, event: event({ n: 1 }) }))).toEqual(['evalsha', 'eval']);
    expect(await trips(() => service.appendEvent({ session, event: event({ n: 2 }) }))).toEqual(['evalsha']);

    await admin.script('FLUSH');
    expect(await admin.script('EXISTS', SCRIPT_SHAS.append as string)).toEqual([0]);
    expect(await trips(() => service.appendEvent({ session, event: event({ n: 3 }) }))).toEqual(['evalsha', 'eval']);
    expect(await admin.script('EXISTS', SCRIPT_SHAS.append as string)).toEqual([1]);
    expect(await trips(() => service.appendEvent({ session, event: event({ n: 4 }) }))).toEqual(['evalsha']);

    session = (await service.getSession({ appName, userId: 'u', sessionId: 's' })) as typeof session;
    expect(session.state).toEqual({ n: 4 });
    expect(session.events).toHaveLength(4);
  });

  it('with one shard, one append runs one script; the work happens inside the server', async () => {
    const service = new RedisSessionService({ client, shards: 1 });
    const appName = `app-${randomUUID()}`;
    const session = await service.createSession({ appName, userId: 'u', sessionId: 's' });
    await service.appendEvent({ session, event: event({ warm: true }) });
    const commands = await countCommands(server.url, () =>
      service.appendEvent({ session, event: event({ a: 1, 'user:b': 2, 'app:c': 3 }) }),
    );
    // evalsha is the request; the rest ran inside the script: reading the revision and event
    // count, checking the type of the six keys it changes without reading them (log, id map,
    // two indexes, user and app hashes), claiming the event id, pushing the entry, recording
    // which event this write wrote, writing the session (with its new revision), user and app
    // hashes, and updating the two listing indexes.
    expect(Object.fromEntries(commands)).toEqual({
      evalsha: 1,
      hmget: 1,
      type: 6,
      hsetnx: 1,
      rpush: 1,
      hset: 4,
      zadd: 2,
    });
  });
});
