/** temp: keys live for the current invocation only and are never stored anywhere. */
import { expect } from 'vitest';
import { type Group, makeEvent, plain, put } from '../kit.js';

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
