/**
 * The TCP proxy forwards both ways; holds what a client sends from a match on
 * (also a match split across chunks) while other connections flow; pauses,
 * drops and closes; and routes an ioredis Cluster through one proxy per node.
 */
import { connect, type Socket } from 'node:net';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accepts } from '../src/index.js';
import { startClusterProxies, startProxy, type TcpProxy } from '../src/proxy.js';
import { hasRedisServer, type RedisServer, startRedisCluster, startRedisServer } from '../src/redis/index.js';

const SCRIPT = "return redis.call('INCR', KEYS[1])";

/** Polls `check` every 10 ms, at most 10 s. */
async function eventually(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within 10 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A RESP command. */
const resp = (...args: string[]) =>
  `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`;

describe.runIf(await hasRedisServer())('the TCP proxy in front of one redis-server', () => {
  let server: RedisServer;
  let direct: Redis;
  let sha: string;
  beforeAll(async () => {
    server = await startRedisServer();
    direct = new Redis(server.port, '127.0.0.1');
    sha = String(await direct.script('LOAD', SCRIPT));
  });
  afterAll(async () => {
    direct?.disconnect();
    await server?.stop();
  });

  const through = (proxy: TcpProxy) => new Redis(proxy.port, '127.0.0.1', { maxRetriesPerRequest: 0 });

  it('forwards commands and answers, and counts connections and bytes', async () => {
    const proxy = await startProxy({ target: server.port });
    const client = through(proxy);
    try {
      expect(proxy.address).toBe(`127.0.0.1:${proxy.port}`);
      expect(proxy.target).toEqual({ host: '127.0.0.1', port: server.port });
      expect(await client.set('plain', 'v')).toBe('OK');
      expect(await direct.get('plain')).toBe('v');
      expect(await client.get('plain')).toBe('v');
      expect(proxy.connections).toBe(1);
      const stats = proxy.stats;
      expect(stats.accepted).toBe(1);
      expect(stats.bytesToServer).toBe(stats.bytesFromClients);
      expect(stats.bytesToClients).toBe(stats.bytesFromServer);
      expect(stats.bytesToServer).toBeGreaterThan(0);
    } finally {
      client.disconnect();
      await proxy.close();
    }
  });

  it('holds a script call and what follows it on that connection until release; the rest flows', async () => {
    const proxy = await startProxy({ target: server.port });
    const held = through(proxy);
    const other = through(proxy);
    try {
      await held.ping();
      await other.ping();
      proxy.hold(sha);
      const pipeline = held.pipeline().set('{p}before', '1').evalsha(sha, 1, '{p}counter').set('{p}after', '1').exec();
      await proxy.untilHeld();
      expect(proxy.holding).toBe(1);
      // What preceded the match went through; the script call and what followed did not.
      await eventually(async () => (await direct.get('{p}before')) === '1', 'the command before the match arrives');
      expect(await direct.get('{p}counter')).toBeNull();
      expect(await direct.get('{p}after')).toBeNull();
      // Another connection through the same proxy is not held.
      expect(await other.get('{p}counter')).toBeNull();
      proxy.release();
      expect(proxy.holding).toBe(0);
      expect(await pipeline).toEqual([
        [null, 'OK'],
        [null, 1],
        [null, 'OK'],
      ]);
      expect(await direct.get('{p}counter')).toBe('1');
      expect(await direct.get('{p}after')).toBe('1');
    } finally {
      held.disconnect();
      other.disconnect();
      await proxy.close();
    }
  });

  it('finds a match split across two chunks and forwards nothing of the second', async () => {
    const proxy = await startProxy({ target: server.port });
    const socket: Socket = connect(proxy.port, '127.0.0.1');
    let answers = '';
    socket.on('data', (chunk) => {
      answers += chunk.toString();
    });
    try {
      await new Promise((resolve) => socket.once('connect', resolve));
      proxy.hold(sha);
      const call = resp('EVALSHA', sha, '1', '{s}counter');
      const cut = call.indexOf(sha) + 20;
      const first = resp('SET', '{s}before', '1') + call.slice(0, cut);
      const second = call.slice(cut) + resp('PING');
      socket.write(first);
      // The first part holds half of the SHA only: it is forwarded.
      await eventually(() => proxy.stats.bytesToServer === first.length, 'the first part is forwarded');
      expect(proxy.holding).toBe(0);
      socket.write(second);
      await proxy.untilHeld();
      await eventually(() => proxy.stats.bytesFromClients === first.length + second.length, 'the second part arrives');
      expect(proxy.stats.bytesToServer).toBe(first.length);
      await eventually(async () => (await direct.get('{s}before')) === '1', 'the command before the match runs');
      expect(await direct.get('{s}counter')).toBeNull();
      expect(answers).toBe('+OK\r\n');
      proxy.release();
      await eventually(() => answers.includes('+PONG\r\n'), 'the held commands are answered');
      expect(answers).toBe('+OK\r\n:1\r\n+PONG\r\n');
      expect(await direct.get('{s}counter')).toBe('1');
    } finally {
      socket.destroy();
      await proxy.close();
    }
  });

  it('a predicate holds from the chunk it accepts', async () => {
    const proxy = await startProxy({ target: server.port });
    const client = through(proxy);
    try {
      await client.ping();
      proxy.hold((chunk) => chunk.includes('predicate-key'));
      const write = client.set('predicate-key', 'v');
      await proxy.untilHeld();
      expect(await direct.exists('predicate-key')).toBe(0);
      proxy.release();
      expect(await write).toBe('OK');
      expect(await direct.get('predicate-key')).toBe('v');
    } finally {
      client.disconnect();
      await proxy.close();
    }
  });

  it('pauses all traffic and forwards it in order on resume', async () => {
    const proxy = await startProxy({ target: server.port });
    const client = through(proxy);
    try {
      await client.ping();
      const sent = proxy.stats.bytesToServer;
      proxy.pause();
      expect(proxy.paused).toBe(true);
      const first = client.set('paused', 'first');
      const second = client.append('paused', '+second');
      await eventually(() => proxy.stats.bytesFromClients > sent, 'the writes reach the proxy');
      expect(proxy.stats.bytesToServer).toBe(sent);
      expect(await direct.exists('paused')).toBe(0);
      proxy.resume();
      expect(await first).toBe('OK');
      expect(await second).toBe('first+second'.length);
      expect(await direct.get('paused')).toBe('first+second');
    } finally {
      client.disconnect();
      await proxy.close();
    }
  });

  it('drops every connection and still accepts new ones; once closed, accepts none', async () => {
    const proxy = await startProxy({ target: server.port });
    const client = new Redis(proxy.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      await client.ping();
      proxy.hold('never-released');
      const pending = client.set('dropped', 'never-released');
      await proxy.untilHeld();
      const closed = new Promise((resolve) => client.once('end', resolve));
      proxy.drop();
      await closed;
      await expect(pending).rejects.toThrow();
      expect(proxy.connections).toBe(0);
      expect(await direct.exists('dropped')).toBe(0);
      proxy.release();
      const again = through(proxy);
      try {
        expect(await again.ping()).toBe('PONG');
      } finally {
        again.disconnect();
      }
    } finally {
      client.disconnect();
      await proxy.close();
    }
    expect(await accepts(proxy.port)).toBe(false);
  });

  it('passes the server going away on to the client', async () => {
    const victim = await startRedisServer();
    const proxy = await startProxy({ target: victim.port });
    const client = new Redis(proxy.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      await client.ping();
      const closed = new Promise((resolve) => client.once('end', resolve));
      await victim.kill();
      await closed;
      await eventually(() => proxy.connections === 0, 'the connection is gone');
    } finally {
      client.disconnect();
      await proxy.close();
      await victim.stop();
    }
  });
});

describe.runIf(await hasRedisServer())('one proxy per node of a cluster', () => {
  it('routes an ioredis Cluster through the proxies, and a hold on one node holds only that node', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    const proxies = await startClusterProxies(cluster.nodes);
    const client = new Cluster(proxies.startupNodes, { natMap: proxies.natMap, enableReadyCheck: true });
    try {
      for (const node of cluster.nodes)
        expect(proxies.natMap[`127.0.0.1:${node.port}`]).toEqual({
          host: '127.0.0.1',
          port: proxies.proxyFor(node.port).port,
        });
      for (let index = 0; index < 30; index++) expect(await client.set(`key-${index}`, String(index))).toBe('OK');
      // Every node was reached through its proxy, and the client knows only the proxies.
      for (const proxy of proxies.proxies) expect(proxy.stats.bytesToServer).toBeGreaterThan(0);
      const proxyPorts = proxies.proxies.map((proxy) => proxy.port);
      for (const node of client.nodes('all')) expect(proxyPorts).toContain(node.options.port);

      const owner = await cluster.masterForKey('{h}held');
      let elsewhere = 'other-0';
      for (let index = 1; (await cluster.masterForKey(elsewhere)) === owner; index++) elsewhere = `other-${index}`;
      const proxy = proxies.proxyFor(owner.port);
      proxy.hold('held-value');
      const write = client.set('{h}held', 'held-value');
      await proxy.untilHeld();
      expect(await client.set(elsewhere, 'flows')).toBe('OK');
      const ownerClient = new Redis(owner.port, '127.0.0.1');
      try {
        expect(await ownerClient.exists('{h}held')).toBe(0);
        proxies.release();
        expect(await write).toBe('OK');
        expect(await ownerClient.get('{h}held')).toBe('held-value');
      } finally {
        ownerClient.disconnect();
      }
    } finally {
      client.disconnect();
      await proxies.close();
      await cluster.stop();
    }
  });
});

