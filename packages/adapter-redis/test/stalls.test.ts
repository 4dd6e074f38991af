/**
 * A connection that stops answering while it stays open (a half-open TCP
 * connection, a middlebox that lost a reply), made with a loopback proxy that
 * holds back everything its client sends from one command on. The service's
 * own client replaces such a connection once a command has waited a whole
 * call bound for its reply: the calls after it work again, instead of timing
 * out until the kernel drops the connection. The same for every node
 * connection of a cluster.
 */
import { randomUUID } from 'node:crypto';
import { BackendError } from '@adk-state/core';
import { startClusterProxies } from '@adk-state/test-servers/proxy';
import { Cluster, type Redis } from 'ioredis';
import * as ioredis50 from 'ioredis-v5-0';
import { describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { connectionsOf, destroySockets, watchStalls } from '../src/stalls.js';
import { proxyToSharedServer } from './support/index.js';

// 5.0.0 has no named `Redis` export; its default export is the class.
const Redis50 = (ioredis50 as unknown as { default: typeof Redis }).default;

const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `attempt` until it resolves, for at most `withinMs`; its value, or the last failure. */
async function firstSuccess<T>(withinMs: number, attempt: () => Promise<T>): Promise<{ value?: T; error?: unknown }> {
  const until = Date.now() + withinMs;
  let error: unknown;
  while (Date.now() < until) {
    try {
      return { value: await attempt() };
    } catch (failure) {
      error = failure;
      await sleep(20);
    }
  }
  return { error };
}

describe('a connection that stops answering', () => {
  it("the service's own client replaces it once a command has waited a whole call bound, and reads go on", async () => {
    const proxy = await proxyToSharedServer();
    const service = new RedisSessionService({ url: `redis://${proxy.address}`, keyPrefix, timeoutMs: 400 });
    try {
      const appName = `app-${randomUUID()}`;
      const victim = `silent-${randomUUID()}`;
      await service.createSession({ appName, userId: 'ada', sessionId: 'alive', state: { n: 1 } });
      await service.createSession({ appName, userId: 'ada', sessionId: victim });
      const accepted = proxy.stats.accepted;

      // From the read of the victim on, nothing this connection sends reaches the server.
      proxy.hold(victim);
      const silent = await service.getSession({ appName, userId: 'ada', sessionId: victim }).catch((error) => error);
      expect(silent).toBeInstanceOf(BackendError);
      expect(silent).toMatchObject({ timedOut: true, mayHaveApplied: false });
      proxy.hold(() => false);

      const started = Date.now();
      const { value, error } = await firstSuccess(5_000, () =>
        service.getSession({ appName, userId: 'ada', sessionId: 'alive' }),
      );
      expect(error).toBeUndefined();
      expect(value?.state).toEqual({ n: 1 });
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(proxy.stats.accepted).toBe(accepted + 1);
    } finally {
      await service.close();
      await proxy.close();
    }
  });

  it('close() on a silent connection drops it after the 2 s it gives QUIT, without waiting for the socket to end politely', async () => {
    const proxy = await proxyToSharedServer();
    const service = new RedisSessionService({ url: `redis://${proxy.address}`, keyPrefix, timeoutMs: 60_000 });
    try {
      const key = { appName: `app-${randomUUID()}`, userId: 'ada', sessionId: 's1' };
      await service.createSession(key);
      proxy.hold(() => true);
      const silent = service.getSession(key).catch((error: unknown) => error);
      await proxy.untilHeld();
      const started = Date.now();
      await service.close();
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(service.client.status).toBe('end');
      expect(await silent).toBeInstanceOf(BackendError);
    } finally {
      await service.close();
      await proxy.close();
    }
  });

  it.skipIf(inject('redisClusterNodes').length === 0)(
    "on a cluster, close() destroys every node's socket, taken before disconnect() forgets the nodes",
    async () => {
      const cluster = new Cluster(inject('redisClusterNodes'), { redisOptions: { maxRetriesPerRequest: 0 } });
      cluster.on('error', () => {});
      try {
        await cluster.set(`{${keyPrefix}}k`, 'v');
        const connections = connectionsOf(cluster);
        // The nodes connected so far (a node the cluster has not used yet has no socket).
        const sockets = connections
          .map((node) => (node as { stream?: { destroyed: boolean } }).stream)
          .filter((socket) => socket !== undefined);
        expect(sockets.length).toBeGreaterThanOrEqual(1);
        cluster.disconnect();
        expect(connectionsOf(cluster)).toEqual([]);
        destroySockets(connections);
        for (const socket of sockets) expect(socket.destroyed).toBe(true);
      } finally {
        cluster.disconnect();
      }
    },
  );

  it('a reply still arriving is not a stall: the connection is dropped only once no byte came for the whole bound', async () => {
    // A connection as the watch reads it: one command waiting, and a stream whose byte count the test moves.
    const head = {};
    const destroyed: Error[] = [];
    const connection = {
      status: 'ready',
      commandQueue: { length: 1, peekFront: () => head },
      stream: {
        bytesRead: 0,
        // As ioredis, once its stream is gone: the waiting commands fail, and the queue is empty.
        destroy: (error: Error) => {
          destroyed.push(error);
          connection.commandQueue.length = 0;
        },
      },
    };
    const stop = watchStalls(connection as unknown as Redis, 100);
    try {
      // A large reply comes in for four bounds: no drop.
      for (let elapsed = 0; elapsed < 400; elapsed += 10) {
        connection.stream.bytesRead += 65_536;
        await sleep(10);
      }
      expect(destroyed).toEqual([]);
      // Then nothing more: dropped within the bound and a quarter (and a check's slack).
      await sleep(250);
      expect(destroyed).toHaveLength(1);
      expect(destroyed[0]?.message).toMatch(/no reply for 100 ms/);
    } finally {
      stop();
    }
  });

  it('with ioredis 5.0.0, the oldest the peer range allows, whose internals the watch reads too', async () => {
    const proxy = await proxyToSharedServer();
    const client = new Redis50(`redis://${proxy.address}`, { maxRetriesPerRequest: 0, retryStrategy: () => 20 });
    client.on('error', () => {});
    const stop = watchStalls(client, 300);
    try {
      const key = `${keyPrefix}${randomUUID()}`;
      await client.set(key, 'yes');
      proxy.hold('silent-');
      const silent = client.get(`${key}silent-`).catch((error: unknown) => error);
      await proxy.untilHeld();
      proxy.hold(() => false);
      const { value, error } = await firstSuccess(5_000, () => client.get(key));
      expect(error).toBeUndefined();
      expect(value).toBe('yes');
      expect(await silent).toBeInstanceOf(Error);
      expect(proxy.stats.accepted).toBe(2);
    } finally {
      stop();
      client.disconnect();
      await proxy.close();
    }
  });

  it.skipIf(inject('redisClusterNodes').length === 0)(
    'on a cluster, the connection of the node that went silent is replaced, and its slots answer again',
    async () => {
      const proxies = await startClusterProxies(inject('redisClusterNodes'));
      const cluster = new Cluster(proxies.startupNodes, {
        natMap: proxies.natMap,
        redisOptions: { maxRetriesPerRequest: 0 },
      });
      cluster.on('error', () => {});
      const stop = watchStalls(cluster, 300);
      try {
        const tag = `{${keyPrefix}${randomUUID()}}`;
        await cluster.set(`${tag}alive`, 'yes');
        const accepted = proxies.proxies.reduce((sum, proxy) => sum + proxy.stats.accepted, 0);
        const victim = `${tag}silent-${randomUUID()}`;
        for (const proxy of proxies.proxies) proxy.hold(victim);
        const silent = cluster.get(victim).catch((error: unknown) => error);
        await Promise.race(proxies.proxies.map((proxy) => proxy.untilHeld()));
        for (const proxy of proxies.proxies) proxy.hold(() => false);
        // Behind the silent command, on the same node connection.
        const { value, error } = await firstSuccess(5_000, () => cluster.get(`${tag}alive`));
        expect(error).toBeUndefined();
        expect(value).toBe('yes');
        // The silent command ended too: failed, or sent again by the cluster on the new connection.
        const ended = await silent;
        expect(ended === null || ended instanceof Error).toBe(true);
        const now = proxies.proxies.reduce((sum, proxy) => sum + proxy.stats.accepted, 0);
        expect(now).toBeGreaterThan(accepted);
      } finally {
        stop();
        cluster.disconnect();
        await proxies.close();
      }
    },
  );
});
