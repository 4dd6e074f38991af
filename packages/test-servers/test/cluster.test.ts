/**
 * A cluster with replicas: who replicates whom, which master serves a key, a
 * replica that lags loses what its master acknowledged when the master is
 * killed, and `WAIT` counts a replica only once it has the write.
 */
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accepts } from '../src/index.js';
import { hasRedisServer, parseClusterNodes, type RedisClusterHandle, startRedisCluster } from '../src/redis/index.js';

const client = (port: number) => new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0, lazyConnect: false });

describe.runIf(await hasRedisServer())('a cluster of three masters with a replica each', () => {
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1_000 });
  });
  afterAll(async () => {
    await cluster?.stop();
    for (const node of cluster?.nodes ?? []) expect(await accepts(node.port)).toBe(false);
  });

  it('has three masters serving every slot, each replicated by a linked replica of its own', async () => {
    expect(cluster.servers).toHaveLength(6);
    const { masters } = await cluster.topology();
    expect(masters).toHaveLength(3);
    const slots = masters.flatMap((master) => master.slots).reduce((sum, [from, to]) => sum + to - from + 1, 0);
    expect(slots).toBe(16384);
    const everyone = masters.flatMap((master) => [master.server, ...master.replicas.map((replica) => replica.server)]);
    expect(new Set(everyone).size).toBe(6);
    for (const master of masters) {
      expect(master.replicas).toHaveLength(1);
      expect(await cluster.replicasOf(master.server)).toEqual(master.replicas.map((replica) => replica.server));
      const replica = client(master.replicas[0]!.server.port);
      try {
        const info = String(await replica.info('replication'));
        expect(info).toContain('role:slave');
        expect(info).toContain(`master_port:${master.server.port}`);
        expect(info).toContain('master_link_status:up');
        expect(String(await replica.call('cluster', 'info'))).toContain('cluster_state:ok');
      } finally {
        replica.disconnect();
      }
    }
  });

  it('finds the master that serves a key: it takes the write, the others redirect', async () => {
    const owner = await cluster.masterForKey('some-key');
    const { masters } = await cluster.topology();
    for (const master of masters) {
      const redis = client(master.server.port);
      try {
        if (master.server === owner) expect(await redis.set('some-key', 'v')).toBe('OK');
        else await expect(redis.set('some-key', 'v')).rejects.toThrow(/MOVED/);
      } finally {
        redis.disconnect();
      }
    }
  });

  it('WAIT counts a lagging replica only once it has the write', async () => {
    const master = await cluster.masterForKey('{w}key');
    const [replicaServer] = await cluster.replicasOf(master);
    const redis = client(master.port);
    try {
      expect(await cluster.lagReplicas(master)).toEqual([replicaServer]);
      expect(cluster.lagging).toEqual([replicaServer]);
      expect(await redis.set('{w}key', 'written while lagging')).toBe('OK');
      // The master acknowledged the write; no replica has it.
      expect(await redis.call('wait', '1', '200')).toBe(0);
      await cluster.stopLag();
      expect(cluster.lagging).toEqual([]);
      expect(await redis.call('wait', '1', '20000')).toBe(1);
      const replica = client(replicaServer!.port);
      try {
        await replica.call('readonly');
        expect(await replica.get('{w}key')).toBe('written while lagging');
      } finally {
        replica.disconnect();
      }
    } finally {
      redis.disconnect();
    }
  });

  it('a write acknowledged while the replica lags is gone once the master is killed and the replica took over', async () => {
    const master = await cluster.masterForKey('{f}kept');
    expect(await cluster.masterForKey('{f}lost')).toBe(master);
    const [replica] = await cluster.replicasOf(master);
    const redis = client(master.port);
    try {
      expect(await redis.set('{f}kept', 'replicated')).toBe('OK');
      expect(await redis.call('wait', '1', '20000')).toBe(1);
      await cluster.lagReplicas(master);
      expect(await redis.set('{f}lost', 'acknowledged by the master only')).toBe('OK');
      expect(await redis.get('{f}lost')).toBe('acknowledged by the master only');
      expect(await redis.call('wait', '1', '100')).toBe(0);
    } finally {
      redis.disconnect();
    }

    const killed = await cluster.killMaster(master);
    expect(killed.replicas).toEqual([replica]);
    expect(await accepts(master.port)).toBe(false);
    // Nothing can take over while the only replica is frozen.
    await expect(cluster.waitForFailover(killed)).rejects.toThrow(/stopLag/);
    await cluster.stopLag();
    const promoted = await cluster.waitForFailover(killed, { timeoutMs: 60_000 });
    expect(promoted).toBe(replica);
    expect(await cluster.masterForKey('{f}kept')).toBe(promoted);

    const { masters } = await cluster.topology();
    expect(masters.map((entry) => entry.server)).toContain(promoted);
    expect(masters.map((entry) => entry.server)).not.toContain(master);

    const direct = client(promoted.port);
    try {
      expect(String(await direct.info('replication'))).toContain('role:master');
      expect(await direct.get('{f}kept')).toBe('replicated');
      expect(await direct.get('{f}lost')).toBeNull();
    } finally {
      direct.disconnect();
    }

    // A cluster client started from the surviving nodes sees the same.
    const alive = cluster.nodes.filter((node) => node.port !== master.port);
    const clusterClient = new Cluster(alive, { enableOfflineQueue: true });
    try {
      expect(await clusterClient.get('{f}kept')).toBe('replicated');
      expect(await clusterClient.get('{f}lost')).toBeNull();
    } finally {
      clusterClient.disconnect();
    }
  });
});

describe('parseClusterNodes', () => {
  it('reads ids, ports, flags, masters and slot ranges, leaving out slots in migration', () => {
    const text = [
      'aaa 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 7000 [5461->-bbb]',
      'bbb 127.0.0.1:7001@17001,host master,fail - 1 2 2 disconnected',
      'ccc 127.0.0.1:7002@17002 slave aaa 0 3 1 connected',
    ].join('\n');
    expect(parseClusterNodes(text)).toEqual([
      {
        id: 'aaa',
        port: 7000,
        flags: ['myself', 'master'],
        masterId: undefined,
        slots: [
          [0, 5460],
          [7000, 7000],
        ],
      },
      { id: 'bbb', port: 7001, flags: ['master', 'fail'], masterId: undefined, slots: [] },
      { id: 'ccc', port: 7002, flags: ['slave'], masterId: 'aaa', slots: [] },
    ]);
  });
});
