/**
 * Workload 8, Redis on a cluster: one app with many users on the bench's
 * three-master cluster, the store at its default `shards`. It creates a
 * session per user, then appends for every user twice over (appends without
 * `app:` keys, then with them), and reads from every master what it ran
 * (`INFO commandstats`) and what it holds (`DBSIZE`), and counts the round
 * trips of both kinds of append. Run once: it counts, it does not time.
 */
import { randomUUID } from 'node:crypto';
import type { Session } from '@google/adk';
import { Cluster, Redis } from 'ioredis';
import { benchEvent } from './events.js';
import type { ClusterPhase, ClusterResult } from './results.js';
import { sessionState } from './seed-data.js';

export interface ClusterParams {
  nodes: Array<{ host: string; port: number }>;
  users: number;
  /** Appends per user in each phase. */
  appends: number;
  /** Callers appending at once (each owns a disjoint set of users). */
  concurrency: number;
}

/** Commands of the bench itself or of the client's housekeeping, not of the workload. */
const HOUSEKEEPING = new Set(['info', 'cluster', 'client', 'command', 'ping', 'echo', 'dbsize', 'select', 'readonly']);

/** The bench event without its `app:` key: session, `user:` and `temp:` keys only. */
function userOnlyEvent(turn: number, invocationId: string) {
  const event = benchEvent(turn, invocationId);
  delete event.actions.stateDelta['app:turns_seen'];
  return event;
}

function label(node: { host: string; port: number }): string {
  return `${node.host}:${node.port}`;
}

async function commandsPerMaster(admins: Map<string, Redis>): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  for (const [name, admin] of admins) {
    const info = String(await admin.info('commandstats'));
    let total = 0;
    for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      if (!HOUSEKEEPING.has((match[1] as string).split('|')[0] as string)) total += Number(match[2]);
    }
    totals.set(name, total);
  }
  return totals;
}

function busiestOverAverage(values: number[]): number {
  const average = values.reduce((sum, value) => sum + value, 0) / values.length;
  return average === 0 ? 0 : Math.max(...values) / average;
}

export async function runRedisCluster(params: ClusterParams): Promise<ClusterResult> {
  const { RedisSessionService, DEFAULT_SHARDS } = await import('@adk-state/adapter-redis');
  const support = await import('@adk-state/test-servers/redis');
  const connectionName = `adk-state-bench-cluster-${randomUUID().slice(0, 8)}`;
  const cluster = new Cluster(params.nodes, { redisOptions: { connectionName } });
  const admins = new Map(params.nodes.map((node) => [label(node), new Redis(node.port, node.host)]));
  const result: ClusterResult = {
    masters: params.nodes.length,
    users: params.users,
    shards: DEFAULT_SHARDS,
    phases: [],
    keys: {},
    keysBusiestOverAverage: 0,
    roundTrips: {},
  };
  try {
    const service = new RedisSessionService({
      client: cluster,
      keyPrefix: `bench-cluster-${randomUUID().slice(0, 8)}:`,
    });
    const appName = 'one-app';
    // The first command of a fresh Cluster client also fetches the slot map.
    await service.getAppState({ appName });

    const users = Array.from({ length: params.users }, (_, index) => `user-${index}`);
    const sessions: Session[] = [];
    const byCaller = Array.from({ length: params.concurrency }, (_, caller) =>
      users.map((_, index) => index).filter((index) => index % params.concurrency === caller),
    );
    await Promise.all(
      byCaller.map(async (mine) => {
        for (const index of mine) {
          sessions[index] = await service.createSession({
            appName,
            userId: users[index] as string,
            state: sessionState(),
          });
        }
      }),
    );

    const phase = async (name: string, event: typeof benchEvent): Promise<ClusterPhase> => {
      const before = await commandsPerMaster(admins);
      let appends = 0;
      await Promise.all(
        byCaller.map(async (mine) => {
          for (let turn = 0; turn < params.appends; turn++) {
            for (const index of mine) {
              await service.appendEvent({ session: sessions[index] as Session, event: event(turn, name) });
              appends++;
            }
          }
        }),
      );
      const after = await commandsPerMaster(admins);
      const commands: Record<string, number> = {};
      for (const [master, calls] of after) commands[master] = calls - (before.get(master) ?? 0);
      return { name, appends, commands, busiestOverAverage: busiestOverAverage(Object.values(commands)) };
    };
    result.phases.push(await phase('appends without app: keys', userOnlyEvent));
    result.phases.push(await phase('appends with app: keys', benchEvent));

    for (const [master, admin] of admins) result.keys[master] = await admin.dbsize();
    result.keysBusiestOverAverage = busiestOverAverage(Object.values(result.keys));

    const counted = sessions[0] as Session;
    const count = async (operation: () => Promise<unknown>) =>
      (await support.countRoundTrips(params.nodes, connectionName, operation)).roundTrips;
    result.roundTrips['appendEvent without app: keys'] = await count(() =>
      service.appendEvent({ session: counted, event: userOnlyEvent(1_000, 'counted') }),
    );
    result.roundTrips['appendEvent with app: keys'] = await count(() =>
      service.appendEvent({ session: counted, event: benchEvent(1_001, 'counted') }),
    );
  } catch (error) {
    result.error = error instanceof Error ? error.message : String(error);
  } finally {
    cluster.disconnect();
    for (const admin of admins.values()) admin.disconnect();
  }
  return result;
}
