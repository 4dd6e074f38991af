/** Durability: what one service instance stored, another instance on the same backend reads. */
import { expect } from 'vitest';
import { type Group, ids, plain, put } from '../kit.js';

export const durability: Group = {
  title: 'stored data outlives the service instance',
  define({ test }) {
    test(
      'a second service instance reads the state, buckets and events the first one stored',
      async (kit) => {
        const state = { a: 1, 'user:b': 2, 'app:c': 3, 'temp:d': 4 };
        const { service: writer, session, appName } = await kit.fresh({ sessionId: 's1', state });
        const appended = [];
        for (let i = 0; i < 5; i++) appended.push((await put(writer, session, { i, 'temp:t': i })).id);
        const reader = await kit.service();
        const loaded = await kit.reload(session, { service: reader });
        expect(plain(loaded.state)).toEqual({ a: 1, i: 4, 'user:b': 2, 'app:c': 3 });
        expect(ids(loaded)).toEqual(appended);
        expect(await reader.getUserState({ appName, userId: 'u1' })).toEqual({ b: 2 });
        expect(await reader.getAppState({ appName })).toEqual({ c: 3 });
        expect((await reader.listSessions({ appName })).sessions.map((s) => s.id)).toEqual(['s1']);
      },
      { requires: 'sharedBackend' },
    );

    test(
      'a session loaded by one instance appends through another, and the revision check spans instances',
      async (kit) => {
        const first = await kit.service();
        const second = await kit.service();
        const appName = kit.app();
        const session = await first.createSession({ appName, userId: 'u1', sessionId: 's1' });
        await put(first, session, { a: 1 });
        const loaded = await kit.reload(session, { service: second });
        await put(second, loaded, { a: 2 });
        // The revision lives in the stored session, so the first instance's object is now behind.
        const stale = await put(first, session, { a: 3 }).catch((error: { code?: string }) => error.code);
        expect(stale).toBe('STALE_SESSION');
        expect((await kit.reload(session, { service: first })).state.a).toBe(2);
      },
      { requires: 'sharedBackend' },
    );

    test(
      'a delete through one instance is seen by another',
      async (kit) => {
        const first = await kit.service();
        const second = await kit.service();
        const appName = kit.app();
        await first.createSession({ appName, userId: 'u1', sessionId: 's1' });
        await second.deleteSession({ appName, userId: 'u1', sessionId: 's1' });
        expect(await first.getSession({ appName, userId: 'u1', sessionId: 's1' })).toBeUndefined();
      },
      { requires: 'sharedBackend' },
    );
  },
};
