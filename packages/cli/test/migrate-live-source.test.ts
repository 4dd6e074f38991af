/**
 * `migrate` from a source that is still being written to, decided by logs
 * rather than by clocks: an event a slower server stamped earlier, a `user:`
 * value the app changes between two reads of the run, an earlier run's stale
 * copy of a value, and a run that stops half-way, each on in-process memory
 * stores (deterministic: every write between two reads is made by a wrapped
 * read, not by timing).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemorySessionService } from '@adk-state/adapter-memory';
import { createEvent, DatabaseSessionService, type Event, type Session } from '@google/adk';
import { describe, expect, it } from 'vitest';
import { changesOf, conflictsLeft, copyAll, type MigrateReport } from '../src/migrate.js';

const T0 = 1_700_000_000_000;

const at = (id: string, timestamp: number, stateDelta: Record<string, unknown>): Event =>
  createEvent({ id, invocationId: id, author: 'agent', timestamp, actions: { stateDelta } as never });

/** A session stored as given (its events, state and lastUpdateTime exactly). */
async function put(
  service: MemorySessionService,
  userId: string,
  id: string,
  state: Record<string, unknown>,
  events: Event[],
): Promise<void> {
  const lastUpdateTime = events[events.length - 1]?.timestamp ?? T0;
  await service.importSession({ appName: 'shop', userId, id, state, events, lastUpdateTime });
}

/** Appends `event` to a stored session, as an app would. */
async function append(service: MemorySessionService, userId: string, sessionId: string, event: Event): Promise<void> {
  const session = (await service.getSession({ appName: 'shop', userId, sessionId })) as Session;
  await service.appendEvent({ session, event });
}

const read = (service: MemorySessionService, userId: string, sessionId: string) =>
  service.getSession({ appName: 'shop', userId, sessionId }) as Promise<Session>;

