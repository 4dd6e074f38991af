/** Re-appending an event id replaces that event in place: no duplicate, no reorder. */
import { expect } from 'vitest';
import { type Group, ids, makeEvent, plain, put } from '../kit.js';

export const reappend: Group = {
  title: 're-appending an event id replaces it in place',
  define({ test }) {
    test('the stored event is replaced where it stood and the delta applies', async (kit) => {
      const { service, session } = await kit.fresh();
      const first = await put(service, session, { a: 1 }, { text: 'first' });
      const second = await put(service, session, { b: 1 }, { text: 'second' });
      // ADK's own appendEvent replaces an event of the same id where it stands, so a store must too.
      const again = makeEvent({ a: 2 }, { id: first.id, text: 'first, revised' });
      await service.appendEvent({ session, event: again });
      expect(ids(session)).toEqual([first.id, second.id]);
      expect(session.events[0]?.content?.parts?.[0]?.text).toBe('first, revised');
      const loaded = await kit.reload(session);
      expect(ids(loaded)).toEqual([first.id, second.id]);
      expect(loaded.events[0]?.content?.parts?.[0]?.text).toBe('first, revised');
      expect(plain(loaded.state)).toEqual({ a: 2, b: 1 });
      expect(loaded.lastUpdateTime).toBe(again.timestamp);
    });

    test('the same event appended twice is stored once', async (kit) => {
      const { service, session } = await kit.fresh();
      const event = makeEvent({ n: 1 });
      await service.appendEvent({ session, event });
      await service.appendEvent({ session, event });
      expect(ids(session)).toEqual([event.id]);
      expect(ids(await kit.reload(session))).toEqual([event.id]);
      expect(ids(await kit.reload(session, { numRecentEvents: 5 }))).toEqual([event.id]);
    });

    test('event ids are scoped to their session', async (kit) => {
      const { service, session: a, appName } = await kit.fresh();
      const b = await service.createSession({ appName, userId: 'u1' });
      const shared = makeEvent({ x: 'a' }, { id: 'same-id' });
      await service.appendEvent({ session: a, event: shared });
      await service.appendEvent({ session: b, event: makeEvent({ x: 'b' }, { id: 'same-id' }) });
      expect(plain((await kit.reload(a)).events[0]?.actions.stateDelta)).toEqual({ x: 'a' });
      expect(plain((await kit.reload(b)).events[0]?.actions.stateDelta)).toEqual({ x: 'b' });
    });
  },
};
