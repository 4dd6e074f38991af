/**
 * `waitForReplicas`: every write waits until enough replicas acknowledged it
 * (Redis WAIT on the same connection). With its replica caught up, an
 * acknowledged write is on the replica; with the replica frozen, a write
 * fails in bounded time with `mayHaveApplied: true` (it is on the master
 * only), and reads go on.
 */
import { randomUUID } from 'node:crypto';
import { BackendError } from '@adk-state/core';
import type { Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Connection } from '../src/connection.js';
import { RedisSessionService } from '../src/index.js';
import { sessionKeys } from '../src/keys.js';
import { APPLY } from '../src/scripts.js';
import { gated, runs } from './attack/hooks.js';
import { type RedisServer, startRedisServer, testEvent } from './support/index.js';

describe('waitForReplicas on a server with one replica', () => {
  let master: RedisServer;
  let replica: RedisServer;
  let client: Redis;
  let replicaClient: Redis;
  beforeAll(async () => {
    master = await startRedisServer();
    replica = await startRedisServer({ args: ['--replicaof', master.host, String(master.port)] });
    client = new Redis(master.url);
    replicaClient = new Redis(replica.url);
    for (let attempt = 0; attempt < 400; attempt++) {
      if ((await replicaClient.info('replication')).includes('master_link_status:up')) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  });
  afterAll(async () => {
    replica.resume();
    client.disconnect();
    replicaClient.disconnect();
    await Promise.all([replica.stop(), master.stop()]);
  });

  it('refuses a wait for no replica or without a bound', () => {
    for (const waitForReplicas of [{ replicas: 0, timeoutMs: 10 }, { replicas: 1, timeoutMs: 0 }, { replicas: 1 }, 3]) {
      expect(() => new RedisSessionService({ client, waitForReplicas: waitForReplicas as never })).toThrow(
        /waitForReplicas/,
      );
    }
  });

  it('an acknowledged write is on the replica; with the replica frozen, writes fail with mayHaveApplied and reads go on', async () => {
    const keyPrefix = `replicas-${randomUUID().slice(0, 8)}:`;
    const service = new RedisSessionService({
      client,
      keyPrefix,
      waitForReplicas: { replicas: 1, timeoutMs: 300 },
      timeoutMs: 5_000,
    });
    const appName = 'app';
    const key = { appName, userId: 'u1', sessionId: 's1' };
    const keys = sessionKeys(keyPrefix, appName, 'u1', 's1', 1);
    let session = await service.createSession({ ...key, state: { n: 0 } });
    for (let index = 1; index <= 20; index++) {
      await service.appendEvent({ session, event: testEvent({ n: index, 'app:n': index }) });
      // Acknowledged means replicated: the replica has it at once.
      expect(await replicaClient.llen(keys.events)).toBe(index);
    }

    await replica.pause();
    try {
      const failure = await service.appendEvent({ session, event: testEvent({ n: 21 }) }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(BackendError);
      expect((failure as BackendError).mayHaveApplied).toBe(true);
      expect((failure as Error).message).toMatch(/0 of 1 replica/);
      // The master has it: the write was applied, only not replicated in time.
      session = (await service.getSession(key)) as Session;
      expect(session.state.n).toBe(21);
    } finally {
      replica.resume();
    }
    await service.appendEvent({ session, event: testEvent({ n: 22 }) });
    expect(await replicaClient.llen(keys.events)).toBe(22);
  });

  // A node demoted by a failover answers writes with READONLY until the client learns the new
  // map of slots: that refusal wrote nothing (a replica writes nothing), and said it may have.
  it('a write sent to a replica fails as an outage that wrote nothing', async () => {
    const onReplica = new RedisSessionService({ client: replicaClient, keyPrefix: `replicas-${randomUUID()}:` });
    const failure = await onReplica
      .createSession({ appName: 'app', userId: 'u1', sessionId: 's1' })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BackendError);
    expect((failure as BackendError).kind).toBe('outage');
    expect((failure as BackendError).mayHaveApplied).toBe(false);
    expect((failure as Error).message).toMatch(/READONLY/);
  });

  it('a Cluster client that meets READONLY is asked to refresh its map of slots', async () => {
    let refreshed = 0;
    const readonly = Object.assign(new Error("READONLY You can't write against a read only replica."), {
      name: 'ReplyError',
    });
    const stub = {
      isCluster: true,
      status: 'ready',
      call: () => Promise.reject(readonly),
      refreshSlotsCache: (callback?: () => void) => {
        refreshed++;
        callback?.();
      },
    };
    const connection = new Connection(stub, false);
    const failure = await connection
      .send({ operation: 'appendEvent', write: true, call: undefined }, 'evalsha', ['0', 0])
      .catch((error: unknown) => error);
    expect((failure as BackendError).mayHaveApplied).toBe(false);
    expect(refreshed).toBe(1);
  });

  // Was a hole: the cluster protocol's own bookkeeping (a drain's reads and applies of every
  // shard's outbox, a reader's apply of an entry it found waiting, the hand-over of marks) waited
  // for the replicas like a caller's write. While a replica lagged, each of those held the
  // connection to the master for the wait's timeout, and every read of this instance queued
  // behind them failed at its deadline (README: "reads are unchanged").
  it("with the replica frozen, the cluster protocol's drains and a reader's apply do not wait for it, and reads go on", async () => {
    const keyPrefix = `replicas-${randomUUID().slice(0, 8)}:`;
    const protocol = { keyPrefix, clusterProtocol: true, shards: 4 } as const;
    // A writer that dies between its two steps: its app: delta waits in the shard's outbox.
    const dying = new RedisSessionService({
      ...protocol,
      client: gated(client, (command, args) =>
        runs(APPLY, command, args) ? Promise.reject(new Error('the process died here')) : undefined,
      ),
    });
    const key = { appName: 'app', userId: 'u1', sessionId: 's1' };
    const session = await dying.createSession(key);
    await expect(dying.appendEvent({ session, event: testEvent({ n: 1, 'app:n': 1 }) })).rejects.toThrow();
    await dying.close();

    const reader = new RedisSessionService({
      ...protocol,
      client,
      drainIntervalMs: 0,
      waitForReplicas: { replicas: 1, timeoutMs: 3_000 },
      timeoutMs: 1_000,
    });
    await replica.pause();
    try {
      // The reader applies the waiting delta (the write was stored) without waiting for the replica.
      expect((await reader.getSession(key))?.state).toEqual({ n: 1, 'app:n': 1 });
      // Each of these claims a drain of the app's four shards; the reads after them go on.
      let current: Session | undefined;
      for (let round = 0; round < 3; round++) {
        expect(await reader.getAppState({ appName: 'app' })).toEqual({ n: 1 });
        current = await reader.getSession(key);
        expect(current?.events).toHaveLength(1);
      }
      // A caller's write still waits, and says it may have applied.
      const failure = await reader
        .appendEvent({ session: current as Session, event: testEvent({ n: 2, 'app:n': 2 }) })
        .catch((error: unknown) => error);
      expect((failure as BackendError).mayHaveApplied).toBe(true);
    } finally {
      replica.resume();
      await reader.close();
    }
  });
});
