/** Stale writers: a session object built on an old revision never overwrites newer data. */

import type { StateSessionServiceOptions } from '@adk-state/core';
import type { Session } from '@google/adk';
import { expect } from 'vitest';
import { allAwaited, expectCode, type Group, ids, makeEvent, plain, put, type TestKit } from '../kit.js';

/** A fresh session `s1` with one event, and two copies of it read back: two writers on one revision. */
async function twoCopies(kit: TestKit, serviceOptions?: StateSessionServiceOptions) {
  const { service, session, appName } = await kit.fresh({ sessionId: 's1', state: { n: 0 }, serviceOptions });
  await put(service, session, { n: 1 });
  return { service, session, appName, a: await kit.reload(session), b: await kit.reload(session) };
}

export const stale: Group = {
  title: 'stale writers are refused',
  define({ test }) {
    test('a session object older than the stored session gets StaleSessionError and writes nothing', async (kit) => {
      const { service, session, appName, a, b } = await twoCopies(kit);
      const winner = await put(service, a, { n: 2, 'user:u': 'a' });
      const before = { state: { ...b.state }, events: [...b.events] };
      const error = await expectCode(
        put(service, b, { n: 3, 'user:u': 'b', 'app:x': 1 }),
        'STALE_SESSION',
        'StaleSessionError',
      );
      expect(error.message).toContain('s1');
      expect(b.state).toEqual(before.state);
      expect(b.events).toEqual(before.events);
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ n: 2, 'user:u': 'a' });
      expect(ids(loaded)[ids(loaded).length - 1]).toBe(winner.id);
      expect(loaded.events).toHaveLength(2);
      expect(await service.getAppState({ appName })).toEqual({});
    });

    test('a session object of a deleted session is stale against a session re-created under its id', async (kit) => {
      const { service, session: old, appName } = await kit.fresh({ sessionId: 's1', state: { n: 0 } });
      const key = { appName, userId: 'u1', sessionId: 's1' };
      await service.deleteSession(key);
      const again = await service.createSession({ ...key, state: { n: 10 } });
      // The re-created session is another session: writes built on the deleted one must never land in it.
      await expectCode(put(service, old, { n: 1, 'user:u': 'old' }), 'STALE_SESSION', 'StaleSessionError');
      await put(service, again, { n: 11 });
      const loaded = await kit.reload(again);
      expect(plain(loaded.state)).toEqual({ n: 11 });
      expect(loaded.events).toHaveLength(1);
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({});
    });

    test('a refused event keeps its temp: keys and may be appended again after a reload', async (kit) => {
      const { service, session, a, b } = await twoCopies(kit);
      await put(service, a, { n: 2 });
      const event = makeEvent({ 'temp:t': 1, m: 1 });
      await expectCode(service.appendEvent({ session: b, event }), 'STALE_SESSION');
      // temp: keys are given back to the caller's event on a refused append, so it can be appended again whole.
      expect(plain(event.actions.stateDelta)).toEqual({ 'temp:t': 1, m: 1 });
      const current = await kit.reload(session);
      await service.appendEvent({ session: current, event });
      expect(current.state['temp:t']).toBe(1);
      expect(plain((await kit.reload(session)).state)).toEqual({ n: 2, m: 1 });
    });

    test('one session object appending many times in the same millisecond is never stale', async (kit) => {
      const { service, session } = await kit.fresh();
      // Equal timestamps are no conflict: every append moves the revision on, whatever the clock says.
      const appended = [];
      for (let i = 0; i < 20; i++) appended.push((await put(service, session, { i }, { timestamp: 1_000 })).id);
      const loaded = await kit.reload(session);
      expect(ids(loaded)).toEqual(appended);
      expect(loaded.state.i).toBe(19);
    });

    test('events with older timestamps than the stored lastUpdateTime are not stale', async (kit) => {
      const { service, session } = await kit.fresh();
      // Staleness is decided by the session's revision, not the clock (lastUpdateTime): timestamps are the caller's.
      await put(service, session, { a: 1 }, { timestamp: Date.now() + 3_600_000 });
      await put(service, session, { a: 2 }, { timestamp: 1_000 });
      const copy = await kit.reload(session);
      await put(service, copy, { a: 3 }, { timestamp: 500 });
      expect((await kit.reload(session)).state.a).toBe(3);
    });

    test('a fresh read is current even when the stored lastUpdateTime is in the future', async (kit) => {
      const { service, session } = await kit.fresh();
      // A clock check would refuse every write after a future-stamped event; the revision check does not.
      await put(service, session, {}, { timestamp: Date.now() + 86_400_000 });
      const reread = await kit.reload(session);
      await put(service, reread, { ok: true }, { timestamp: Date.now() });
      expect(reread.state.ok).toBe(true);
    });

    test('a session read with an event filter is still current', async (kit) => {
      const { service, session } = await kit.fresh();
      for (let i = 0; i < 5; i++) await put(service, session, { i });
      // The read carries the session's revision, so holding fewer events does not make it stale.
      const tail = await kit.reload(session, { numRecentEvents: 0 });
      await put(service, tail, { i: 99 });
      expect((await kit.reload(session)).events).toHaveLength(6);
    });

    test('a hand-built or cloned session is current when its newest event is the newest stored event', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      await put(service, session, { a: 1 });
      // An object the service never handed out has no revision of its own: its newest event id stands in for it.
      const clone = structuredClone({ ...session, events: session.events.map((e) => ({ ...e })) }) as Session;
      await put(service, clone, { a: 2 });
      const byHand: Session = {
        id: 's1',
        appName,
        userId: 'u1',
        state: {},
        events: [...clone.events],
        lastUpdateTime: 0,
      };
      await put(service, byHand, { a: 3 });
      expect((await kit.reload(session)).state.a).toBe(3);
      const empty: Session = { id: 's1', appName, userId: 'u1', state: {}, events: [], lastUpdateTime: 0 };
      await expectCode(put(service, empty, { a: 4 }), 'STALE_SESSION');
      const old = structuredClone({ ...session, events: session.events.slice(0, 1).map((e) => ({ ...e })) }) as Session;
      await expectCode(put(service, old, { a: 5 }), 'STALE_SESSION');
      expect((await kit.reload(session)).state.a).toBe(3);
    });

    test('a hand-built session of a new session without events is current', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      const byHand: Session = { id: 's1', appName, userId: 'u1', state: {}, events: [], lastUpdateTime: 0 };
      await put(service, byHand, { a: 1 });
      expect((await kit.reload(session)).state.a).toBe(1);
    });

    test('of two concurrent appends from the same revision exactly one succeeds', async (kit) => {
      const { service, session, a, b } = await twoCopies(kit);
      const results = await Promise.allSettled([put(service, a, { who: 'a' }), put(service, b, { who: 'b' })]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect((lost[0]?.reason as { code?: string }).code).toBe('STALE_SESSION');
      const winnerEvent = (won[0] as PromiseFulfilledResult<{ id: string }>).value;
      const loaded = await kit.reload(session);
      expect(loaded.events).toHaveLength(2);
      expect(ids(loaded)[1]).toBe(winnerEvent.id);
      expect(loaded.state.who).toBe(results[0]?.status === 'fulfilled' ? 'a' : 'b');
    });

    test('of ten concurrent appends from the same revision exactly one succeeds', async (kit) => {
      const { service, session } = await kit.fresh({ sessionId: 's1' });
      const copies = await allAwaited(Array.from({ length: 10 }, () => kit.reload(session)));
      const results = await Promise.allSettled(copies.map((copy, i) => put(service, copy, { [`k${i}`]: i })));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) {
        if (r.status === 'rejected') expect((r.reason as { code?: string }).code).toBe('STALE_SESSION');
      }
      const loaded = await kit.reload(session);
      expect(loaded.events).toHaveLength(1);
      expect(Object.keys(plain(loaded.state))).toHaveLength(1);
    });

    test("onStale: 'reload' reloads the caller's session in place and then applies the event", async (kit) => {
      const { service, session, a, b } = await twoCopies(kit, { onStale: 'reload' });
      // ADK's Runner goes on with the session object it holds, so the reload must land in that object.
      const stateObject = b.state;
      const eventsArray = b.events;
      b.state['temp:carry'] = 'kept';
      const first = await put(service, a, { n: 2, 'user:u': 'a' });
      const second = await put(service, b, { m: 1 });
      expect(b.state).toBe(stateObject);
      expect(b.events).toBe(eventsArray);
      expect(plain(b.state)).toEqual({ n: 2, m: 1, 'user:u': 'a', 'temp:carry': 'kept' });
      expect(ids(b).slice(-2)).toEqual([first.id, second.id]);
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ n: 2, m: 1, 'user:u': 'a' });
      expect(ids(loaded)).toEqual(ids(b));
    });

    test("onStale: 'reload' under concurrency loses, duplicates and reorders nothing", async (kit) => {
      const { service, session } = await kit.fresh({ sessionId: 's1', serviceOptions: { onStale: 'reload' } });
      const writers = await allAwaited([0, 1, 2].map(() => kit.reload(session)));
      const written: string[][] = [[], [], []];
      await allAwaited(
        writers.map(async (writer, w) => {
          for (let i = 0; i < 10; i++) written[w]?.push((await put(service, writer, { [`w${w}`]: i })).id);
        }),
      );
      const loaded = await kit.reload(session);
      const stored = ids(loaded);
      expect(stored).toHaveLength(30);
      expect(new Set(stored).size).toBe(30);
      for (const mine of written) expect(stored.filter((id) => mine.includes(id))).toEqual(mine);
      expect(plain(loaded.state)).toEqual({ w0: 9, w1: 9, w2: 9 });
    });

    test(
      'two service instances on one backend: exactly one of two concurrent appends wins',
      async (kit) => {
        const first = await kit.service();
        const second = await kit.service();
        const appName = kit.app();
        const session = await first.createSession({ appName, userId: 'u1', sessionId: 's1' });
        for (let round = 0; round < 5; round++) {
          const [a, b] = await allAwaited([
            kit.reload(session, { service: first }),
            kit.reload(session, { service: second }),
          ]);
          const results = await Promise.allSettled([
            put(first, a, { round, who: 'first' }),
            put(second, b, { round, who: 'second' }),
          ]);
          expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
          const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
          expect((lost.reason as { code?: string }).code).toBe('STALE_SESSION');
        }
        const loaded = await kit.reload(session, { service: second });
        expect(loaded.events).toHaveLength(5);
        expect(loaded.state.round).toBe(4);
      },
      { requires: 'sharedBackend' },
    );

    test(
      "two service instances with onStale: 'reload' lose, duplicate and reorder nothing",
      async (kit) => {
        const first = await kit.service({ onStale: 'reload' });
        const second = await kit.service({ onStale: 'reload' });
        const appName = kit.app();
        const created = await first.createSession({ appName, userId: 'u1', sessionId: 's1' });
        const services = [first, second];
        const written: string[][] = [[], []];
        await allAwaited(
          services.map(async (service, w) => {
            const session = await kit.reload(created, { service });
            for (let i = 0; i < 15; i++)
              written[w]?.push((await put(service, session, { [`w${w}`]: i, 'user:n': i })).id);
          }),
        );
        const loaded = await kit.reload(created, { service: first });
        const stored = ids(loaded);
        expect(stored).toHaveLength(30);
        expect(new Set(stored).size).toBe(30);
        for (const mine of written) expect(stored.filter((id) => mine.includes(id))).toEqual(mine);
        expect(plain(loaded.state)).toMatchObject({ w0: 14, w1: 14 });
      },
      { requires: 'sharedBackend' },
    );
  },
};
