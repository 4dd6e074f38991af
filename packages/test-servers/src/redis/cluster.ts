/**
 * A Redis Cluster of real `redis-server` processes on 127.0.0.1: masters, and
 * replicas if asked, created with `redis-cli --cluster create`. With replicas
 * the handle knows who replicates whom, finds the master of a key's slot, kills
 * a master and waits for its replica to take over, and makes replicas lag
 * behind their masters on demand, so that a test can lose writes that a master
 * acknowledged.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freePorts, waitUntil } from '../ports.js';
import { type RedisServer, redisCliBinary, startRedisServer } from './server.js';

const run = promisify(execFile);
const HOST = '127.0.0.1';

/** Options of {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /** Masters, each serving a share of the 16384 slots (default 3). */
  masters?: number;
  /** Replicas of each master (default 0): `{ masters: 3, replicas: 1 }` is six nodes. */
  replicas?: number;
  /**
   * `cluster-node-timeout` (default 5000 ms without replicas, 2000 ms with):
   * a master is failed over about this long after it stops answering, plus a second or two.
   */
  nodeTimeoutMs?: number;
}

/** A contiguous range of slots, both ends included. */
export type SlotRange = [from: number, to: number];

/** A master as the cluster sees it, with its replicas. */
export interface ClusterMaster {
  /** The 40-character node id. */
  id: string;
  server: RedisServer;
  slots: SlotRange[];
  replicas: Array<{ id: string; server: RedisServer }>;
}

/** Who is a master and who replicates whom, read from `CLUSTER NODES` of a live node. */
export interface ClusterTopology {
  /** The masters that serve slots, failed ones left out. */
  masters: ClusterMaster[];
}

/** What {@link RedisClusterHandle.killMaster} killed. */
export interface KilledMaster {
  id: string;
  server: RedisServer;
  slots: SlotRange[];
  /** Its replicas when it was killed: one of them takes over. */
  replicas: RedisServer[];
}

/** A running cluster started by {@link startRedisCluster}. */
export interface RedisClusterHandle {
  /** Every node, masters and replicas, in the order of `servers`. */
  nodes: Array<{ host: string; port: number }>;
  servers: RedisServer[];
  /** Pauses every node (see {@link RedisServer.pause}). */
  pause(): Promise<void>;
  /** Resumes every paused node (lagging replicas too). */
  resume(): void;
  /** Stops every node. */
  stop(): Promise<void>;
  /** The current masters and their replicas (the view of the first live node that answers). */
  topology(): Promise<ClusterTopology>;
  /** The master that serves the slot of `key` right now (`CLUSTER KEYSLOT`, then `CLUSTER NODES`). */
  masterForKey(key: string): Promise<RedisServer>;
  /** The replicas of `master` right now. */
  replicasOf(master: RedisServer): Promise<RedisServer[]>;
  /** Kills `master` with SIGKILL (no shutdown) and says what it served and who replicated it. */
  killMaster(master: RedisServer): Promise<KilledMaster>;
  /**
   * Resolves with the replica of `killed` that took over its slots, once every
   * live node sees it as their master and reports `cluster_state:ok`; rejects
   * after `timeoutMs` (default 30 s), or at once when every replica of `killed` lags.
   */
  waitForFailover(killed: KilledMaster, options?: { timeoutMs?: number }): Promise<RedisServer>;
  /**
   * Makes the replicas of `master` (default: of every master) stop receiving
   * writes: each is frozen (SIGSTOP) and its replication link is closed by the
   * master (`CLIENT KILL TYPE replica`), so what the master acknowledges from
   * now on is only in the master (and its backlog) until {@link stopLag}. A
   * lagging replica answers nothing, as a paused server. `WAIT 1 <ms>` on the
   * master returns 0 meanwhile. Resolves with the replicas made to lag.
   */
  lagReplicas(master?: RedisServer): Promise<RedisServer[]>;
  /**
   * Lets the lagging replicas run again; each one whose master is still
   * running reconnects and catches up from the backlog, and this resolves once
   * each such master lists it online again (bounded by `timeoutMs`, default 30 s).
   */
  stopLag(options?: { timeoutMs?: number }): Promise<void>;
  /** The replicas lagging right now. */
  readonly lagging: RedisServer[];
}

/** One line of `CLUSTER NODES` (the address is on 127.0.0.1, so only its port is kept). */
export interface ClusterNodeLine {
  id: string;
  port: number;
  flags: string[];
  masterId: string | undefined;
  slots: SlotRange[];
}

/** Parses the output of `CLUSTER NODES`. */
export function parseClusterNodes(text: string): ClusterNodeLine[] {
  const lines: ClusterNodeLine[] = [];
  for (const line of text.split('\n')) {
    const parts = line.trim().split(' ');
    if (parts.length < 8) continue;
    const address = (parts[1] as string).split('@')[0] as string;
    const slots: SlotRange[] = [];
    for (const part of parts.slice(8)) {
      if (part.startsWith('[')) continue; // a slot being imported or migrated
      const [from, to] = part.split('-');
      slots.push([Number(from), Number(to ?? from)]);
    }
    lines.push({
      id: parts[0] as string,
      port: Number(address.slice(address.lastIndexOf(':') + 1)),
      flags: (parts[2] as string).split(','),
      masterId: parts[3] === '-' ? undefined : parts[3],
      slots,
    });
  }
  return lines;
}