/** `service`, whose getSession runs `before` first (once per call), for writes between two reads of a run. */
function beforeReads(
  service: MemorySessionService,
  before: (request: { userId: string; sessionId: string }) => Promise<void>,
): MemorySessionService {
  return new Proxy(service, {
    get(target, property) {
      if (property === 'getSession') {
        return async (request: { appName: string; userId: string; sessionId: string }) => {
          await before(request);
          return target.getSession(request);
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A source that reads a session's events in timestamp order, as ADK's SQL service does. */
function inTimestampOrder(service: MemorySessionService): MemorySessionService {
  return new Proxy(service, {
    get(target, property) {
      if (property === 'getSession') {
        return async (request: { appName: string; userId: string; sessionId: string }) => {
          const session = await target.getSession(request);
          session?.events.sort((a, b) => a.timestamp - b.timestamp);
          return session;
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** The run left ada's `user:plan` to the target, which holds `plan`. */
async function expectPlanKept(report: MigrateReport, target: MemorySessionService, plan: string): Promise<void> {
  expect(report.scopes[0]?.keptInTarget).toEqual(['user:plan']);
  expect(await target.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan });
}

/** Runs `body` with @google/adk's DatabaseSessionService on a SQLite file of its own, removed after. */
async function withAdkSqlite(body: (adk: DatabaseSessionService) => Promise<void>): Promise<void> {
  const scratch = await mkdtemp(join(tmpdir(), 'adk-state-slow-clock-'));
  const adk = new DatabaseSessionService(`sqlite://${join(scratch, 'adk.db')}`);
  try {
    await body(adk);
  } finally {
    await (adk as unknown as { orm?: { close(): Promise<void> } }).orm?.close();
    await rm(scratch, { recursive: true, force: true });
  }
}

/** ada's `user:plan` 'free' copied, then 'pro' written on one side in a session deleted since. */
async function proInDeletedSession(side: 'source' | 'target') {
  const source = new MemorySessionService();
  const target = new MemorySessionService();
  await put(source, 'ada', 's1', { 'user:plan': 'free' }, [at('e1', T0 + 1_000, { 'user:plan': 'free' })]);
  await copyAll(source, target, { apps: ['shop'] });
  const writer = side === 'source' ? source : target;
  await put(writer, 'ada', 'gone', {}, []);
  await append(writer, 'ada', 'gone', at('t1', T0 + 5_000, { 'user:plan': 'pro' }));
  await writer.deleteSession({ appName: 'shop', userId: 'ada', sessionId: 'gone' });
  return { source, target };
}

/** What a run that found nothing to do reports, of what {@link settled} looks at. */
const NOTHING = { changes: 0, conflicts: 0, failed: [], stopped: undefined };

const settled = (report: MigrateReport) => ({
  changes: changesOf(report),
  conflicts: conflictsLeft(report),
  failed: report.failed,
  stopped: report.stopped,
});

describe('migrate: an event stamped by a slower clock (D3)', () => {
  // Was a defect: the slow event moved the source's lastUpdateTime back before the target's
  // copy, so the re-run took the copy for writes of the target's own, kept it and exited 3.
  it('copies the events the target lacks although the source now reads as updated earlier', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 's1', { n: 2 }, [at('e1', T0 + 1_000, { n: 1 }), at('e2', T0 + 2_000, { n: 2 })]);
    expect((await copyAll(source, target, { apps: ['shop'] })).decisions.copy).toBe(1);
    await append(source, 'ada', 's1', at('e3', T0 + 1_500, { n: 3 }));
    expect((await read(source, 'ada', 's1')).lastUpdateTime).toBe(T0 + 1_500);

    const again = await copyAll(source, target, { apps: ['shop'], verify: true });
    expect(again.decisions).toEqual({ copy: 0, unchanged: 0, update: 1, conflict: 0 });
    expect(again.conflicts).toEqual([]);
    expect(again.differences).toEqual([]);
    const copy = await read(target, 'ada', 's1');
    expect(copy.events.map((event) => event.id)).toEqual(['e1', 'e2', 'e3']);
    expect(copy.state).toEqual({ n: 3 });
    expect(copy.lastUpdateTime).toBe(T0 + 1_500);
    expect(settled(await copyAll(source, target, { apps: ['shop'] }))).toEqual(NOTHING);
  });

  it('copies them from a source that reads events in timestamp order (the late event lands amid the copied ones)', async () => {
    const stored = new MemorySessionService();
    const source = inTimestampOrder(stored);
    const target = new MemorySessionService();
    await put(stored, 'ada', 's1', { n: 2 }, [at('e1', T0 + 1_000, { n: 1 }), at('e2', T0 + 2_000, { n: 2 })]);
    await copyAll(source, target, { apps: ['shop'] });
    await append(stored, 'ada', 's1', at('e3', T0 + 1_500, { m: 1 }));

    const again = await copyAll(source, target, { apps: ['shop'] });
    expect(again.decisions.update).toBe(1);
    expect(again.conflicts).toEqual([]);
    expect((await read(target, 'ada', 's1')).events.map((event) => event.id)).toEqual(['e1', 'e3', 'e2']);
    expect(settled(await copyAll(source, target, { apps: ['shop'] }))).toEqual(NOTHING);
  });

  it("copies them from @google/adk's DatabaseSessionService on SQLite, which a second server wrote to with a slower clock", async () => {
    await withAdkSqlite(async (adk) => {
      const target = new MemorySessionService();
      const created = await adk.createSession({ appName: 'shop', userId: 'ada', sessionId: 's1' });
      const start = created.lastUpdateTime;
      let session = created;
      for (const event of [at('e1', start + 1_000, { n: 1 }), at('e2', start + 2_000, { n: 2 })]) {
        await adk.appendEvent({ session, event });
      }
      expect((await copyAll(adk, target, { apps: ['shop'] })).decisions.copy).toBe(1);
      // The second server's session object, read before; its clock is half a second behind.
      session = (await adk.getSession({ appName: 'shop', userId: 'ada', sessionId: 's1' })) as Session;
      await adk.appendEvent({ session, event: at('e3', start + 1_500, { n: 3 }) });

      const again = await copyAll(adk, target, { apps: ['shop'], verify: true });
      expect(again.decisions).toEqual({ copy: 0, unchanged: 0, update: 1, conflict: 0 });
      expect(again.differences).toEqual([]);
      const copy = await read(target, 'ada', 's1');
      expect(copy.events.map((event) => event.id)).toEqual(['e1', 'e3', 'e2']);
      expect(copy.state).toEqual({ n: 3 });
      expect(settled(await copyAll(adk, target, { apps: ['shop'] }))).toEqual(NOTHING);
    });
  });

  it('leaves a copy without events to the times: nothing in it says it came from the source', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 's1', {}, [at('e1', T0 + 1_000, { n: 1 })]);
    // Made in the target (an app that went on there), later than the source's event.
    await target.importSession({
      appName: 'shop',
      userId: 'ada',
      id: 's1',
      state: {},
      events: [],
      lastUpdateTime: T0 + 2_000,
    });
    const report = await copyAll(source, target, { apps: ['shop'] });
    expect(report.conflicts).toEqual(['shop/ada/s1']);
    expect((await read(target, 'ada', 's1')).events).toEqual([]);
  });

  it('still leaves alone a copy that took an event of its own in the target', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 's1', { n: 2 }, [at('e1', T0 + 1_000, { n: 1 }), at('e2', T0 + 2_000, { n: 2 })]);
    await copyAll(source, target, { apps: ['shop'] });
    await append(source, 'ada', 's1', at('e3', T0 + 1_500, { n: 3 }));
    await append(target, 'ada', 's1', at('mine', T0 + 2_500, { n: 9 }));

    const again = await copyAll(source, target, { apps: ['shop'] });
    expect(again.conflicts).toEqual(['shop/ada/s1']);
    expect((await read(target, 'ada', 's1')).events.map((event) => event.id)).toEqual(['e1', 'e2', 'mine']);
  });

  it('still leaves alone a copy whose own state differs where no event it lacks writes', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    const events = [at('e1', T0 + 1_000, { n: 1 }), at('e2', T0 + 2_000, { n: 2 })];
    await put(source, 'ada', 's1', { n: 2, topic: 'a' }, events);
    // Another tool's copy: the same events, another value of a key no later event writes.
    await put(target, 'ada', 's1', { n: 2, topic: 'b' }, events);
    await append(source, 'ada', 's1', at('e3', T0 + 1_500, { n: 3 }));

    const again = await copyAll(source, target, { apps: ['shop'] });
    expect(again.conflicts).toEqual(['shop/ada/s1']);
    expect((await read(target, 'ada', 's1')).state).toEqual({ n: 2, topic: 'b' });
  });
});

describe('migrate: clocks that disagree never cost the target a write of its own', () => {
  // Was a loss: the target's own event, stamped by a clock behind the source's, left the target's
  // lastUpdateTime before the source's: the conflict went to the source, which wiped the event.
  it("keeps a target session whose log extends the source's, whatever its times", async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 's1', { n: 1 }, [at('e1', T0 + 1_000, { n: 1 })]);
    await copyAll(source, target, { apps: ['shop'] });
    await append(target, 'ada', 's1', at('own', T0 + 500, { n: 9 }));

    const again = await copyAll(source, target, { apps: ['shop'] });
    expect(again.conflicts).toEqual(['shop/ada/s1']);
    expect((await read(target, 'ada', 's1')).events.map((event) => event.id)).toEqual(['e1', 'own']);
    expect(again.overwritten).toEqual([]);
    // The source wins only by the policy, and the report names what the target lost.
    expect(await copyAll(source, target, { apps: ['shop'], onConflict: 'source' })).toMatchObject({
      decisions: { update: 1 },
      overwritten: ['shop/ada/s1'],
    });
    expect((await read(target, 'ada', 's1')).events.map((event) => event.id)).toEqual(['e1']);
  });

  it('keeps a target session with events of its own beside a source session without any', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 's1', { n: 1 }, []);
    await copyAll(source, target, { apps: ['shop'] });
    await append(target, 'ada', 's1', at('own', T0 - 500, { n: 2 }));

    const again = await copyAll(source, target, { apps: ['shop'] });
    expect(again.conflicts).toEqual(['shop/ada/s1']);
    expect((await read(target, 'ada', 's1')).state).toEqual({ n: 2 });
  });

  // A value no surviving event explains (its session was deleted) is not older than the events
  // that remain: the newer value stays, as a conflict.
  it('keeps a user: value the target wrote in a session deleted since', async () => {
    const { source, target } = await proInDeletedSession('target');
    const again = await copyAll(source, target, { apps: ['shop'] });
    await expectPlanKept(again, target, 'pro');
  });

  // Was a loss: a value given at a session's creation was dated by the session's first event,
  // which can come long after: 'pro', given at +1500, went over the target's 'team' of +1700.
  it("does not date a value given at a session's creation by the session's first event", async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 's1', { 'user:plan': 'free' }, [at('e1', T0 + 1_000, { 'user:plan': 'free' })]);
    await copyAll(source, target, { apps: ['shop'] });
    await append(target, 'ada', 's1', at('t1', T0 + 1_700, { 'user:plan': 'team' }));
    await put(source, 'ada', 's2', { 'user:plan': 'pro' }, [at('s2e', T0 + 2_000, { n: 1 })]);

    const again = await copyAll(source, target, { apps: ['shop'] });
    await expectPlanKept(again, target, 'team');
  });

  // An event from a clock far ahead does not date the events after it in its log.
  it("keeps the target's newer user: value beside a source log with one event from a fast clock", async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 's1', { n: 1, 'user:plan': 'free' }, [
      at('fast', T0 + 9_000, { n: 1 }),
      at('e2', T0 + 1_500, { 'user:plan': 'free' }),
    ]);
    await copyAll(source, target, { apps: ['shop'] });
    await put(target, 'ada', 't', { 'user:plan': 'pro' }, [at('t1', T0 + 3_000, { 'user:plan': 'pro' })]);

    const again = await copyAll(source, target, { apps: ['shop'] });
    await expectPlanKept(again, target, 'pro');
  });
});

