/** Deleting a session removes it and its history, and nothing else. */
import { expect } from 'vitest';
import { expectCode, type Group, plain, put } from '../kit.js';

export const deletion: Group = {
  title: 'delete removes one session and its events',
  define({ test }) {
    test('a deleted session is gone with its events; user and app state stay', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1', state: { a: 1 } });
      await put(service, session, { 'user:u': 1, 'app:x': 2, b: 3 });
      await service.deleteSession({ appName, userId: 'u1', sessionId: 's1' });
      expect(await service.getSession({ appName, userId: 'u1', sessionId: 's1' })).toBeUndefined();
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({ u: 1 });
      expect(await service.getAppState({ appName })).toEqual({ x: 2 });
      expect((await service.listSessions({ appName })).sessions).toEqual([]);
    });

    test('recreating a deleted id starts with no history and only the new state', async (kit) => {
      const { service, session: old, appName } = await kit.fresh({ sessionId: 's1', state: { a: 1 } });
      await put(service, old, { b: 2, 'user:kept': true });
      await service.deleteSession({ appName, userId: 'u1', sessionId: 's1' });
      const recreated = await service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { c: 3 } });
      // user: state belongs to the user, not to the session, so the new session sees it again.
      expect(plain(recreated.state)).toEqual({ c: 3, 'user:kept': true });
      const loaded = await kit.reload(recreated);
      expect(loaded.events).toEqual([]);
      expect(plain(loaded.state)).toEqual({ c: 3, 'user:kept': true });
    });

    test('deleting an unknown key is a no-op', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      await service.deleteSession({ appName, userId: 'u1', sessionId: 'nope' });
      await service.deleteSession({ appName, userId: 'u2', sessionId: 's1' });
      await service.deleteSession({ appName: kit.app(), userId: 'u1', sessionId: 's1' });
      expect((await kit.reload(session)).id).toBe('s1');
    });

    test("deleting one user's session leaves another user's session with the same id", async (kit) => {
      const { service, session: mine, appName } = await kit.fresh({ sessionId: 'same' });
      const theirs = await service.createSession({ appName, userId: 'u2', sessionId: 'same' });
      await put(service, mine, { who: 1 });
      await put(service, theirs, { who: 2 });
      await service.deleteSession({ appName, userId: 'u1', sessionId: 'same' });
      const left = await kit.reload(theirs);
      expect(left.state.who).toBe(2);
      expect(left.events).toHaveLength(1);
    });

    test('appending to a deleted session is a SessionNotFoundError and stores nothing', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      await service.deleteSession({ appName, userId: 'u1', sessionId: 's1' });
      const error = await expectCode(
        put(service, session, { a: 1, 'user:b': 2 }),
        'SESSION_NOT_FOUND',
        'SessionNotFoundError',
      );
      expect(error.message.startsWith('Session s1 not found')).toBe(true);
      expect(await service.getSession({ appName, userId: 'u1', sessionId: 's1' })).toBeUndefined();
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({});
    });

    test('a session with many events is deleted whole', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      for (let i = 0; i < 250; i++) await put(service, session, { i });
      await service.deleteSession({ appName, userId: 'u1', sessionId: 's1' });
      const recreated = await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
      expect((await kit.reload(recreated)).events).toEqual([]);
    });
  },
};
