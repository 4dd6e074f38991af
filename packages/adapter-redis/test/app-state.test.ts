/**
 * `app:` keys over many slots with the outbox protocol (on a single server
 * with `clusterProtocol: true`, so that each script stays in one slot as on
 * a Cluster and the steps can be held or dropped one by one): a write puts
 * its app delta into its shard's outbox with its event, then applies the
 * outbox to the app's slot. Deduplication is by outbox position, so a late,
 * repeated or concurrent apply changes nothing; a write that died between
 * its steps is applied by the next write to the shard, a read of a session
 * there, or a drain; a disagreement between the slots is repaired by a
 * read, never a read that fails. On a cluster, the users of one app spread
 * evenly over the masters.
 */
import { randomUUID } from 'node:crypto';
import { BackendError } from '@adk-state/core';
import type { Session } from '@google/adk';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService, type RedisStoreWarning } from '../src/index.js';
import { appKeys, FIELD, PART, sessionKeys } from '../src/keys.js';
import { SCRIPT_SHAS } from '../src/store.js';
import { failingScript, outboxServices, proxyToSharedServer, quitShared, testEvent } from './support/index.js';

const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;

/** The outbox protocol on one server, 16 shards. */
const SHARDS = 16;

/** A client whose process "dies" before the app step. */
const dyingBeforeAppStep = (client: Redis) => failingScript(client, 'apply', 'the process died here');

/**
 * A client that, once armed, holds the first command running `sha` until
 * `meanwhile` has run (started a tick later, after the caller's other
 * commands of that moment have left); `fired` says whether it did.
 */
function holdingOnce(client: Redis, sha: string | undefined, meanwhile: () => Promise<unknown>) {
  const hook = { armed: false, fired: false, client: undefined as unknown as Redis };
  hook.client = {
    get status() {
      return client.status;
    },
    call(command: string, args: Array<string | number>) {
      if (!hook.armed || hook.fired || command !== 'evalsha' || args[0] !== sha) return client.call(command, args);
      hook.fired = true;
      return new Promise((resolve) => setImmediate(resolve)).then(meanwhile).then(() => client.call(command, args));
    },
  } as unknown as Redis;
  return hook;
}