describe('migrate: a user: write the times cannot place is a conflict left alone, never a silent loss', () => {
  // The times say the source's 'pro' came first (a second server's slower clock, which ADK's SQL
  // service also reads before the copied 'free'). Only the logs say otherwise, and a target's own
  // write can leave the same trace in them (below): the key is left to the target and reported.
  it("leaves a user: value a slower clock wrote on @google/adk's DatabaseSessionService on SQLite to the policy", async () => {
    await withAdkSqlite(async (adk) => {
      const target = new MemorySessionService();
      const key = { appName: 'shop', userId: 'ada', sessionId: 's1' };
      const created = await adk.createSession(key);
      const start = created.lastUpdateTime;
      await adk.appendEvent({ session: created, event: at('e1', start + 1_000, { 'user:plan': 'free' }) });
      await adk.appendEvent({ session: created, event: at('e2', start + 2_000, { n: 1 }) });
      await copyAll(adk, target, { apps: ['shop'] });
      const again = (await adk.getSession(key)) as Session;
      await adk.appendEvent({ session: again, event: at('e3', start + 500, { 'user:plan': 'pro' }) });

      const report = await copyAll(adk, target, { apps: ['shop'], verify: true });
      await expectPlanKept(report, target, 'free');
      expect(report.differences).toEqual([]);
      // The source's value, when asked for.
      await copyAll(adk, target, { apps: ['shop'], onConflict: 'source' });
      expect(await target.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan: 'pro' });
      expect(settled(await copyAll(adk, target, { apps: ['shop'] }))).toEqual(NOTHING);
    });
  });

  it('leaves a user: value a slower clock wrote in another session of the user, or one written in a source session deleted since, to the policy', async () => {
    const slow = new MemorySessionService();
    const slowTarget = new MemorySessionService();
    await put(slow, 'ada', 'a', {}, [at('a1', T0 + 900, { x: 1 })]);
    await put(slow, 'ada', 'b', { 'user:plan': 'free' }, [at('b1', T0 + 1_000, { 'user:plan': 'free' })]);
    await copyAll(slow, slowTarget, { apps: ['shop'] });
    await append(slow, 'ada', 'a', at('a2', T0 + 500, { 'user:plan': 'pro' }));
    await expectPlanKept(await copyAll(slow, slowTarget, { apps: ['shop'] }), slowTarget, 'free');

    const { source, target } = await proInDeletedSession('source');
    await expectPlanKept(await copyAll(source, target, { apps: ['shop'] }), target, 'free');
  });

  // Would be a loss under a rule that gives the source a key the target shows no write of its own
  // to: the run that replaces the target's session (its conflict goes to the source) drops the
  // target's own event that wrote the key, and the next run would find only copied events.
  it("keeps the target's own user: value after a run replaced the session whose event wrote it", async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 's1', { 'user:plan': 'pro' }, [
      at('e1', T0 + 1_000, { 'user:plan': 'free' }),
      at('e2', T0 + 2_000, { 'user:plan': 'pro' }),
    ]);
    await copyAll(source, target, { apps: ['shop'] });
    await append(target, 'ada', 's1', at('own', T0 + 3_000, { 'user:plan': 'free' }));
    await append(source, 'ada', 's1', at('e4', T0 + 4_000, { x: 1 }));

    const replaced = await copyAll(source, target, { apps: ['shop'] });
    expect(replaced.overwritten).toEqual(['shop/ada/s1']);
    await expectPlanKept(replaced, target, 'free');
    for (let run = 0; run < 2; run++)
      await expectPlanKept(await copyAll(source, target, { apps: ['shop'] }), target, 'free');
  });

  // The same under a rule that trusts a session the source also holds by its id: both apps made a
  // session 'main', the target's with the newest value of the key in its creation state.
  it("keeps a user: value given at the creation of a target session whose id the source's app used too", async () => {
    let now = T0;
    const source = new MemorySessionService({ now: () => now } as never);
    const target = new MemorySessionService({ now: () => now } as never);
    await put(source, 'ada', 's1', { 'user:plan': 'pro' }, [
      at('e1', T0 + 1_000, { 'user:plan': 'free' }),
      at('e2', T0 + 2_000, { 'user:plan': 'pro' }),
    ]);
    await copyAll(source, target, { apps: ['shop'] });
    now = T0 + 3_000;
    await source.createSession({ appName: 'shop', userId: 'ada', sessionId: 'main' });
    now = T0 + 4_000;
    await target.createSession({ appName: 'shop', userId: 'ada', sessionId: 'main', state: { 'user:plan': 'free' } });
    for (let run = 0; run < 2; run++)
      await expectPlanKept(await copyAll(source, target, { apps: ['shop'] }), target, 'free');
  });
});

