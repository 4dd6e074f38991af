/**
 * Starts the shared single server and the three-master cluster once for the
 * whole test run (or takes them from REDIS_URL / REDIS_CLUSTER_NODES) and
 * hands their addresses to the test files through `inject`. Every key the
 * tests write to these servers starts with `testPrefix`; on servers given by
 * the environment, those keys are deleted at the end.
 */
import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';
import { type ClusterNode, clusterTarget, singleServerTarget } from './support/targets.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    /** Empty when no cluster is available (REDIS_URL set without REDIS_CLUSTER_NODES). */
    redisClusterNodes: ClusterNode[];
    /** The start of every key prefix the tests use on the shared servers. */
    testPrefix: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const testPrefix = `adk-test-${randomUUID().slice(0, 8)}`;
  const single = await singleServerTarget();
  let cluster: Awaited<ReturnType<typeof clusterTarget>>;
  try {
    cluster = await clusterTarget();
  } catch (error) {
    await single.stop();
    throw error;
  }
  project.provide('redisUrl', single.url);
  project.provide('redisClusterNodes', cluster?.nodes ?? []);
  project.provide('testPrefix', testPrefix);
  return async () => {
    if (process.env.REDIS_URL) {
      const client = new Redis(single.url);
      await removeKeys([client], testPrefix);
      await client.quit();
    }
    if (process.env.REDIS_CLUSTER_NODES && cluster) {
      const client = new Cluster(cluster.nodes);
      await client.ping();
      await removeKeys(client.nodes('master'), testPrefix);
      await client.quit();
    }
    await Promise.all([single.stop(), cluster?.stop()]);
  };
}

/** Deletes every key that starts with `prefix` on each node. */
async function removeKeys(nodes: Redis[], prefix: string): Promise<void> {
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) await node.del(key);
    } while (cursor !== '0');
  }
}
