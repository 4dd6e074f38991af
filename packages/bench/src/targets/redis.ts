/** `@adk-state/adapter-redis` on the bench's own redis-server. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { type RedisBackend, redisBackend } from '../backends/redis.js';
import { defineTarget, type OpenTarget } from './types.js';

export const redisStore = defineTarget<RedisBackend>({
  id: 'redis',
  label: 'adk-state Redis',
  kind: 'store',
  backend: redisBackend,
  async open(backend): Promise<OpenTarget> {
    const { RedisSessionService } = await import('@adk-state/adapter-redis');
    const support = await import('@adk-state/test-servers/redis');
    // A named connection, so that the server can tell its commands apart.
    const connectionName = `adk-state-bench-${randomUUID()}`;
    const client = new Redis(backend.url, { connectionName });
    const service = new RedisSessionService({ client, keyPrefix: 'bench:' });
    const clusterState = backend.cluster;
    return {
      service,
      sharingReads: new RedisSessionService({ client, keyPrefix: 'bench:', shareReadEvents: true }),
      cluster: async (sizes) => {
        if (!('nodes' in clusterState)) {
          return {
            masters: 0,
            users: 0,
            shards: 0,
            phases: [],
            keys: {},
            keysBusiestOverAverage: 0,
            roundTrips: {},
            error: `no cluster: ${clusterState.error}`,
          };
        }
        const { runRedisCluster } = await import('../redis-cluster.js');
        return runRedisCluster({
          nodes: clusterState.nodes,
          users: sizes.clusterUsers,
          appends: sizes.clusterAppends,
          concurrency: sizes.concurrentSessions,
        });
      },
      clientCpu: async (options) => {
        const { measureRedisClientCpu } = await import('../redis-client-cpu.js');
        return measureRedisClientCpu({ url: backend.url, ...options });
      },
      roundTrips: {
        unit: 'commands received by redis-server (MONITOR)',
        service,
        async count(operation) {
          const seen = await support.countRoundTrips(backend.url, connectionName, operation);
          return seen.roundTrips;
        },
      },
      async close() {
        client.disconnect();
      },
    };
  },
});