describe('migrate: user: state written to the source during the run (D5)', () => {
  /** ada's sessions a (whose event wrote user:plan) and b. */
  async function twoSessions(source: MemorySessionService): Promise<void> {
    await put(source, 'ada', 'a', { 'user:plan': 'free' }, [at('a1', T0 + 1_000, { 'user:plan': 'free' })]);
    await put(source, 'ada', 'b', { 'user:plan': 'free', n: 1 }, [at('b1', T0 + 1_100, { n: 1 })]);
  }
  /** The app writes user:plan 'pro' in session b just before the run's first read of b. */
  function proBeforeReadingB(source: MemorySessionService): MemorySessionService {
    let done = false;
    return beforeReads(source, async ({ sessionId }) => {
      if (sessionId !== 'b' || done) return;
      done = true;
      await append(source, 'ada', 'b', at('b2', T0 + 3_000, { 'user:plan': 'pro' }));
    });
  }

  // Was a defect: the run carried the value it read with session a, then copied b with the event
  // that wrote the newer value; every later run found both sides' last write at that event: a
  // tie, the stale value kept, exit 3, for good.
  it('a value written between the reads of two sessions of the user reaches the target, and a re-run finds nothing', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await twoSessions(source);
    const report = await copyAll(proBeforeReadingB(source), target, { apps: ['shop'] });
    expect(report.decisions.copy).toBe(2);
    expect(report.scopes).toEqual([
      { appName: 'shop', scope: 'user:ada', written: ['user:plan'], keptInTarget: [], unwritten: [] },
    ]);
    expect(await target.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan: 'pro' });
    expect(settled(await copyAll(source, target, { apps: ['shop'] }))).toEqual(NOTHING);
  });

  it('a re-run carries a value the source writes during it to a key both sides held alike', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await twoSessions(source);
    await copyAll(source, target, { apps: ['shop'] });
    const report = await copyAll(proBeforeReadingB(source), target, { apps: ['shop'] });
    expect(report.decisions).toEqual({ copy: 0, unchanged: 1, update: 1, conflict: 0 });
    expect(await target.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan: 'pro' });
    expect(settled(await copyAll(source, target, { apps: ['shop'] }))).toEqual(NOTHING);
  });

  it('the tie still goes to neither side when both values are that of their last write', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await put(source, 'ada', 'a', { 'user:plan': 'free' }, [at('a1', T0 + 1_000, { 'user:plan': 'free' })]);
    await put(target, 'ada', 't', { 'user:plan': 'pro' }, [at('t1', T0 + 1_000, { 'user:plan': 'pro' })]);
    const report = await copyAll(source, target, { apps: ['shop'] });
    await expectPlanKept(report, target, 'pro');
  });
});

