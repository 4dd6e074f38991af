/**
 * Which Redis the tests use. REDIS_URL names an existing single server (no
 * server is started then); REDIS_CLUSTER_NODES (`host:port,host:port,...`)
 * names an existing cluster. Without them the tests start their own
 * redis-server processes on 127.0.0.1.
 */
import type { RedisClusterHandle, RedisServer } from './redis-server.js';
import { startRedisCluster, startRedisServer } from './redis-server.js';

export interface ClusterNode {
  host: string;
  port: number;
}

/** Parses REDIS_CLUSTER_NODES (`host:port` separated by commas). */
export function parseClusterNodes(value: string): ClusterNode[] {
  return value
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map((part) => {
      const cut = part.lastIndexOf(':');
      return { host: part.slice(0, cut), port: Number(part.slice(cut + 1)) };
    });
}

/** The single server to test against: REDIS_URL, or a fresh local one. */
export async function singleServerTarget(): Promise<{ url: string; stop: () => Promise<void> }> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) return { url: fromEnv, stop: async () => {} };
  const server: RedisServer = await startRedisServer();
  return { url: server.url, stop: () => server.stop() };
}

/**
 * The cluster to test against: REDIS_CLUSTER_NODES, or a fresh local one with
 * three masters; `undefined` (the cluster tests are skipped) when REDIS_URL is
 * set without REDIS_CLUSTER_NODES.
 */
export async function clusterTarget(): Promise<{ nodes: ClusterNode[]; stop: () => Promise<void> } | undefined> {
  const fromEnv = process.env.REDIS_CLUSTER_NODES;
  if (fromEnv) return { nodes: parseClusterNodes(fromEnv), stop: async () => {} };
  if (process.env.REDIS_URL) return undefined;
  const cluster: RedisClusterHandle = await startRedisCluster({ masters: 3 });
  return { nodes: cluster.nodes, stop: () => cluster.stop() };
}
