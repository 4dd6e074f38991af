/**
 * Import: a session copied from another store (a migration) reads back
 * exactly as it was given: state (including state no event carries), events
 * with their ids, timestamps and deltas, and lastUpdateTime; no delta is
 * applied twice; an existing key is left alone unless replaced.
 */
import type { Event, Session } from '@google/adk';
import { expect } from 'vitest';
import { type Group, ids, makeEvent, plain, put } from '../kit.js';

/** A session as another store would hand it over: events whose deltas produced part of the state. */
function copied(appName: string, sessionId: string, eventCount = 3): Session {
  const events: Event[] = [];
  for (let n = 1; n <= eventCount; n++) {
    events.push(makeEvent({ step: n, 'user:seen': n }, { id: `${sessionId}-e${n}`, timestamp: 1_000_000 + n * 10 }));
  }
  return {
    id: sessionId,
    appName,
    userId: 'u1',
    // `given` was state at creation: no event carries it.
    state: { given: 'at creation', step: eventCount, 'user:seen': eventCount, 'app:shared': 'yes' },
    events,
    lastUpdateTime: 1_000_000 + eventCount * 10 + 5,
  };
}

/** The events as JSON: what must survive the copy byte for byte. */
function json(events: readonly Event[] | undefined): unknown {
  return JSON.parse(JSON.stringify(events ?? []));
}

export const importing: Group = {
  title: 'an imported session reads back exactly as it was copied',
  define({ test }) {
    test('state, events (ids, timestamps, content, deltas, order) and lastUpdateTime come back exactly; no delta is applied again', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const source = copied(appName, 's1');
      expect(await service.importSession(source)).toBe('imported');
      const loaded = await kit.reload(source);
      expect(plain(loaded.state)).toEqual(source.state);
      expect(json(loaded.events)).toEqual(json(source.events));
      expect(loaded.lastUpdateTime).toBe(source.lastUpdateTime);
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({ seen: 3 });
      expect(await service.getAppState({ appName })).toEqual({ shared: 'yes' });
      const listed = await service.listSessions({ appName });
      expect(listed.sessions.map((session) => [session.id, session.lastUpdateTime])).toEqual([
        ['s1', source.lastUpdateTime],
      ]);
    });

    test('an imported partial event is not stored, nor is a temp: key of a delta; the source is left as it was', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const source = copied(appName, 's1');
      const [first, second] = source.events as [Event, Event];
      first.actions.stateDelta['temp:scratch'] = 'never stored';
      second.partial = true;
      expect(await service.importSession(source)).toBe('imported');
      const loaded = await kit.reload(source);
      expect(ids(loaded)).toEqual([first.id, 's1-e3']);
      expect(plain(loaded.events[0]?.actions.stateDelta)).toEqual({ step: 1, 'user:seen': 1 });
      expect(first.actions.stateDelta['temp:scratch']).toBe('never stored');
      expect(source.events).toHaveLength(3);
    });

    test('an import with an event some backends refuse (2 MB of text) stores the whole session or none of it', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const source = copied(appName, 'large');
      const middle = source.events[1] as Event;
      source.events[1] = { ...middle, content: { role: 'model', parts: [{ text: 'x'.repeat(2_000_000) }] } } as Event;
      const outcome = await service.importSession(source).then(
        (status) => ({ status }),
        (error: unknown) => ({ error }),
      );
      const key = { appName, userId: 'u1', sessionId: 'large' };
      if ('status' in outcome) {
        expect(outcome.status).toBe('imported');
        const loaded = await kit.reload(source);
        expect(json(loaded.events)).toEqual(json(source.events));
        expect(plain(loaded.state)).toEqual(source.state);
      } else {
        // Refused: typed, and nothing of the session is stored (no head, no first event, no listing entry).
        expect((outcome.error as { code?: unknown }).code, String(outcome.error)).toEqual(expect.any(String));
        expect(await service.getSession(key)).toBeUndefined();
        expect((await service.listSessions({ appName })).sessions).toEqual([]);
        // Without the refused event it imports under the same key.
        const smaller = { ...source, events: source.events.filter((event) => event !== source.events[1]) };
        expect(await service.importSession(smaller)).toBe('imported');
        expect(ids(await service.getSession(key))).toEqual(['large-e1', 'large-e3']);
      }
    });

    test('a session with no events keeps its state and lastUpdateTime', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const source = { ...copied(appName, 'quiet', 0), state: { only: 'state' } };
      expect(await service.importSession(source)).toBe('imported');
      const loaded = await kit.reload(source);
      expect(plain(loaded.state)).toEqual({ only: 'state' });
      expect(loaded.events).toEqual([]);
      expect(loaded.lastUpdateTime).toBe(source.lastUpdateTime);
    });

    test('the imported session takes appends like any other (revision, filters, order)', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const source = copied(appName, 's1');
      await service.importSession(source);
      const loaded = await kit.reload(source);
      await put(service, loaded, { step: 4 }, { id: 'after' });
      const again = await kit.reload(source);
      expect(ids(again)).toEqual(['s1-e1', 's1-e2', 's1-e3', 'after']);
      expect(again.state.step).toBe(4);
      expect(ids(await kit.reload(source, { numRecentEvents: 2 }))).toEqual(['s1-e3', 'after']);
    });

    test("an existing key is left alone ('exists') unless replace is asked for", async (kit) => {
      const { service, session: mine, appName } = await kit.fresh({ sessionId: 's1', state: { mine: true } });
      await put(service, mine, { more: 1 });
      expect(await service.importSession(copied(appName, 's1'))).toBe('exists');
      const kept = await kit.reload(mine);
      expect(plain(kept.state)).toEqual({ mine: true, more: 1 });
      expect(kept.events).toHaveLength(1);

      expect(await service.importSession(copied(appName, 's1', 2), { replace: true })).toBe('imported');
      const replaced = await kit.reload(mine);
      expect(ids(replaced)).toEqual(['s1-e1', 's1-e2']);
      expect(replaced.state.mine).toBeUndefined();
    });

    test('a refused import (bad state, bad event) writes nothing', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const badState = { ...copied(appName, 'bad'), state: { fn: (() => 1) as unknown } };
      await expect(service.importSession(badState as Session)).rejects.toMatchObject({ code: 'INVALID_STATE_VALUE' });
      const badEvent = copied(appName, 'bad');
      (badEvent.events[1] as unknown as { content: unknown }).content = { parts: [{ text: Symbol('x') }] };
      await expect(service.importSession(badEvent)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(await service.getSession({ appName, userId: 'u1', sessionId: 'bad' })).toBeUndefined();
    });
  },
};