describe('migrate: the target written during the run', () => {
  // Was a loss: a user: key decided to write (the target lacked it) was carried by the import
  // although the app, writing to the target, had written it since: its value went under the
  // source's, with exit 0, and no later run saw anything to decide (the values were equal).
  it('leaves to the target a user: key it wrote after the run decided the key, and says so', async () => {
    const source = new MemorySessionService();
    const stored = new MemorySessionService();
    await put(source, 'ada', 's1', {}, [at('e1', T0 + 1_000, { n: 1 })]);
    await copyAll(source, stored, { apps: ['shop'] });
    await append(source, 'ada', 's1', at('e2', T0 + 2_000, { 'user:plan': 'pro' }));
    let reads = 0;
    // The run reads the target's copy of s1 twice: to decide it, then just before replacing it.
    const target = beforeReads(stored, async ({ sessionId }) => {
      if (sessionId !== 's1' || ++reads !== 2) return;
      await put(stored, 'ada', 'mine', {}, []);
      await append(stored, 'ada', 'mine', at('m1', T0 + 9_000, { 'user:plan': 'free' }));
    });

    const report = await copyAll(source, target, { apps: ['shop'], verify: true });
    expect(reads).toBe(3); // and once more by --verify
    expect(report.decisions.update).toBe(1);
    expect(report.scopes).toEqual([
      { appName: 'shop', scope: 'user:ada', written: [], keptInTarget: ['user:plan'], unwritten: [] },
    ]);
    expect(report.differences).toEqual([]);
    expect(conflictsLeft(report)).toBe(1);
    expect(await stored.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan: 'free' });
  });
});

