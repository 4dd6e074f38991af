/**
 * `adk-state migrate` copies exactly and decides again exactly: state keys in
 * any order the target hands them back (a Redis hash reorders its fields once
 * a value is long), a state key named `__proto__`, a target session that took
 * a write of its own while the run was going, and stores that are only looked
 * at (a source, a dry run's target, `inspect`) are left as they were.
 */
import { RedisSessionService } from '@adk-state/adapter-redis';
import { type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { createEvent, type Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../src/index.js';
import { copyAll } from '../src/migrate.js';
import { runCli } from './support/cli-process.js';
import { withMethods } from './support/with-methods.js';

const T0 = 1_700_000_000_000;

/** A state with a value over Redis's 64-byte small-hash limit, many keys, and a key named `__proto__`. */
function awkwardState(): Record<string, unknown> {
  const state: Record<string, unknown> = { long: 'x'.repeat(200) };
  for (let n = 0; n < 150; n++) state[`k${n}`] = n;
  Object.defineProperty(state, '__proto__', {
    value: { later: 2 },
    enumerable: true,
    writable: true,
    configurable: true,
  });
  return state;
}

describe('adk-state migrate, exactly', () => {
  let redis: RedisServer;
  let raw: Redis;
  const uri = (db: number) => `${redis.url}/${db}`;

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = new Redis(redis.url);
  });
  afterAll(async () => {
    raw?.disconnect();
    await redis?.stop();
  });

  /** How many keys database `db` holds. */
  async function keysIn(db: number): Promise<number> {
    await raw.select(db);
    return raw.dbsize();
  }

  it('copies a long value, 150 keys and a __proto__ key exactly, and a second run finds 0 changes', async () => {
    const source = new RedisSessionService({ url: uri(1) });
    const target = new RedisSessionService({ url: uri(2) });
    const key = { appName: 'shop', userId: 'ada', sessionId: 's1' };
    try {
      const session = await source.createSession({ ...key, state: awkwardState() });
      await source.appendEvent({
        session,
        event: createEvent({
          invocationId: 'i',
          author: 'agent',
          timestamp: T0,
          actions: { stateDelta: { n: 1 } } as never,
        }),
      });
      const args = ['migrate', '--from', uri(1), '--to', uri(2), '--app', 'shop', '--verify'];
      let run = await runCli(args);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toContain('verify: 0 differences');
      const copy = (await target.getSession(key)) as Session;
      expect(Object.hasOwn(copy.state, '__proto__')).toBe(true);
      expect(JSON.parse(JSON.stringify(copy.state))).toEqual(
        JSON.parse(JSON.stringify((await source.getSession(key))?.state)),
      );
      for (let again = 0; again < 2; again++) {
        run = await runCli(args);
        expect(run.code, run.stdout + run.stderr).toBe(0);
        expect(run.stdout).toContain('copied 0 new and 0 updated sessions');
        expect(run.stdout).toContain('0 changes in all');
      }
    } finally {
      await Promise.all([source.close(), target.close()]);
    }
  }, 120_000);

  it('a source whose stored events carry temp: keys or a partial event (written outside adk-state) settles at 0 changes', async () => {
    const source = new RedisSessionService({ url: uri(9) });
    const key = { appName: 'shop', userId: 'ada', sessionId: 's1' };
    const stored = (id: string, timestamp: number, extra: Record<string, unknown>) => ({
      id,
      timestamp,
      json: JSON.stringify({ id, invocationId: 'i', author: 'agent', timestamp, ...extra }),
    });
    try {
      // Straight to the store: what an older writer, or another tool, may have left.
      await source.store.importSession?.({
        key,
        state: new Map([['n', '1']]),
        userDelta: new Map(),
        appDelta: new Map(),
        events: [
          stored('e1', T0, { actions: { stateDelta: { n: 1, 'temp:scratch': 'x' } } }),
          stored('e2', T0 + 1, { partial: true, actions: { stateDelta: {} } }),
        ],
        createTime: T0,
        lastUpdateTime: T0 + 1,
        revision: 1,
      });
      const args = ['migrate', '--from', uri(9), '--to', uri(10), '--app', 'shop', '--verify'];
      let run = await runCli(args);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toContain('verify: 0 differences');
      run = await runCli(args);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toContain('0 changes in all');
    } finally {
      await source.close();
    }
  }, 120_000);

  it('leaves a target session alone that took a write of its own after the run compared it', async () => {
    const source = new RedisSessionService({ url: uri(3) });
    const target = new RedisSessionService({ url: uri(4) });
    const keys = ['s1', 's2'].map((sessionId) => ({ appName: 'shop', userId: 'ada', sessionId }));
    const event = (timestamp: number, delta: Record<string, unknown>) =>
      createEvent({
        invocationId: `at-${timestamp}`,
        author: 'agent',
        timestamp,
        actions: { stateDelta: delta } as never,
      });
    try {
      for (const key of keys) {
        const session = await source.createSession(key);
        await source.appendEvent({ session, event: event(T0, { step: 1 }) });
      }
      expect((await migrate({ from: uri(3), to: uri(4), appName: 'shop' })).failed).toEqual([]);
      // The source moves on, so the run will replace both copies.
      for (const key of keys) {
        await source.appendEvent({
          session: (await source.getSession(key)) as Session,
          event: event(T0 + 1, { step: 2 }),
        });
      }
      // After the run compared the second copy, and before it replaces it, the app writes to that copy.
      const app = new RedisSessionService({ url: uri(4) });
      let reads = 0;
      let written = false;
      const watched = withMethods(target, {
        async getSession(request) {
          if (request.sessionId === 's2' && ++reads === 2) {
            const session = (await app.getSession(request)) as Session;
            await app.appendEvent({
              session,
              event: createEvent({
                invocationId: 'app',
                author: 'agent',
                timestamp: T0 + 5,
                actions: { stateDelta: { mine: true } } as never,
              }),
            });
            written = true;
          }
          return target.getSession(request);
        },
      });
      const from = new RedisSessionService({ url: uri(3) });
      const report = await copyAll(from, watched, { apps: ['shop'] }).finally(() =>
        Promise.all([app.close(), from.close()]),
      );
      expect(written).toBe(true);
      expect(report.failed.map((failure) => failure.session)).toEqual(['shop/ada/s2']);
      expect(JSON.stringify(report.failed)).toContain('changed during the run');
      const kept = (await target.getSession(keys[1] as (typeof keys)[number])) as Session;
      expect(kept.events.map((each) => each.invocationId)).toEqual([`at-${T0}`, 'app']);
      expect(kept.state).toEqual({ step: 1, mine: true });
      expect((await target.getSession(keys[0] as (typeof keys)[number]))?.state).toEqual({ step: 2 });
    } finally {
      await Promise.all([source.close(), target.close()]);
    }
  }, 120_000);

  it("handles one user's sessions one at a time: each is written before the next is read", async () => {
    const source = new RedisSessionService({ url: uri(12) });
    const target = new RedisSessionService({ url: uri(13) });
    try {
      for (let n = 0; n < 12; n++) {
        const session = await source.createSession({
          appName: 'shop',
          userId: 'ada',
          sessionId: `s${n}`,
          state: { n },
        });
        await source.appendEvent({
          session,
          event: createEvent({
            invocationId: `i${n}`,
            author: 'agent',
            timestamp: T0 + n,
            actions: { stateDelta: { m: n } } as never,
          }),
        });
      }
      let reads = 0;
      const readsAtImport: number[] = [];
      const counted = withMethods(source, {
        getSession(request) {
          reads++;
          return source.getSession(request);
        },
      });
      const watched = withMethods(target, {
        importSession(...args) {
          readsAtImport.push(reads);
          return target.importSession(...args);
        },
      });
      const report = await copyAll(counted, watched, { apps: ['shop'], verify: true });
      expect(report.decisions.copy).toBe(12);
      expect(report.differences).toEqual([]);
      // The k-th import follows the k-th read of the source, not the twelfth.
      expect(readsAtImport).toEqual(Array.from({ length: 12 }, (_, k) => k + 1));
    } finally {
      await Promise.all([source.close(), target.close()]);
    }
  }, 120_000);

  it('carries user: and app: keys the source wins on a session it replaces as it is, when every session is unchanged', async () => {
    const source = new RedisSessionService({ url: uri(14) });
    const target = new RedisSessionService({ url: uri(15) });
    try {
      for (const sessionId of ['s1', 's2']) {
        const session = await source.createSession({ appName: 'shop', userId: 'ada', sessionId });
        await source.appendEvent({
          session,
          event: createEvent({
            invocationId: sessionId,
            author: 'agent',
            timestamp: T0,
            actions: { stateDelta: { 'user:plan': 'free', 'app:motd': 'hello', own: sessionId } } as never,
          }),
        });
      }
      expect((await copyAll(source, target, { apps: ['shop'] })).decisions.copy).toBe(2);
      // A session only the target has changes the shared keys there.
      const other = await target.createSession({ appName: 'shop', userId: 'ada', sessionId: 't' });
      await target.appendEvent({
        session: other,
        event: createEvent({
          invocationId: 't',
          author: 'agent',
          timestamp: T0 + 100,
          actions: { stateDelta: { 'user:plan': 'team', 'app:motd': 'target' } } as never,
        }),
      });
      const dry = await copyAll(source, target, { apps: ['shop'], onConflict: 'source', dryRun: true });
      expect(dry.decisions).toMatchObject({ update: 1, unchanged: 1 });
      expect(await target.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan: 'team' });
      const report = await copyAll(source, target, { apps: ['shop'], onConflict: 'source', verify: true });
      expect(report.failed).toEqual([]);
      expect(report.decisions).toMatchObject({ copy: 0, update: 1, unchanged: 1 });
      expect(report.events).toBe(1);
      expect(report.scopes.map((scope) => [scope.scope, scope.written])).toEqual([
        ['user:ada', ['user:plan']],
        ['app', ['app:motd']],
      ]);
      expect(report.differences).toEqual([]);
      expect(await target.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan: 'free' });
      expect(await target.getAppState({ appName: 'shop' })).toEqual({ motd: 'hello' });
      // The carrier's copy is the source's session as it was.
      expect((await target.getSession({ appName: 'shop', userId: 'ada', sessionId: 's1' }))?.state.own).toBe('s1');
    } finally {
      await Promise.all([source.close(), target.close()]);
    }
  }, 120_000);

  it('says which user: and app: keys no session carried, counts each session once, and a later run writes them', async () => {
    const source = new RedisSessionService({ url: uri(14) });
    const target = new RedisSessionService({ url: uri(15) });
    const shop = { appName: 'kept' };
    const write = async (
      service: RedisSessionService,
      sessionId: string,
      timestamp: number,
      stateDelta: Record<string, unknown>,
    ) => {
      const key = { ...shop, userId: 'ada', sessionId };
      const session = (await service.getSession(key)) ?? (await service.createSession(key));
      await service.appendEvent({
        session,
        event: createEvent({
          invocationId: `${sessionId}-${timestamp}`,
          author: 'agent',
          timestamp,
          actions: { stateDelta } as never,
        }),
      });
    };
    try {
      await write(source, 's1', T0, { 'user:plan': 'free', own: 1 });
      await write(source, 's2', T0, { own: 2 });
      expect((await copyAll(source, target, { apps: ['kept'] })).failed).toEqual([]);
      // The target's copy of s1 takes a write of its own, later than anything in the source.
      await write(target, 's1', T0 + 500, { own: 'target' });
      // The source gains a user: key the target lacks, written through s1, which is now a conflict.
      await write(source, 's1', T0 + 100, { 'user:tier': 'gold' });
      // s2 is unchanged and could carry it, but its read fails once: nothing carries the key.
      let failing = true;
      let reads = 0;
      const flaky = withMethods(source, {
        getSession(request) {
          if (request.sessionId === 's2' && failing && reads++ === 1) {
            failing = false;
            return Promise.reject(new Error('read ECONNRESET'));
          }
          return source.getSession(request);
        },
      });
      const report = await copyAll(flaky, target, { apps: ['kept'] });
      expect(report.decisions).toMatchObject({ copy: 0, update: 0, unchanged: 1, conflict: 1 });
      expect(report.failed).toEqual([]);
      expect(report.processed).toBe(2);
      expect(report.scopes).toEqual([
        { appName: 'kept', scope: 'user:ada', written: [], keptInTarget: [], unwritten: ['user:tier'] },
      ]);
      expect(await target.getUserState({ ...shop, userId: 'ada' })).toEqual({ plan: 'free' });
      // Run again: s2 carries it.
      const again = await copyAll(source, target, { apps: ['kept'] });
      expect(again.decisions).toMatchObject({ update: 1, unchanged: 0, conflict: 1 });
      expect(again.scopes).toEqual([
        { appName: 'kept', scope: 'user:ada', written: ['user:tier'], keptInTarget: [], unwritten: [] },
      ]);
      expect(await target.getUserState({ ...shop, userId: 'ada' })).toEqual({ plan: 'free', tier: 'gold' });
    } finally {
      await Promise.all([source.close(), target.close()]);
    }
  }, 120_000);

  it("with a user named, decides an app: conflict by every user's writes on both sides", async () => {
    const source = new RedisSessionService({ url: uri(14) });
    const target = new RedisSessionService({ url: uri(15) });
    const app = { appName: 'clock' };
    const write = async (service: RedisSessionService, userId: string, timestamp: number, value: string) => {
      const session = await service.createSession({ ...app, userId, sessionId: `${userId}-${timestamp}` });
      await service.appendEvent({
        session,
        event: createEvent({
          invocationId: `${userId}-${timestamp}`,
          author: 'agent',
          timestamp,
          actions: { stateDelta: { 'app:x': value } } as never,
        }),
      });
    };
    try {
      await write(source, 'ada', T0 + 100, 'A');
      await write(target, 'zed', T0 + 200, 'T');
      await write(source, 'bob', T0 + 300, 'B');
      // The source's last write of the app's keys (bob's) is later than the target's.
      const report = await copyAll(source, target, { apps: ['clock'], userId: 'ada' });
      expect(report.scopes).toEqual([
        { appName: 'clock', scope: 'app', written: ['app:x'], keptInTarget: [], unwritten: [] },
      ]);
      expect(await target.getAppState(app)).toEqual({ x: 'B' });
    } finally {
      await Promise.all([source.close(), target.close()]);
    }
  }, 120_000);

  it('inspect, a migrate from an empty database and a dry run into one write nothing to them', async () => {
    expect(await keysIn(5)).toBe(0);
    const inspected = await runCli(['inspect', uri(5), '--app', 'shop']);
    expect(inspected.code, inspected.stdout + inspected.stderr).toBe(0);
    await runCli(['migrate', '--from', uri(5), '--to', uri(6), '--app', 'shop']);
    expect(await keysIn(5)).toBe(0);
    const source = new RedisSessionService({ url: uri(7) });
    try {
      await source.createSession({ appName: 'shop', userId: 'ada', sessionId: 's1' });
      const dry = await runCli(['migrate', '--from', uri(7), '--to', uri(8), '--app', 'shop', '--dry-run']);
      expect(dry.stdout).toContain('dry run');
      expect(await keysIn(8)).toBe(0);
    } finally {
      await source.close();
    }
  }, 120_000);
});
