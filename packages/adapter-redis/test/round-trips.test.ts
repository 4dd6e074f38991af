/**
 * One round trip per operation, counted by the server: MONITOR shows every
 * request that arrives from the service's own connection, and the commands
 * that scripts run inside the server are not requests.
 */
import { randomUUID } from 'node:crypto';
import type { Session } from '@google/adk';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { countRoundTrips, type RedisNodes, testEvent } from './support/index.js';

const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;

const event = (stateDelta: Record<string, unknown>, timestamp: number) =>
  testEvent(stateDelta, { timestamp, text: 'hi' });

/** Every operation of the service, each measured alone (after a warm-up that loads the scripts). */
async function measureEveryOperation(
  nodes: RedisNodes,
  connectionName: string,
  service: RedisSessionService,
  settleMs = 0,
) {
  const appName = `rt-${randomUUID()}`;
  const measure = async (operation: () => Promise<unknown>) => {
    // With the outbox, a mark learned by an apply is handed to its shard in the background about
    // half a second later unless a write takes it along: let that happen outside the measurement.
    if (settleMs > 0) await new Promise((resolve) => setTimeout(resolve, settleMs));
    return countRoundTrips(nodes, connectionName, operation);
  };

  // Warm-up: every script once, in the measured user's slot (a server that lacks a script costs one extra round trip, once).
  const warm = await service.createSession({ appName, userId: 'u1', sessionId: 'w', state: { 'app:warm': 1 } });
  await service.appendEvent({ session: warm, event: event({ a: 1 }, 1) });
  await service.getSession({ appName, userId: 'u1', sessionId: 'w' });
  await service.listSessions({ appName });
  await service.listSessions({ appName, userId: 'u1' });
  await service.getUserState({ appName, userId: 'u1' });
  await service.deleteSession({ appName, userId: 'u1', sessionId: 'w' });
  await service.importSession({ ...warm, id: 'w2' });

  let session: Session | undefined;
  const counts: Record<string, string[]> = {};
  const record = async (name: string, operation: () => Promise<unknown>) => {
    counts[name] = (await measure(operation)).commands;
  };
  await record('createSession', async () => {
    session = await service.createSession({
      appName,
      userId: 'u1',
      sessionId: 's1',
      state: { a: 1, 'user:b': 2, 'app:c': 3 },
    });
  });
  const created = session as Session;
  await record('appendEvent', () =>
    service.appendEvent({ session: created, event: event({ a: 2, 'user:b': 3, 'app:c': 4, 'temp:t': 1 }, 10) }),
  );
  await record('appendEvent (replacing an event)', () =>
    service.appendEvent({ session: created, event: created.events[0] as ReturnType<typeof event> }),
  );
  for (let index = 0; index < 20; index++) {
    await service.appendEvent({ session: created, event: event({ i: index }, 100 + index) });
  }
  await record('getSession', () => service.getSession({ appName, userId: 'u1', sessionId: 's1' }));
  await record('getSession (numRecentEvents)', () =>
    service.getSession({ appName, userId: 'u1', sessionId: 's1', config: { numRecentEvents: 3 } }),
  );
  await record('getSession (afterTimestamp)', () =>
    service.getSession({ appName, userId: 'u1', sessionId: 's1', config: { afterTimestamp: 105 } }),
  );
  await record('getSession (missing)', () => service.getSession({ appName, userId: 'u1', sessionId: 'nope' }));
  await record('listSessions', () => service.listSessions({ appName, limit: 10, order: 'desc' }));
  await record('listSessions (user)', () => service.listSessions({ appName, userId: 'u1' }));
  await record('getUserState', () => service.getUserState({ appName, userId: 'u1' }));
  await record('getAppState', () => service.getAppState({ appName }));
  await record('createSession (exists)', () =>
    service.createSession({ appName, userId: 'u1', sessionId: 's1' }).catch(() => undefined),
  );
  const stale = (await service.getSession({ appName, userId: 'u1', sessionId: 's1' })) as Session;
  await service.appendEvent({ session: created, event: event({}, 200) });
  await record('appendEvent (stale)', () =>
    service.appendEvent({ session: stale, event: event({}, 201) }).catch(() => undefined),
  );
  const copy = (await service.getSession({ appName, userId: 'u1', sessionId: 's1' })) as Session;
  await record('deleteSession', () => service.deleteSession({ appName, userId: 'u1', sessionId: 's1' }));
  await record('importSession', () => service.importSession(copy));
  return counts;
}

/** With one shard (the whole app in one slot): one request each. */
const ONE_SLOT = {
  createSession: ['evalsha'],
  appendEvent: ['evalsha'],
  'appendEvent (replacing an event)': ['evalsha'],
  getSession: ['evalsha'],
  'getSession (numRecentEvents)': ['evalsha'],
  'getSession (afterTimestamp)': ['evalsha'],
  'getSession (missing)': ['evalsha'],
  listSessions: ['evalsha'],
  'listSessions (user)': ['evalsha'],
  getUserState: ['evalsha'],
  getAppState: ['evalsha'],
  'createSession (exists)': ['evalsha'],
  'appendEvent (stale)': ['evalsha'],
  deleteSession: ['evalsha'],
  importSession: ['evalsha'],
};