/** Runs redis-cli against a local port; undefined when it fails or takes longer than `timeoutMs`. */
async function ask(port: number, args: string[], timeoutMs = 2_000): Promise<string | undefined> {
  try {
    const { stdout } = await run(redisCliBinary(), ['-h', HOST, '-p', String(port), ...args], {
      timeout: timeoutMs,
      killSignal: 'SIGKILL',
    });
    return stdout.trim();
  } catch {
    return undefined;
  }
}

/**
 * Starts a cluster of `masters` masters with `replicas` replicas each on
 * 127.0.0.1, creates it with `redis-cli --cluster create` and resolves once
 * every node reports `cluster_state:ok`, knows every other node, and every
 * replica is linked to its master (`master_link_status:up`, listed online by
 * the master).
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const masterCount = options.masters ?? 3;
  const replicasPerMaster = options.replicas ?? 0;
  const total = masterCount * (1 + replicasPerMaster);
  const nodeTimeout = options.nodeTimeoutMs ?? (replicasPerMaster > 0 ? 2_000 : 5_000);
  const servers: RedisServer[] = [];
  const killed = new Set<RedisServer>();
  /** Lagging replica -> the master it lags behind. */
  const lagging = new Map<RedisServer, RedisServer>();

  const byPort = (port: number) => servers.find((server) => server.port === port);
  const live = () => servers.filter((server) => !killed.has(server) && !server.paused);

  const viewOf = async (server: RedisServer): Promise<ClusterNodeLine[] | undefined> => {
    const text = await ask(server.port, ['cluster', 'nodes']);
    return text === undefined ? undefined : parseClusterNodes(text);
  };

  const topology = async (): Promise<ClusterTopology> => {
    for (const server of live()) {
      const view = await viewOf(server);
      if (!view) continue;
      const usable = view.filter((line) => !line.flags.includes('fail') && !line.flags.includes('noaddr'));
      const masters: ClusterMaster[] = [];
      for (const line of usable) {
        const master = byPort(line.port);
        if (!master || !line.flags.includes('master') || line.slots.length === 0) continue;
        const replicas = usable
          .filter((other) => other.masterId === line.id && other.flags.includes('slave'))
          .flatMap((other) => {
            const replica = byPort(other.port);
            return replica ? [{ id: other.id, server: replica }] : [];
          });
        masters.push({ id: line.id, server: master, slots: line.slots, replicas });
      }
      return { masters };
    }
    throw new Error('no live node of the cluster answers CLUSTER NODES');
  };

  const masterEntry = async (master: RedisServer): Promise<ClusterMaster> => {
    const entry = (await topology()).masters.find((candidate) => candidate.server === master);
    if (!entry) throw new Error(`127.0.0.1:${master.port} is not a master of the cluster right now`);
    return entry;
  };

  /** True when `master` lists the replica on `replicaPort` as online. */
  const listsOnline = async (master: RedisServer, replicaPort: number): Promise<boolean> => {
    const info = await ask(master.port, ['info', 'replication']);
    return info?.split('\n').some((line) => line.includes(`port=${replicaPort},state=online`)) ?? false;
  };

  try {
    const ports = await freePorts(total * 2);
    for (let index = 0; index < total; index++) {
      const args = [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        String(nodeTimeout),
        '--cluster-port',
        String(ports[total + index]),
      ];
      if (replicasPerMaster > 0) {
        args.push(
          // A replica takes over however long it was cut off from its master (a lagging one was).
          '--cluster-replica-validity-factor',
          '0',
          // The replicas stay with the master they were given.
          '--cluster-allow-replica-migration',
          'no',
          '--repl-diskless-sync-delay',
          '0',
        );
      }
      servers.push(await startRedisServer({ port: ports[index] as number, args }));
    }
    const addresses = servers.map((server) => `${HOST}:${server.port}`);
    await run(redisCliBinary(), [
      '--cluster',
      'create',
      ...addresses,
      '--cluster-replicas',
      String(replicasPerMaster),
      '--cluster-yes',
    ]);
    const describe = () => `the cluster of ${total} nodes did not become ready within 60 s`;
    for (const server of servers) {
      await waitUntil(
        async () => {
          if (!(await ask(server.port, ['cluster', 'info']))?.includes('cluster_state:ok')) return false;
          const view = await viewOf(server);
          if (!view || view.length !== total) return false;
          if (view.some((line) => line.flags.some((flag) => ['handshake', 'noaddr', 'fail', 'fail?'].includes(flag))))
            return false;
          const replicas = view.filter((line) => line.flags.includes('slave') && line.masterId !== undefined);
          return replicas.length === masterCount * replicasPerMaster;
        },
        60_000,
        describe,
      );
    }
    for (const master of (await topology()).masters) {
      for (const replica of master.replicas) {
        await waitUntil(
          async () =>
            Boolean((await ask(replica.server.port, ['info', 'replication']))?.includes('master_link_status:up')) &&
            (await listsOnline(master.server, replica.server.port)),
          60_000,
          describe,
        );
      }
    }
  } catch (error) {
    await Promise.all(servers.map((server) => server.stop()));
    throw error;
  }

  return {
    nodes: servers.map((server) => ({ host: HOST, port: server.port })),
    servers,
    async pause() {
      await Promise.all(servers.map((server) => server.pause()));
    },
    resume() {
      for (const server of servers) server.resume();
      lagging.clear();
    },
    async stop() {
      lagging.clear();
      await Promise.all(servers.map((server) => server.stop()));
    },
    topology,
    async masterForKey(key) {
      for (const server of live()) {
        const slot = await ask(server.port, ['cluster', 'keyslot', key]);
        if (slot === undefined || !/^\d+$/.test(slot)) continue;
        const number = Number(slot);
        const owner = (await topology()).masters.find((master) =>
          master.slots.some(([from, to]) => number >= from && number <= to),
        );
        if (!owner) throw new Error(`no live master serves slot ${number} of ${JSON.stringify(key)}`);
        return owner.server;
      }
      throw new Error('no live node of the cluster answers CLUSTER KEYSLOT');
    },
    async replicasOf(master) {
      return (await masterEntry(master)).replicas.map((replica) => replica.server);
    },
    async killMaster(master) {
      const entry = await masterEntry(master);
      await master.kill('SIGKILL');
      killed.add(master);
      return {
        id: entry.id,
        server: master,
        slots: entry.slots,
        replicas: entry.replicas.map((replica) => replica.server),
      };
    },
    async waitForFailover(dead, waitOptions = {}) {
      const timeoutMs = waitOptions.timeoutMs ?? 30_000;
      if (dead.replicas.length === 0) throw new Error(`127.0.0.1:${dead.server.port} had no replica to take over`);
      if (dead.replicas.every((replica) => replica.paused))
        throw new Error('every replica of the killed master is paused or lagging: call stopLag() first');
      const slot = (dead.slots[0] as SlotRange)[0];
      let promoted: RedisServer | undefined;
      let last = '';
      await waitUntil(
        async () => {
          promoted = undefined;
          for (const server of live()) {
            const info = await ask(server.port, ['cluster', 'info']);
            const view = await viewOf(server);
            last = `127.0.0.1:${server.port}: ${info?.split('\n')[0] ?? 'no answer'}`;
            if (!info?.includes('cluster_state:ok') || !view) return false;
            const owner = view.find(
              (line) =>
                line.flags.includes('master') &&
                !line.flags.includes('fail') &&
                line.slots.some(([from, to]) => slot >= from && slot <= to),
            );
            const ownerServer = owner && byPort(owner.port);
            last += `, slot ${slot} served by ${owner ? `127.0.0.1:${owner.port}` : 'nobody'}`;
            if (!ownerServer || !dead.replicas.includes(ownerServer)) return false;
            if (promoted && promoted !== ownerServer) return false;
            promoted = ownerServer;
          }
          return promoted !== undefined;
        },
        timeoutMs,
        () => `no replica of 127.0.0.1:${dead.server.port} took over within ${timeoutMs} ms (last seen: ${last})`,
      );
      return promoted as RedisServer;
    },
    async lagReplicas(master) {
      const targets = (await topology()).masters.filter((entry) => master === undefined || entry.server === master);
      if (master !== undefined && targets.length === 0)
        throw new Error(`127.0.0.1:${master.port} is not a master of the cluster right now`);
      const frozen: RedisServer[] = [];
      for (const entry of targets) {
        const replicas = entry.replicas.map((replica) => replica.server).filter((replica) => !lagging.has(replica));
        if (replicas.length === 0) continue;
        // Frozen first, so that a replica cannot reconnect between the kill and the freeze.
        for (const replica of replicas) {
          await replica.pause();
          lagging.set(replica, entry.server);
          frozen.push(replica);
        }
        // The bytes the master sent before this point still reach the replica (they are in its
        // socket buffer); nothing written after it does, even if the master dies.
        const answer = await ask(entry.server.port, ['client', 'kill', 'type', 'replica']);
        if (answer === undefined) throw new Error(`127.0.0.1:${entry.server.port} did not close its replica links`);
      }
      return frozen;
    },
    async stopLag(stopOptions = {}) {
      const timeoutMs = stopOptions.timeoutMs ?? 30_000;
      const resumed = [...lagging];
      lagging.clear();
      for (const [replica] of resumed) replica.resume();
      for (const [replica, master] of resumed) {
        if (killed.has(master)) continue;
        await waitUntil(
          () => listsOnline(master, replica.port),
          timeoutMs,
          () => `127.0.0.1:${replica.port} did not reconnect to 127.0.0.1:${master.port} within ${timeoutMs} ms`,
        );
      }
    },
    get lagging() {
      return [...lagging.keys()];
    },
  };
}