describe('migrate: a run that stops names the user: and app: keys it wrote (D2)', () => {
  async function twoUsers(source: MemorySessionService): Promise<void> {
    await put(source, 'ada', 'a', { 'user:plan': 'free', 'app:motd': 'hi' }, [
      at('a1', T0 + 1_000, { 'user:plan': 'free', 'app:motd': 'hi' }),
    ]);
    await put(source, 'bob', 'b', { 'user:plan': 'pro', 'app:motd': 'hi' }, [
      at('b1', T0 + 1_100, { 'user:plan': 'pro' }),
    ]);
  }

  // Was a defect: the app's outcome was added to the report only when the app was through.
  it('interrupted after the first session: the app: key it carried is named and counted, as written', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await twoUsers(source);
    const controller = new AbortController();
    const report = await copyAll(source, target, {
      apps: ['shop'],
      signal: controller.signal,
      onProgress: (progress) => {
        if (progress.done === 1) controller.abort();
      },
    });
    expect(report.stopped?.reason).toBe('interrupted');
    expect(await target.getAppState({ appName: 'shop' })).toEqual({ motd: 'hi' });
    expect(report.scopes).toEqual([
      { appName: 'shop', scope: 'user:ada', written: ['user:plan'], keptInTarget: [], unwritten: [] },
      { appName: 'shop', scope: 'app', written: ['app:motd'], keptInTarget: [], unwritten: [] },
    ]);
    expect(changesOf(report)).toBe(3);
  });

  it('stopped by failures before any session was written: the keys to write are named as not written', async () => {
    const source = new MemorySessionService();
    const target = new MemorySessionService();
    await twoUsers(source);
    const refusing = new Proxy(target, {
      get(service, property) {
        if (property === 'importSession') return async () => Promise.reject(new Error('refused'));
        const value = Reflect.get(service, property);
        return typeof value === 'function' ? value.bind(service) : value;
      },
    });
    const report = await copyAll(source, refusing, { apps: ['shop'], maxFailures: 1 });
    expect(report.stopped?.reason).toBe('failures');
    expect(report.scopes).toEqual([
      { appName: 'shop', scope: 'user:ada', written: [], keptInTarget: [], unwritten: ['user:plan'] },
      { appName: 'shop', scope: 'app', written: [], keptInTarget: [], unwritten: ['app:motd'] },
    ]);
    expect(changesOf(report)).toBe(0);
  });
});