describe.runIf(await hasRedisServer())('proxies in front of a cluster with replicas', () => {
  it('the ioredis Cluster follows a failover through the proxies', async () => {
    const cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1_000 });
    const proxies = await startClusterProxies(cluster.nodes);
    const client = new Cluster(proxies.startupNodes, { natMap: proxies.natMap });
    try {
      expect(await client.set('{x}key', 'before')).toBe('OK');
      const master = await cluster.masterForKey('{x}key');
      // WAIT counts the replicas that have this connection's writes: make sure the replica has the key.
      const direct = new Redis(master.port, '127.0.0.1');
      try {
        expect(await direct.set('{x}key', 'before')).toBe('OK');
        expect(await direct.call('wait', '1', '20000')).toBe(1);
      } finally {
        direct.disconnect();
      }
      const killed = await cluster.killMaster(master);
      const promoted = await cluster.waitForFailover(killed);
      const before = proxies.proxyFor(promoted.port).stats.bytesToServer;
      // The first command after the kill may meet the dead connection; the client then learns the new map.
      await eventually(
        async () => (await client.get('{x}key').catch(() => undefined)) === 'before',
        'the client reads the key from the promoted replica',
      );
      expect(proxies.proxyFor(promoted.port).stats.bytesToServer).toBeGreaterThan(before);
      const proxyPorts = proxies.proxies.map((proxy) => proxy.port);
      for (const node of client.nodes('all')) expect(proxyPorts).toContain(node.options.port);
    } finally {
      client.disconnect();
      await proxies.close();
      await cluster.stop();
    }
  });
});