/**
 * The app spread over many slots on one server: still one request each
 * (a script may touch every slot there), but a listing of the whole app,
 * which reads every shard's index and the app bucket at once, then the
 * page's hashes.
 */
const SPREAD_ON_ONE_SERVER = { ...ONE_SLOT, listSessions: ['evalsha', 'evalsha', 'evalsha'] };

/**
 * The outbox protocol (a Cluster): a write with app: keys applies the
 * shard's outbox to the app's slot after its own script; a read of a session
 * or a listing reads the app bucket at the same time (a second request, no
 * second wait); a listing of the whole app reads every shard's index, then
 * the page's hashes. A delete is one script: the app deltas stay with the app.
 */
const OUTBOX = {
  createSession: ['evalsha', 'evalsha'],
  appendEvent: ['evalsha', 'evalsha'],
  'appendEvent (replacing an event)': ['evalsha', 'evalsha'],
  getSession: ['evalsha', 'evalsha'],
  'getSession (numRecentEvents)': ['evalsha', 'evalsha'],
  'getSession (afterTimestamp)': ['evalsha', 'evalsha'],
  'getSession (missing)': ['evalsha', 'evalsha'],
  listSessions: ['evalsha', 'evalsha', 'evalsha'],
  'listSessions (user)': ['evalsha', 'evalsha'],
  getUserState: ['evalsha'],
  getAppState: ['evalsha'],
  'createSession (exists)': ['evalsha', 'evalsha'],
  'appendEvent (stale)': ['evalsha'],
  deleteSession: ['evalsha'],
  importSession: ['evalsha', 'evalsha'],
};

/** An append without app: keys is one request in every layout. */
async function plainAppend(nodes: RedisNodes, connectionName: string, service: RedisSessionService) {
  const appName = `rt-${randomUUID()}`;
  const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
  await service.appendEvent({ session, event: event({ a: 1, 'user:b': 1 }, 1) });
  return (
    await countRoundTrips(nodes, connectionName, () =>
      service.appendEvent({ session, event: event({ a: 2, 'user:b': 2, 'temp:t': 1 }, 2) }),
    )
  ).commands;
}

describe('round trips on a single server', () => {
  const connectionName = `adk-rt-${randomUUID().slice(0, 8)}`;
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'), { connectionName });
  });
  afterAll(async () => {
    await client.quit();
  });

  it('with the default layout (one slot per app), every operation is exactly one request to the server, app: keys included', async () => {
    const service = new RedisSessionService({ client, keyPrefix: `${keyPrefix}one:` });
    expect(await measureEveryOperation(inject('redisUrl'), connectionName, service)).toEqual(ONE_SLOT);
    expect(await plainAppend(inject('redisUrl'), connectionName, service)).toEqual(['evalsha']);
  });

  it('with the app over 256 slots, every operation but an app-wide listing is still one request', async () => {
    const service = new RedisSessionService({ client, keyPrefix: `${keyPrefix}spread:`, shards: 256 });
    expect(await measureEveryOperation(inject('redisUrl'), connectionName, service)).toEqual(SPREAD_ON_ONE_SERVER);
  });
});

const nodes = inject('redisClusterNodes');

describe.skipIf(nodes.length === 0)('round trips on a cluster of three masters', () => {
  const connectionName = `adk-rt-${randomUUID().slice(0, 8)}`;
  let client: Cluster;
  beforeAll(async () => {
    client = new Cluster(nodes, { redisOptions: { connectionName } });
  });
  afterAll(async () => {
    await client.quit();
  });

  it('every operation is one request per slot it touches, on the masters that own them', async () => {
    // No drain in the background (it would add requests of its own to the count).
    const service = new RedisSessionService({ client, keyPrefix, drainIntervalMs: Number.POSITIVE_INFINITY });
    // The first command of a fresh Cluster client also fetches the slot map; do that outside the measurement.
    await service.getAppState({ appName: 'warm-up' });
    const masters = client
      .nodes('master')
      .map((node) => ({ host: node.options.host as string, port: node.options.port as number }));
    const counts = await measureEveryOperation(masters, connectionName, service, 800);
    // A listing of the whole app reads each shard's index with a request of its own (the page's
    // shard may be on a master that has not run the second script yet: an EVAL the first time).
    const listing = counts.listSessions?.filter((command) => command === 'evalsha').length ?? 0;
    expect(listing).toBeGreaterThanOrEqual(256 + 2);
    expect(listing).toBeLessThanOrEqual(256 + 3);
    expect({ ...counts, listSessions: OUTBOX.listSessions }).toEqual(OUTBOX);
    expect(await plainAppend(masters, connectionName, service)).toEqual(['evalsha']);
  });
});