describe('app: keys through the outbox (single server, one slot per script)', () => {
  let client: Redis;
  const warnings: RedisStoreWarning[] = [];
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await service.closeAll();
    await quitShared(client);
  });

  /** A service on the outbox protocol; no drains unless asked for. */
  const service = outboxServices({ client: () => client, keyPrefix, shards: SHARDS, warnings });

  /** The fields of every outbox of an app, and of its marks. */
  async function records(appName: string) {
    const outboxes: Array<Record<string, string>> = [];
    for (let shard = 0; shard < SHARDS; shard++) {
      const base = sessionKeys(keyPrefix, appName, '', '', SHARDS).base.replace(/#\d+\}:$/, `#${shard}}:`);
      outboxes.push(await client.hgetall(base + PART.outbox));
    }
    return { outboxes, marks: await client.hgetall(appKeys(keyPrefix, appName).marks) };
  }

  it('uses the outbox protocol: a write with app: keys leaves nothing pending once acknowledged', async () => {
    const writer = service();
    expect(writer.protocol).toBe('outbox');
    expect(service({ clusterProtocol: false }).protocol).toBe('direct');
    const appName = `app-${randomUUID()}`;
    const session = await writer.createSession({ appName, userId: 'ada', state: { 'app:a': 1 } });
    await writer.appendEvent({ session, event: testEvent({ 'app:b': 2 }) });
    expect(await service().getAppState({ appName })).toEqual({ a: 1, b: 2 });
    const { marks } = await records(appName);
    // One mark per shard that was written to, and nothing else.
    expect(Object.keys(marks)).toHaveLength(1);
  });

  it('the mark a write learned reaches its shard with the next write whatever that write answers (stale, missing) or when it fails', async () => {
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const keys = sessionKeys(keyPrefix, appName, 'ada', 's1', SHARDS);
    let failNextAppend = false;
    const failingOnce = {
      get status() {
        return client.status;
      },
      call(command: string, args: Array<string | number>) {
        if (failNextAppend && command === 'evalsha' && args[0] === SCRIPT_SHAS.append) {
          failNextAppend = false;
          return Promise.reject(new Error('write ECONNRESET'));
        }
        return client.call(command, args);
      },
    } as unknown as Redis;
    const writer = service({ client: failingOnce });
    const session = await writer.createSession(key);
    // A second object of the same session, read before the writes below: its appends are stale.
    const held = (await writer.getSession(key)) as Session;
    /** The app slot's mark for the shard, and the mark the shard has recorded as known. */
    const mark = () => client.hget(appKeys(keyPrefix, appName).marks, String(keys.shard));
    const known = () => client.hget(keys.outbox, FIELD.known);
    /** An append with app: keys (the apply teaches this writer the shard's mark), then both marks. */
    const learn = async (on: Session, value: number) => {
      await writer.appendEvent({ session: on, event: testEvent({ 'app:a': value }) });
      return { mark: await mark(), known: await known() };
    };

    // Each write hands over the mark the write before it learned.
    const first = await learn(session, 1);
    expect(first.known).toBeNull();
    // A stale append (a copy of the session from before) carries the mark: the shard records it.
    await expect(writer.appendEvent({ session: held, event: testEvent({ x: 1 }) })).rejects.toThrow(/stale|changed/i);
    expect(await known()).toBe(first.mark);

    // An append to a session deleted meanwhile carries it too.
    const second = await learn(session, 2);
    expect(second.known).toBe(first.mark);
    await service().deleteSession(key);
    await expect(writer.appendEvent({ session, event: testEvent({ x: 2 }) })).rejects.toThrow();
    expect(await known()).toBe(second.mark);

    // A write that never reached the server keeps the mark for the one after it.
    const again = await writer.createSession(key);
    const third = await learn(again, 3);
    expect(third.known).toBe(second.mark);
    failNextAppend = true;
    await expect(writer.appendEvent({ session: again, event: testEvent({ y: 1 }) })).rejects.toBeInstanceOf(
      BackendError,
    );
    await writer.createSession({ ...key, sessionId: 's2' });
    expect(await known()).toBe(third.mark);
  });

  it('a write that died between its two steps is applied by the next read of its session, exactly once', async () => {
    const appName = `app-${randomUUID()}`;
    const dying = service({ client: dyingBeforeAppStep(client) });
    const session = await dying.createSession({ appName, userId: 'ada', sessionId: 's1' });
    const failure = await dying
      .appendEvent({ session, event: testEvent({ 'app:motto': 'first', own: 1 }, { timestamp: 10 }) })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BackendError);
    expect((failure as BackendError).mayHaveApplied).toBe(true);

    const other = service();
    // The event and the session's own state are stored; the app delta waits in the shard's outbox.
    expect(await other.getAppState({ appName })).toEqual({});
    const loaded = (await other.getSession({ appName, userId: 'ada', sessionId: 's1' })) as Session;
    expect(loaded.events.map((event) => event.timestamp)).toEqual([10]);
    expect(loaded.state).toEqual({ own: 1, 'app:motto': 'first' });
    expect(await other.getAppState({ appName })).toEqual({ motto: 'first' });

    // Someone else changes the app key; a third process that meets the same outbox entry must not apply it again.
    const grace = await other.createSession({ appName, userId: 'grace', sessionId: 'g1' });
    await other.appendEvent({ session: grace, event: testEvent({ 'app:motto': 'second' }, { timestamp: 20 }) });
    const again = (await service().getSession({ appName, userId: 'ada', sessionId: 's1' })) as Session;
    expect(again.state['app:motto']).toBe('second');
    expect(await service().getAppState({ appName })).toEqual({ motto: 'second' });
  });

  it('a create whose session is stored says so when a later step of the call fails: the app read (a wrapped client) or the connection (a proxy)', async () => {
    // The app read goes out beside the create (no app: keys); it fails as a lost connection would, after the create ran.
    const failingAppRead = failingScript(client, 'readApp', 'read ECONNRESET');
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const failure = await service({ client: failingAppRead })
      .createSession(key)
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BackendError);
    expect(failure).toMatchObject({ operation: 'createSession', mayHaveApplied: true });
    expect(await service().getSession(key)).toBeDefined();

    // Over the network: the create's reply arrives, the app read is held back, and the connection is cut.
    const proxy = await proxyToSharedServer();
    const proxied = new Redis(`redis://${proxy.address}`, { maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    proxied.on('error', () => {});
    try {
      const writer = service({ client: proxied, timeoutMs: 10_000 });
      await writer.createSession({ appName, userId: 'ada', sessionId: 'warm-up' });
      const cut = { ...key, sessionId: 's2' };
      const replied = proxy.stats.bytesToClients;
      proxy.hold(SCRIPT_SHAS.readApp as string);
      const creating = writer.createSession(cut).catch((error: unknown) => error);
      await proxy.untilHeld();
      for (let wait = 0; wait < 400 && proxy.stats.bytesToClients === replied; wait++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(proxy.stats.bytesToClients).toBeGreaterThan(replied);
      proxy.drop();
      const cutFailure = await creating;
      expect(cutFailure).toBeInstanceOf(BackendError);
      expect(cutFailure).toMatchObject({ operation: 'createSession', mayHaveApplied: true });
      expect(await service().getSession(cut)).toBeDefined();
    } finally {
      proxied.disconnect();
      await proxy.close();
    }
  });

  it('an apply that arrives late, after its entry was applied by a reader and the session deleted, changes nothing', async () => {
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const other = service();
    const hook = holdingOnce(client, SCRIPT_SHAS.apply, async () => {
      // Meanwhile: a reader applies the entry, the session is deleted, another user's later write is acknowledged.
      expect(((await other.getSession(key)) as Session).state['app:motto']).toBe('first');
      await other.deleteSession(key);
      const grace = await other.createSession({ appName, userId: 'grace', sessionId: 'g1' });
      await other.appendEvent({ session: grace, event: testEvent({ 'app:motto': 'second' }) });
      expect(await other.getAppState({ appName })).toEqual({ motto: 'second' });
    });
    const writer = service({ client: hook.client });
    const session = await writer.createSession(key);
    hook.armed = true;
    await writer.appendEvent({ session, event: testEvent({ 'app:motto': 'first' }) });
    expect(hook.fired).toBe(true);
    expect(await other.getAppState({ appName })).toEqual({ motto: 'second' });
    // The same id created again starts from nothing, and its app writes land.
    const reborn = await other.createSession(key);
    await writer.appendEvent({ session: reborn, event: testEvent({ 'app:motto': 'third' }) });
    expect(await other.getAppState({ appName })).toEqual({ motto: 'third' });
    expect(((await other.getSession(key)) as Session).state['app:motto']).toBe('third');
  });

  it('an apply held back in the network (a loopback TCP proxy) until a reader applied its entry, the session was deleted and another write acknowledged, changes nothing when it arrives', async () => {
    const proxy = await proxyToSharedServer();
    const proxied = new Redis(`redis://${proxy.address}`);
    try {
      const writer = service({ client: proxied, timeoutMs: 20_000 });
      const other = service();
      // Load the scripts, so that the apply goes as EVALSHA <sha>.
      const warm = await writer.createSession({ appName: `warm-${randomUUID()}`, userId: 'u', state: { 'app:w': 1 } });
      await writer.appendEvent({ session: warm, event: testEvent({ 'app:w': 2 }) });

      const appName = `app-${randomUUID()}`;
      const key = { appName, userId: 'ada', sessionId: 's1' };
      const session = await writer.createSession(key);
      proxy.hold(SCRIPT_SHAS.apply as string);
      const appending = writer.appendEvent({ session, event: testEvent({ 'app:motto': 'first' }) });
      await proxy.untilHeld();
      expect(((await other.getSession(key)) as Session).state['app:motto']).toBe('first');
      await other.deleteSession(key);
      const grace = await other.createSession({ appName, userId: 'grace', sessionId: 'g1' });
      await other.appendEvent({ session: grace, event: testEvent({ 'app:motto': 'second' }) });
      expect(await other.getAppState({ appName })).toEqual({ motto: 'second' });
      proxy.release();
      await appending;
      expect(await other.getAppState({ appName })).toEqual({ motto: 'second' });
    } finally {
      proxied.disconnect();
      await proxy.close();
    }
  });

  it('a service that applied writes of a session id keeps working after the id is deleted and created again elsewhere', async () => {
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const first = service();
    const second = service();
    let session = await first.createSession(key);
    for (let index = 1; index <= 5; index++) {
      await first.appendEvent({ session, event: testEvent({ 'app:n': index }) });
    }
    await second.deleteSession(key);
    const reborn = await second.createSession(key);
    await second.appendEvent({ session: reborn, event: testEvent({ 'app:m': 1 }) });
    session = (await first.getSession(key)) as Session;
    expect(session.state).toEqual({ 'app:n': 5, 'app:m': 1 });
    await first.appendEvent({ session, event: testEvent({ 'app:m': 2 }) });
    for (const reader of [first, second, service()]) {
      expect(((await reader.getSession(key)) as Session).state).toEqual({ 'app:n': 5, 'app:m': 2 });
      expect(await reader.getAppState({ appName })).toEqual({ n: 5, m: 2 });
    }
  });

  it('a session that expired and is created again under the same id, by another service, reads and writes as new; no record grows with expired sessions', async () => {
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const first = service({ expireAfterIdleSeconds: 0.2 });
    const second = service({ expireAfterIdleSeconds: 0.2 });
    for (let life = 1; life <= 3; life++) {
      const writer = life % 2 === 1 ? first : second;
      const session = await writer.createSession({ ...key, state: { life } });
      for (let n = 1; n <= 3; n++)
        await writer.appendEvent({ session, event: testEvent({ n, 'app:life': life * 10 + n }) });
      for (const reader of [first, second]) {
        const loaded = (await reader.getSession(key)) as Session;
        expect(loaded.events).toHaveLength(3);
        expect(loaded.state).toEqual({ life, n: 3, 'app:life': life * 10 + 3 });
      }
      // Expiry: the session and its events go; the app state stays.
      for (let attempt = 0; attempt < 200 && (await first.getSession(key)) !== undefined; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(await first.getSession(key)).toBeUndefined();
      expect(await second.getAppState({ appName })).toEqual({ life: life * 10 + 3 });
    }
    const { outboxes, marks } = await records(appName);
    // One shard, one mark; its outbox holds at most the entries of the last seconds, never one per session.
    expect(Object.keys(marks)).toHaveLength(1);
    expect(outboxes.filter((fields) => Object.keys(fields).length > 0)).toHaveLength(1);
  });

  it('a read whose app bucket is newer than its session read reads again: never the app half of a later append', async () => {
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const writer = service();
    const session = await writer.createSession(key);
    await writer.appendEvent({ session, event: testEvent({ n: 1, 'app:n': 1 }) });
    // The session is read first, then an append lands whole, then the app bucket is read.
    const hook = holdingOnce(client, SCRIPT_SHAS.readApp, () =>
      writer.appendEvent({ session, event: testEvent({ n: 2, 'app:n': 2 }) }),
    );
    const reader = service({ client: hook.client });
    await reader.getSession(key);
    hook.armed = true;
    const loaded = (await reader.getSession(key)) as Session;
    expect(hook.fired).toBe(true);
    expect(loaded.events).toHaveLength(2);
    expect(loaded.state).toEqual({ n: 2, 'app:n': 2 });
  });

  it('a read whose session is newer than its app bucket lays the later entries over it', async () => {
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const writer = service();
    const session = await writer.createSession(key);
    await writer.appendEvent({ session, event: testEvent({ n: 1, 'app:a': 1 }) });
    // The app bucket is read first; then two appends land whole (the second tells the shard the
    // first is applied); then the session is read.
    const hook = holdingOnce(client, SCRIPT_SHAS.load, async () => {
      await writer.appendEvent({ session, event: testEvent({ n: 2, 'app:b': 2 }) });
      await writer.appendEvent({ session, event: testEvent({ n: 3 }) });
    });
    const reader = service({ client: hook.client });
    await reader.getSession(key);
    hook.armed = true;
    const loaded = (await reader.getSession(key)) as Session;
    expect(hook.fired).toBe(true);
    expect(loaded.events).toHaveLength(3);
    expect(loaded.state).toEqual({ n: 3, 'app:a': 1, 'app:b': 2 });
  });

  it('a delta left behind by a dead writer, whose session was deleted, is applied by a drain; then no record is left', async () => {
    const appName = `app-${randomUUID()}`;
    const dying = service({ client: dyingBeforeAppStep(client) });
    for (const userId of ['ada', 'bob', 'cy']) {
      const session = await dying.createSession({ appName, userId, sessionId: 's1' });
      await dying.appendEvent({ session, event: testEvent({ [`app:${userId}`]: true }) }).catch(() => undefined);
      await service().deleteSession({ appName, userId, sessionId: 's1' });
    }
    const draining = service({ drainIntervalMs: 0 });
    const reader = service();
    // The first read of the app claims a drain and starts it; a later read sees what it applied.
    await draining.getAppState({ appName });
    let state: Record<string, unknown> = {};
    for (let attempt = 0; attempt < 200 && Object.keys(state).length < 3; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      state = await reader.getAppState({ appName });
    }
    expect(state).toEqual({ ada: true, bob: true, cy: true });
    // Entries known applied are removed once older than the keep time: a drain after that leaves none.
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    await draining.getAppState({ appName });
    let left = -1;
    for (let attempt = 0; attempt < 200 && left !== 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      const { outboxes } = await records(appName);
      left = outboxes.reduce(
        (sum, fields) => sum + Object.keys(fields).filter((field) => !field.startsWith('\u0000')).length,
        0,
      );
    }
    expect(left).toBe(0);
  });

  it('after a failover lost applied marks or outbox positions, reads repair them, warn once, and never fail', async () => {
    const appName = `app-${randomUUID()}`;
    const key = { appName, userId: 'ada', sessionId: 's1' };
    const keys = sessionKeys(keyPrefix, appName, 'ada', 's1', SHARDS);
    const app = appKeys(keyPrefix, appName);
    const writer = service();
    const session = await writer.createSession(key);
    await writer.appendEvent({ session, event: testEvent({ 'app:a': 1 }) });
    const shard = String(keys.shard);
    const mark = Number(await client.hget(app.marks, shard));

    // The app slot's master lost the mark (its replica lagged), while the shard removed the entry as applied.
    await client.hset(app.marks, shard, String(mark - 10));
    await client.hset(keys.outbox, FIELD.floor, String(mark));
    await client.hdel(keys.outbox, String(mark));
    warnings.length = 0;
    const reader = service();
    expect(((await reader.getSession(key)) as Session).state).toEqual({ 'app:a': 1 });
    expect(warnings.map((warning) => warning.code)).toEqual(['app-mark-behind']);
    expect(((await reader.getSession(key)) as Session).state).toEqual({ 'app:a': 1 });
    expect(warnings).toHaveLength(1);

    // The shard's master lost its last positions, while the app slot has applied them.
    await client.hset(keys.outbox, FIELD.last, String(mark - 1_000), FIELD.known, '-1', FIELD.floor, '-1');
    warnings.length = 0;
    expect(((await reader.getSession(key)) as Session).state).toEqual({ 'app:a': 1 });
    expect(warnings.map((warning) => warning.code)).toEqual(['shard-position-behind']);
    // Writes go on, above the app slot's mark.
    await writer.appendEvent({
      session: (await writer.getSession(key)) as Session,
      event: testEvent({ 'app:a': 2 }),
    });
    expect(((await reader.getSession(key)) as Session).state).toEqual({ 'app:a': 2 });
    expect(await reader.getAppState({ appName })).toEqual({ a: 2 });
    expect(warnings).toHaveLength(1);
  });
});

const nodes = inject('redisClusterNodes');

describe.skipIf(nodes.length === 0)('one app on a cluster of three masters (default shards)', () => {
  it('600 users of one app: the busiest master holds at most 1.25x the average keys', async () => {
    const cluster = new Cluster(nodes);
    const prefix = `${keyPrefix}spread-${randomUUID().slice(0, 8)}:`;
    try {
      const service = new RedisSessionService({ client: cluster, keyPrefix: prefix });
      const appName = 'one-app';
      const users = Array.from({ length: 600 }, (_, index) => `user-${index}`);
      for (let from = 0; from < users.length; from += 50) {
        await Promise.all(
          users.slice(from, from + 50).map(async (userId) => {
            const session = await service.createSession({ appName, userId, state: { 'user:name': userId } });
            await service.appendEvent({ session, event: testEvent({ step: 1 }, { timestamp: 1 }) });
          }),
        );
      }
      const counts: number[] = [];
      for (const master of cluster.nodes('master')) {
        let cursor = '0';
        let count = 0;
        do {
          const [next, keys] = await master.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
          cursor = next;
          count += keys.length;
        } while (cursor !== '0');
        counts.push(count);
      }
      expect(counts).toHaveLength(3);
      const average = counts.reduce((sum, count) => sum + count, 0) / counts.length;
      expect(Math.max(...counts) / average).toBeLessThanOrEqual(1.25);
      const listed = await service.listSessions({ appName, limit: 10, page: 3, order: 'desc' });
      expect(listed.totalItems).toBe(600);
      expect(listed.sessions).toHaveLength(10);
    } finally {
      await cluster.quit();
    }
  });
});
