/**
 * Which Redis the tests use. REDIS_URL names an existing single server (no
 * server is started then); REDIS_CLUSTER_NODES (`host:port,host:port,...`)
 * names an existing cluster. Without them the tests start their own
 * redis-server processes on 127.0.0.1.
 */
import {
  type RedisClusterHandle,
  type RedisServer,
  startRedisCluster,
  startRedisServer,
} from '@adk-state/test-servers/redis';

export interface ClusterNode {
  host: string;
  port: number;
}

/** Parses REDIS_CLUSTER_NODES (`host:port` separated by commas). */
export function parseNodeList(value: string): ClusterNode[] {
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
  if (fromEnv) return { nodes: parseNodeList(fromEnv), stop: async () => {} };
  if (process.env.REDIS_URL) return undefined;
  const cluster: RedisClusterHandle = await startRedisCluster({ masters: 3 });
  return { nodes: cluster.nodes, stop: () => cluster.stop() };
}

/** How the suite's outage group takes a target's Redis away and gives it back (or why it cannot). */
export type Outage = { stop(): Promise<void>; start(): Promise<void> } | { absent: string };

/**
 * Redis for one conformance target, started in the test worker so that the
 * outage group can pause it (SIGSTOP) without stalling the other test files
 * on the shared servers. The environment decides before anything starts: a
 * server named by REDIS_URL is used as it is, and cannot be paused.
 */
export interface TargetBackend<T> {
  /** Known before {@link start}, since the suite reads capabilities when it declares its tests. */
  outage: Outage;
  /** Starts the backend (or takes it from the environment); call once, in the target's setup. */
  start(): Promise<T>;
  /** Resumes it if paused, and stops what {@link start} started. */
  stop(): Promise<void>;
}

const NOT_OURS = 'the server is not ours to stop';

/** A single server of the target's own (SIGSTOP/SIGCONT for outages), or REDIS_URL. */
export function singleServerOfItsOwn(): TargetBackend<{ url: string }> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    return {
      outage: { absent: `REDIS_URL given: ${NOT_OURS}` },
      start: async () => ({ url: fromEnv }),
      stop: async () => {},
    };
  }
  let server: RedisServer | undefined;
  return {
    outage: {
      stop: async () => {
        await server?.pause();
      },
      start: async () => {
        server?.resume();
      },
    },
    async start() {
      server = await startRedisServer();
      return { url: server.url };
    },
    async stop() {
      await server?.stop();
    },
  };
}

/**
 * A three-master cluster of the target's own (every node paused for an
 * outage), REDIS_CLUSTER_NODES, or `undefined` when REDIS_URL is set without
 * REDIS_CLUSTER_NODES (the cluster tests are skipped). Its nodes wait 60 s
 * before they call a silent peer failed, so a pause of a few seconds never
 * looks like a node failure once they run again.
 */
export function clusterOfItsOwn(): TargetBackend<{ nodes: ClusterNode[] }> | undefined {
  const fromEnv = process.env.REDIS_CLUSTER_NODES;
  if (fromEnv) {
    const nodes = parseNodeList(fromEnv);
    return {
      outage: { absent: `REDIS_CLUSTER_NODES given: ${NOT_OURS}` },
      start: async () => ({ nodes }),
      stop: async () => {},
    };
  }
  if (process.env.REDIS_URL) return undefined;
  let cluster: RedisClusterHandle | undefined;
  return {
    outage: {
      stop: async () => {
        await cluster?.pause();
      },
      start: async () => {
        cluster?.resume();
      },
    },
    async start() {
      cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 60_000 });
      return { nodes: cluster.nodes };
    },
    async stop() {
      await cluster?.stop();
    },
  };
}
