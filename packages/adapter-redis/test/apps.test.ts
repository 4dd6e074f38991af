/**
 * `listAppNames` and `listSessionKeys`: the apps and the sessions under a key
 * prefix, read from key names (not from the listing's indexes), on one server
 * and on every master of a Cluster.
 */
import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { appKeyHead, appOfKey, listAppNames, listSessionKeys, sessionOfKey } from '../src/apps.js';
import { RedisSessionService, type RedisStore } from '../src/index.js';

/** Names that need every escape of the tag and of the text encoding. */
const APPS = ['plain', 'with {braces} and #hash', '100% sure', 'shard#3}', 'nul\u0000and\u0001', 'emoji 🙂', 'x'];

async function fill(service: RedisSessionService, apps: readonly string[]): Promise<void> {
  for (const appName of apps) {
    await service.createSession({ appName, userId: `user of ${appName}`, state: { 'app:seen': true } });
  }
}

const nodes = inject('redisClusterNodes');
/** Glob characters in the prefix: the scans must take them literally. */
const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}*[?]:`;
let client: Redis;

beforeAll(() => {
  client = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  await client.quit();
});

describe('listAppNames', () => {
  it('names every app stored under the prefix once, whatever its name, and none of another prefix', async () => {
    await fill(new RedisSessionService({ client, keyPrefix, shards: 4 }), APPS);
    await fill(new RedisSessionService({ client, keyPrefix: `${keyPrefix}other:` }), ['elsewhere']);
    // A key without a tag, as the layout marker is, is skipped.
    await client.set(`${keyPrefix}layout`, '1');
    expect(await listAppNames(client, keyPrefix, { count: 3 })).toEqual([...APPS].sort());
    expect(await listAppNames(client, `${keyPrefix}other:`)).toEqual(['elsewhere']);
    expect(await listAppNames(client, `${keyPrefix}none:`)).toEqual([]);
  });

  it('reads the app of a key name, with or without a shard, and nothing from a key without braces', () => {
    expect(appOfKey('p:{a%7Bb%23c%25}:s', 'p:')).toBe('a{b#c%');
    expect(appOfKey('p:{app#12}:s', 'p:')).toBe('app');
    expect(appOfKey('p:layout', 'p:')).toBeUndefined();
    expect(appOfKey('q:{app}:s', 'p:')).toBeUndefined();
  });

  it.skipIf(nodes.length === 0)('scans every master of a Cluster', async () => {
    const cluster = new Cluster(nodes);
    try {
      const clusterPrefix = `${keyPrefix}cluster:`;
      const apps = Array.from({ length: 24 }, (_, n) => `app ${n}`);
      await fill(new RedisSessionService({ client: cluster, keyPrefix: clusterPrefix }), apps);
      const perMaster = await Promise.all(cluster.nodes('master').map((node) => listAppNames(node, clusterPrefix)));
      // The apps are spread over more than one master, so one master's scan alone would miss some.
      expect(perMaster.filter((names) => names.length > 0).length).toBeGreaterThan(1);
      expect(await listAppNames(cluster, clusterPrefix)).toEqual([...apps].sort());
    } finally {
      await cluster.quit();
    }
  });
});

describe('listSessionKeys', () => {
  const base = `${keyPrefix}keys:`;

  /** Users and ids that need every escape; one id holds what a key's later parts look like. */
  const SESSIONS = [
    { userId: 'ada', sessionId: 'one' },
    { userId: 'ada', sessionId: 'x}:s:y' },
    { userId: 'nul\u0000user', sessionId: 'emoji 🙂' },
    { userId: 'with {braces} #1', sessionId: '\u0001' },
  ];

  it('names every session of the app, on every shard, whatever its names; none of another app, even one whose name begins the same', async () => {
    for (const shards of [1, 4]) {
      const prefix = `${base}${shards}:`;
      const service = new RedisSessionService({ client, keyPrefix: prefix, shards });
      for (const key of SESSIONS) await service.createSession({ appName: 'shop', ...key, state: { 'user:u': 1 } });
      for (const appName of ['shop#1', 'shop%', 'shopping', 'other']) {
        await service.createSession({ appName, userId: 'ada', sessionId: 'elsewhere' });
      }
      const sorted = [...SESSIONS].sort((a, b) =>
        a.userId === b.userId ? (a.sessionId < b.sessionId ? -1 : 1) : a.userId < b.userId ? -1 : 1,
      );
      expect(await listSessionKeys(client, prefix, 'shop', undefined, { count: 2 })).toEqual(sorted);
      expect(await listSessionKeys(client, prefix, 'shop', 'ada')).toEqual(sorted.filter((k) => k.userId === 'ada'));
      expect(await listSessionKeys(client, prefix, 'shop#1', undefined)).toEqual([
        { userId: 'ada', sessionId: 'elsewhere' },
      ]);
      expect(await listSessionKeys(client, prefix, 'none', undefined)).toEqual([]);
      await service.close();
    }
  });

  it('finds a session whose listing entries were removed, and not one that was deleted; the store offers it', async () => {
    const prefix = `${base}lost:`;
    const service = new RedisSessionService({ client, keyPrefix: prefix });
    const kept = await service.createSession({ appName: 'app', userId: 'ada', sessionId: 'kept' });
    await service.createSession({ appName: 'app', userId: 'ada', sessionId: 'gone' });
    await service.deleteSession({ appName: 'app', userId: 'ada', sessionId: 'gone' });
    await client.zrem(`${prefix}{app}:l`, 'kept\u0000ada');
    await client.zrem(`${prefix}{app}:m:ada`, 'kept');
    expect((await service.listSessions({ appName: 'app' })).sessions).toEqual([]);
    const store = service.store as RedisStore;
    expect(await store.listSessionKeys('app', undefined)).toEqual([{ userId: 'ada', sessionId: kept.id }]);
    expect(await store.listSessionKeys('app', 'bob')).toEqual([]);
    await service.close();
  });

  it('reads a session from the name of its hash only', () => {
    expect(sessionOfKey('p:{app}:s:ada\u0000one', appKeyHead('p:', 'app'))).toEqual({
      userId: 'ada',
      sessionId: 'one',
    });
    expect(sessionOfKey('p:{app#12}:s:ada\u0000one', appKeyHead('p:', 'app'))).toEqual({
      userId: 'ada',
      sessionId: 'one',
    });
    expect(sessionOfKey('p:{a%7Bb}:s:\u0001\u0001\u0000x', appKeyHead('p:', 'a{b'))).toEqual({
      userId: '\u0000',
      sessionId: 'x',
    });
    // Other parts of the layout, other apps, other prefixes, shards that are not numbers.
    for (const key of [
      'p:{app}:e:ada\u0000one',
      'p:{app}:u:ada',
      'p:{app}:l',
      'p:{app}:s:no separator',
      'p:{apple}:s:ada\u0000one',
      'p:{app#x}:s:ada\u0000one',
      'q:{app}:s:ada\u0000one',
      'p:{app}:e:u}:s:ada\u0000one',
    ]) {
      expect(sessionOfKey(key, appKeyHead('p:', 'app')), key).toBeUndefined();
    }
  });

  it.skipIf(nodes.length === 0)('scans every master of a Cluster', async () => {
    const cluster = new Cluster(nodes);
    try {
      const prefix = `${base}cluster:`;
      const service = new RedisSessionService({ client: cluster, keyPrefix: prefix });
      const users = Array.from({ length: 24 }, (_, n) => `user ${String(n).padStart(2, '0')}`);
      for (const userId of users) await service.createSession({ appName: 'spread', userId, sessionId: 's' });
      const perMaster = await Promise.all(
        cluster.nodes('master').map((node) => listSessionKeys(node, prefix, 'spread', undefined)),
      );
      expect(perMaster.filter((keys) => keys.length > 0).length).toBeGreaterThan(1);
      expect(await listSessionKeys(cluster, prefix, 'spread', undefined)).toEqual(
        users.map((userId) => ({ userId, sessionId: 's' })),
      );
      await service.close();
    } finally {
      await cluster.quit();
    }
  });
});
