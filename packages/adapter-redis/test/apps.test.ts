/** `listAppNames`: the apps under a key prefix, read from key names, on one server and on every master of a Cluster. */
import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { appOfKey, listAppNames } from '../src/apps.js';
import { RedisSessionService } from '../src/index.js';

/** Names that need every escape of the tag and of the text encoding. */
const APPS = ['plain', 'with {braces} and #hash', '100% sure', 'shard#3}', 'nul\u0000and\u0001', 'emoji 🙂', 'x'];

async function fill(service: RedisSessionService, apps: readonly string[]): Promise<void> {
  for (const appName of apps) {
    await service.createSession({ appName, userId: `user of ${appName}`, state: { 'app:seen': true } });
  }
}

describe('listAppNames', () => {
  let client: Redis;
  const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}*[?]:`;

  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await client.quit();
  });

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

  const nodes = inject('redisClusterNodes');
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
