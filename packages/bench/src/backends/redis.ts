/**
 * A private redis-server for the bench, and a cluster of three masters for
 * the scale-out workload, both started with `@adk-state/test-servers/redis`
 * (no persistence: no AOF, no snapshots).
 */
import { Redis } from 'ioredis';
import type { BackendSpec, Probe, RunningBackend } from './types.js';

export interface RedisBackend extends RunningBackend {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /** The masters of the bench's cluster, or why it could not be started. */
  cluster: { nodes: Array<{ host: string; port: number }> } | { error: string };
}

/** Masters of the bench's cluster. */
export const CLUSTER_MASTERS = 3;

/**
 * The ceiling of an append's server side from this client: a Lua script that
 * runs three writing commands (a hash field, a string, a sorted-set member),
 * sent with EVALSHA as the store sends its scripts. It rewrites the same keys,
 * so memory stays flat however often it runs.
 */
const RAW_SCRIPT = `redis.call('HSET', KEYS[1], 'f', ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
return 1`;

export const RAW_SCRIPT_PROBE = 'EVALSHA (3 commands)';

export const redisBackend: BackendSpec<RedisBackend> = {
  id: 'redis',
  label: 'Redis',
  async start() {
    const support = await import('@adk-state/test-servers/redis');
    const server = await support.startRedisServer();
    const client = new Redis(server.url);
    let cluster: Awaited<ReturnType<typeof support.startRedisCluster>> | undefined;
    try {
      const info = String(await client.info('server'));
      const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
      const sha = String(await client.script('LOAD', RAW_SCRIPT));
      let clusterState: RedisBackend['cluster'];
      try {
        // Started now, so that the bench pins it with the other servers.
        cluster = await support.startRedisCluster({ masters: CLUSTER_MASTERS });
        clusterState = { nodes: cluster.nodes };
      } catch (error) {
        clusterState = { error: error instanceof Error ? error.message : String(error) };
      }
      const probes: Probe[] = [
        { name: 'PING', run: () => client.ping() },
        { name: 'SET', run: () => client.set('bench:raw', 'x') },
        {
          name: RAW_SCRIPT_PROBE,
          run: () => client.evalsha(sha, 3, 'bench:raw:h{r}', 'bench:raw:s{r}', 'bench:raw:z{r}', 'x', '1'),
        },
      ];
      const clusterNote =
        'nodes' in clusterState
          ? `; a cluster of ${CLUSTER_MASTERS} masters (no replicas) for the scale-out workload`
          : `; no cluster (${clusterState.error})`;
      return {
        url: server.url,
        cluster: clusterState,
        details: `Redis ${version} (own redis-server on 127.0.0.1, no persistence${clusterNote})`,
        probes,
        async stop() {
          client.disconnect();
          await Promise.all([server.stop(), cluster?.stop()]);
        },
      };
    } catch (error) {
      client.disconnect();
      await Promise.all([server.stop(), cluster?.stop()]);
      throw error;
    }
  },
};
