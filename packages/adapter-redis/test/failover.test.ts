/**
 * A Cluster failover under load, on a cluster of its own (3 masters, each
 * with a replica): the master that serves the app's slot is killed (SIGKILL)
 * while its replica lags behind, so the replica that takes over lacks the
 * last writes the master acknowledged. Afterwards every session is readable
 * (reads repair what the two slots disagree on, they never fail for good) and
 * takes writes again, and a service that read every session before the
 * failover reads what is stored after it; with `waitForReplicas`, no
 * acknowledged write is lost.
 */
import { randomUUID } from 'node:crypto';
import { BackendError } from '@adk-state/core';
import type { Session } from '@google/adk';
import { Cluster, Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RedisSessionService, type RedisSessionServiceOptions, type RedisStoreWarning } from '../src/index.js';
import { appKeys } from '../src/keys.js';
import { type RedisClusterHandle, startRedisCluster, testEvent } from './support/index.js';

const WRITERS = 12;
const keyOf = (session: Session) => ({ appName: session.appName, userId: session.userId, sessionId: session.id });
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Retries `attempt` every 200 ms for up to `ms` (the cluster settles after a failover). */
async function eventually<T>(attempt: () => Promise<T>, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > until) throw error;
      await pause(200);
    }
  }
}

describe.skipIf(Boolean(process.env.REDIS_URL || process.env.REDIS_CLUSTER_NODES))(
  'failover of a Cluster master under load (3 masters + 3 replicas)',
  () => {
    let cluster: RedisClusterHandle;
    // A cluster for each test: a failover leaves a master without a replica.
    beforeEach(async () => {
      cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1_000 });
    }, 90_000);
    afterEach(async () => {
      await cluster?.stop();
    });

    const clientOf = () => new Cluster(cluster.nodes, { redisOptions: { connectTimeout: 1_000 } });

    /** Each node's role and the keys under `keyPrefix` it holds, as one line each (for a failure's message). */
    async function keysByNode(keyPrefix: string): Promise<string> {
      const lines: string[] = [];
      for (const node of cluster.nodes) {
        const probe = new Redis({ ...node, lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0 });
        try {
          await probe.connect();
          const [role] = (await probe.call('ROLE')) as [string];
          const keys = (await probe.call('KEYS', `${keyPrefix}*`)) as string[];
          lines.push(`${node.port} ${role}: ${keys.sort().join(' ')}`);
        } catch (error) {
          lines.push(`${node.port} no answer (${String(error)})`);
        } finally {
          probe.disconnect();
        }
      }
      return lines.join('\n');
    }

    /**
     * Writers append to sessions of their own (spread over the masters) with
     * session, user: and app: keys, while the app slot's master is killed with
     * its replica lagging; returns what was acknowledged per writer.
     */
    async function killUnderLoad(options: Partial<RedisSessionServiceOptions>) {
      const keyPrefix = `failover-${randomUUID().slice(0, 8)}:`;
      const appName = 'app';
      const client = clientOf();
      const warnings: RedisStoreWarning[] = [];
      const service = new RedisSessionService({
        client,
        keyPrefix,
        timeoutMs: 2_000,
        onWarning: (warning) => warnings.push(warning),
        ...options,
      } as RedisSessionServiceOptions);
      const sessions: Session[] = [];
      for (let writer = 0; writer < WRITERS; writer++) {
        sessions.push(await service.createSession({ appName, userId: `user-${writer}`, sessionId: 's' }));
      }
      const acked = new Array<number>(WRITERS).fill(0);
      /** Per writer, the ids of its acknowledged events. */
      const ackedIds = sessions.map(() => [] as string[]);
      const failures: unknown[] = [];
      let running = true;
      const writers = sessions.map(async (session, writer) => {
        let current = session;
        for (let n = 1; running; n++) {
          try {
            const event = testEvent({ n, 'user:n': n, [`app:w${writer}`]: n });
            await service.appendEvent({ session: current, event });
            acked[writer] = n;
            ackedIds[writer]?.push(event.id);
          } catch (error) {
            failures.push(error);
            await pause(50);
            // Start again from what is stored (the failed append may or may not be there).
            const stored = await eventually(() => service.getSession(keyOf(session)), 30_000).catch(() => current);
            // A stored session read as missing fails the test, saying which node held which of its keys.
            if (stored) current = stored;
            else
              failures.push(new Error(`session of writer ${writer} read as missing: ${await keysByNode(keyPrefix)}`));
          }
        }
      });

      await pause(300);
      // A service of its own reads every session whole, and keeps what it read: once now (its client finds
      // the slots), and again while the replicas lag, when it holds events they may lack. Under load a read
      // may run out of time: it then keeps what it held.
      const watcherClient = clientOf();
      const watcher = new RedisSessionService({ client: watcherClient, keyPrefix, timeoutMs: 10_000 });
      const watch = async () => {
        for (const session of sessions) await watcher.getSession(keyOf(session)).catch(() => undefined);
      };
      await watch();
      const appMaster = await cluster.masterForKey(appKeys(keyPrefix, appName).appState);
      await cluster.lagReplicas();
      await pause(300);
      await watch();
      const killed = await cluster.killMaster(appMaster);
      await cluster.stopLag();
      await cluster.waitForFailover(killed, { timeoutMs: 30_000 });
      await pause(500);
      running = false;
      await Promise.all(writers);
      client.disconnect();
      for (const failure of failures) expect(failure).toBeInstanceOf(BackendError);
      return { keyPrefix, appName, sessions, acked, ackedIds, warnings, options, watcher, watcherClient };
    }

    /** Every session is readable through a new client, takes an append, and the app state follows. */
    async function expectReadableAndWritable(run: Awaited<ReturnType<typeof killUnderLoad>>) {
      const client = clientOf();
      try {
        const service = new RedisSessionService({
          client,
          keyPrefix: run.keyPrefix,
          timeoutMs: 2_000,
          onWarning: (warning) => run.warnings.push(warning),
        });
        for (const session of run.sessions) {
          const stored = (await eventually(() => service.getSession(keyOf(session)))) as Session;
          expect(stored).toBeDefined();
        }
        for (const [writer, session] of run.sessions.entries()) {
          const stored = (await service.getSession(keyOf(session))) as Session;
          await service.appendEvent({
            session: stored,
            event: testEvent({ after: writer, [`app:after${writer}`]: 1 }),
          });
          const again = (await service.getSession(keyOf(session))) as Session;
          expect(again.state.after).toBe(writer);
          expect(again.state[`app:after${writer}`]).toBe(1);
        }
        const app = await service.getAppState({ appName: run.appName });
        for (let writer = 0; writer < WRITERS; writer++) expect(app[`after${writer}`]).toBe(1);
        return service;
      } finally {
        client.disconnect();
      }
    }

    it('without waitForReplicas: writes on the dead master are lost, but every session stays readable and writable', async () => {
      const run = await killUnderLoad({});
      expect(run.acked.every((count) => count > 0)).toBe(true);
      const client = clientOf();
      try {
        // The scenario is real: appends the dead master acknowledged are gone from its sessions.
        // (Their app: writes come back: the outboxes on the other masters still hold them, and the
        // next apply finds the app slot's mark behind them.)
        const reader = new RedisSessionService({ client, keyPrefix: run.keyPrefix, timeoutMs: 2_000 });
        let lost = 0;
        for (const [writer, session] of run.sessions.entries()) {
          const stored = (await eventually(() => reader.getSession(keyOf(session)))) as Session;
          const ids = new Set(stored.events.map((event) => event.id));
          lost += (run.ackedIds[writer] as string[]).filter((id) => !ids.has(id)).length;
        }
        expect(lost).toBeGreaterThan(0);
        await expectReadableAndWritable(run);
        // The sessions took writes after the loss, at revisions the lost writes had: the service that read
        // them before the failover reads what is stored, as one that keeps nothing does.
        const fresh = new RedisSessionService({ client, keyPrefix: run.keyPrefix, timeoutMs: 2_000, logCacheBytes: 0 });
        // The events: the state is read anew by every read, cache or not (and the app's may be repaired between).
        const shown = (session: Session | undefined) => session?.events.map((event) => [event.id, event.timestamp]);
        for (const [writer, session] of run.sessions.entries()) {
          const watched = await eventually(() => run.watcher.getSession(keyOf(session)));
          expect(shown(watched), `session ${writer}`).toEqual(shown(await fresh.getSession(keyOf(session))));
        }
      } finally {
        client.disconnect();
        run.watcherClient.disconnect();
      }
    }, 120_000);

    it('with waitForReplicas, no acknowledged write is lost', async () => {
      const run = await killUnderLoad({ waitForReplicas: { replicas: 1, timeoutMs: 500 } });
      run.watcherClient.disconnect();
      expect(run.acked.every((count) => count > 0)).toBe(true);
      const client = clientOf();
      try {
        const reader = new RedisSessionService({ client, keyPrefix: run.keyPrefix, timeoutMs: 2_000 });
        const app = await eventually(() => reader.getAppState({ appName: run.appName }));
        for (const [writer, session] of run.sessions.entries()) {
          const stored = (await eventually(() => reader.getSession(keyOf(session)))) as Session;
          const user = await reader.getUserState({ appName: run.appName, userId: session.userId });
          expect(stored.state.n as number, `session ${writer}`).toBeGreaterThanOrEqual(run.acked[writer] as number);
          expect(user.n as number, `user ${writer}`).toBeGreaterThanOrEqual(run.acked[writer] as number);
          expect(app[`w${writer}`] as number, `app key of writer ${writer}`).toBeGreaterThanOrEqual(
            run.acked[writer] as number,
          );
          // Every acknowledged event is there.
          const ids = new Set(stored.events.map((event) => event.id));
          expect((run.ackedIds[writer] as string[]).filter((id) => !ids.has(id))).toEqual([]);
        }
      } finally {
        client.disconnect();
      }
      await expectReadableAndWritable(run);
    }, 120_000);
  },
);
