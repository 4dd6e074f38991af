/** temp: keys live for the current invocation only and are never stored anywhere. */

import type { Session } from '@google/adk';
import { expect } from 'vitest';
import { expectCode, type Group, makeEvent, plain, put } from '../kit.js';

export const temp: Group = {
  title: 'temp state is never stored',
  define({ test }) {
    test('temp: keys of the initial state are dropped', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const created = await service.createSession({ appName, userId: 'u1', state: { 'temp:x': 1, keep: 2 } });
      expect(plain(created.state)).toEqual({ keep: 2 });
      const loaded = await kit.reload(created);
      expect(plain(loaded.state)).toEqual({ keep: 2 });
    });

    test("a temp: delta reaches the caller's session state but not storage", async (kit) => {
      const { service, session, appName } = await kit.fresh();
      await put(service, session, { 'temp:scratch': { n: 1 }, kept: true });
      expect(session.state['temp:scratch']).toEqual({ n: 1 });
      expect(session.state.kept).toBe(true);
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ kept: true });
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({});
      expect(await service.getAppState({ appName })).toEqual({});
    });

    test('the returned and the stored event carry no temp: key', async (kit) => {
      const { service, session } = await kit.fresh();
      // ADK's own appendEvent strips temp: keys from the event, so neither copy may carry them.
      const event = makeEvent({ 'temp:a': 1, b: 2, 'temp:c': null });
      const returned = await service.appendEvent({ session, event });
      expect(plain(returned.actions.stateDelta)).toEqual({ b: 2 });
      const loaded = await kit.reload(session);
      expect(plain(loaded.events[0]?.actions.stateDelta)).toEqual({ b: 2 });
      expect(plain(session.events[0]?.actions.stateDelta)).toEqual({ b: 2 });
    });

    test('a temp: value is readable by the next append of the same session object', async (kit) => {
      const { service, session } = await kit.fresh();
      // The rest of the invocation (tools, templates, the next agent) reads temp: values from this object.
      await put(service, session, { 'temp:step': 1 });
      await put(service, session, { done: session.state['temp:step'] });
      expect(session.state['temp:step']).toBe(1);
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ done: 1 });
    });

    test('an event whose delta cannot be changed (sealed, not extensible, frozen) is stored without its temp: keys', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      const fixes: Array<(delta: Record<string, unknown>) => void> = [
        Object.seal,
        Object.preventExtensions,
        Object.freeze,
      ];
      for (const [n, fix] of fixes.entries()) {
        const delta = { 'temp:t': n, n };
        fix(delta);
        const returned = await service.appendEvent({ session, event: makeEvent(delta) });
        expect(plain(returned.actions.stateDelta)).toEqual({ n });
        expect(session.state['temp:t']).toBe(n);
        // The caller's delta stays as it was given.
        expect(delta).toEqual({ 'temp:t': n, n });
      }
      const loaded = await kit.reload(session);
      expect(loaded.events.map((event) => plain(event.actions.stateDelta))).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);
      expect(plain(loaded.state)).toEqual({ n: 2 });
      // Its temp: values are never stored, so never checked, as on any event: a function is fine there.
      const withFunction = Object.seal({ 'temp:fn': () => 1, n: 3 });
      await service.appendEvent({ session, event: makeEvent(withFunction) });
      expect(typeof session.state['temp:fn']).toBe('function');
      // A refusal of such an event is the store's typed error, the caller's delta untouched.
      const ghost: Session = { id: 'ghost', appName, userId: 'u1', state: {}, events: [], lastUpdateTime: 0 };
      const sealed = Object.seal({ 'temp:t': 1, n: 1 });
      await expectCode(service.appendEvent({ session: ghost, event: makeEvent(sealed) }), 'SESSION_NOT_FOUND');
      expect(sealed).toEqual({ 'temp:t': 1, n: 1 });
    });

    test('a frozen event is stored as JSON carries it (a toJSON value by what it returns), without temp: keys', async (kit) => {
      const { service, session } = await kit.fresh();
      const event = makeEvent({ 'temp:t': 1, n: 1 });
      (event as unknown as Record<string, unknown>).customMetadata = { when: new Date(0) };
      Object.freeze(event);
      Object.freeze(event.actions);
      const returned = await service.appendEvent({ session, event });
      const expected = { when: '1970-01-01T00:00:00.000Z' };
      expect(returned.customMetadata).toEqual(expected);
      expect(plain(returned.actions.stateDelta)).toEqual({ n: 1 });
      const loaded = await kit.reload(session);
      expect(loaded.events[0]?.customMetadata).toEqual(expected);
      expect(plain(loaded.events[0]?.actions.stateDelta)).toEqual({ n: 1 });
      expect(session.state['temp:t']).toBe(1);
    });

    test('a delta of only temp: keys still stores the event, with an empty delta', async (kit) => {
      const { service, session } = await kit.fresh();
      const event = await put(service, session, { 'temp:only': 'x' });
      const loaded = await kit.reload(session);
      expect(loaded.events.map((e) => e.id)).toEqual([event.id]);
      expect(plain(loaded.events[0]?.actions.stateDelta)).toEqual({});
      expect(plain(loaded.state)).toEqual({});
    });
  },
};
