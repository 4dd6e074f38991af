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

/**
 * The round trip of one append, raw: a Lua script that runs the commands the
 * store's append script runs on one server (the revision read, the event id,
 * the log entry, the session, user and app hashes, the two listing indexes),
 * with an entry of an event's size, sent with EVALSHA from the same client.
 * What is left between it and the store's append is the work of this process.
 */
export const APPEND_SCRIPT = `local meta = redis.call('HMGET', KEYS[1], 'r', 'n')
local count = tonumber(meta[2] or '0')
redis.call('HSETNX', KEYS[3], ARGV[2], count)
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'r', count + 1, 't', ARGV[3], 'n', count + 1, 'k', ARGV[4])
redis.call('HSET', KEYS[4], 'u', ARGV[4])
redis.call('HSET', KEYS[8], 'a', ARGV[4])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[5])
redis.call('ZADD', KEYS[6], ARGV[3], ARGV[5])
return 0`;

export const APPEND_SCRIPT_PROBE = "EVALSHA (an append's 8 commands)";

/** The keys of the raw append, in the store's order (session, log, ids, user, indexes, expiry, app), in one slot. */
export const APPEND_KEYS = ['s', 'e', 'i', 'u', 'l', 'm', 'x', 'a'].map((part) => `bench:raw:{a}:${part}`);

/** About the JSON size of the bench's events. */
const ENTRY = `1700000000000 "e"\n${JSON.stringify({ author: 'agent', content: { parts: [{ text: 'x'.repeat(300) }] } })}`;

/** The ARGV of the raw append's `count`-th call: the entry, a new event id, the time, a value, the index member. */
export function appendScriptArguments(count: number): string[] {
  const id = String(count);
  return [ENTRY, id, String(Date.now()), id, 'm'];
}

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
      const appendSha = String(await client.script('LOAD', APPEND_SCRIPT));
      let appended = 0;
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
        {
          name: APPEND_SCRIPT_PROBE,
          run: () =>
            client.evalsha(appendSha, APPEND_KEYS.length, ...APPEND_KEYS, ...appendScriptArguments(++appended)),
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
