/** Identity and lifecycle: creating, reading and re-reading sessions by their exact key. */
import type { Session } from '@google/adk';
import { expect } from 'vitest';
import { allAwaited, expectCode, type Group, ids, plain, put } from '../kit.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

export const identity: Group = {
  title: 'identity and lifecycle',
  define({ test }) {
    test('createSession returns the session with its key, its state and no events', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const before = Date.now();
      const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { a: 1 } });
      const after = Date.now();
      expect(session.id).toBe('s1');
      expect(session.appName).toBe(appName);
      expect(session.userId).toBe('u1');
      expect(plain(session.state)).toEqual({ a: 1 });
      expect(session.events).toEqual([]);
      expect(session.lastUpdateTime).toBeGreaterThanOrEqual(before);
      expect(session.lastUpdateTime).toBeLessThanOrEqual(after);
    });

    test('a stored session reads back with the lastUpdateTime of its creation', async (kit) => {
      const { session: created } = await kit.fresh({ sessionId: 's1' });
      const loaded = await kit.reload(created);
      expect(loaded.lastUpdateTime).toBe(created.lastUpdateTime);
      expect(loaded.id).toBe('s1');
      expect(loaded.events).toEqual([]);
    });

    test('an omitted or empty sessionId generates a distinct UUID v4', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const a = await service.createSession({ appName, userId: 'u1' });
      // '' counts as no id, as in ADK's own services (sessionId || a new UUID).
      const b = await service.createSession({ appName, userId: 'u1', sessionId: '' });
      expect(a.id).toMatch(UUID_V4);
      expect(b.id).toMatch(UUID_V4);
      expect(a.id).not.toBe(b.id);
      expect((await kit.reload(b)).id).toBe(b.id);
    });

    test('creating an existing key fails with AlreadyExistsError and changes nothing', async (kit) => {
      const { service, session, appName } = await kit.fresh({
        sessionId: 's1',
        state: { a: 1, 'user:u': 1, 'app:x': 1 },
      });
      await put(service, session, { a: 2 });
      const error = await expectCode(
        service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { a: 9, 'user:u': 9, 'app:x': 9 } }),
        'ALREADY_EXISTS',
        'AlreadyExistsError',
      );
      expect(error.message.startsWith('Session with id s1 already exists.')).toBe(true);
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ a: 2, 'user:u': 1, 'app:x': 1 });
      expect(loaded.events).toHaveLength(1);
    });

    test('the same sessionId may exist for two users, and each sees only its own', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await service.createSession({ appName, userId: 'alice', sessionId: 'same', state: { who: 'alice' } });
      await service.createSession({ appName, userId: 'bob', sessionId: 'same', state: { who: 'bob' } });
      expect((await service.getSession({ appName, userId: 'alice', sessionId: 'same' }))?.state.who).toBe('alice');
      expect((await service.getSession({ appName, userId: 'bob', sessionId: 'same' }))?.state.who).toBe('bob');
      expect(await service.getSession({ appName, userId: 'carol', sessionId: 'same' })).toBeUndefined();
    });

    test('getSession is undefined for an unknown key and for a key with an empty part', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
      expect(await service.getSession({ appName, userId: 'u1', sessionId: 'nope' })).toBeUndefined();
      expect(await service.getSession({ appName: kit.app(), userId: 'u1', sessionId: 's1' })).toBeUndefined();
      expect(await service.getSession({ appName: '', userId: 'u1', sessionId: 's1' })).toBeUndefined();
      expect(await service.getSession({ appName, userId: '', sessionId: 's1' })).toBeUndefined();
      expect(await service.getSession({ appName, userId: 'u1', sessionId: '' })).toBeUndefined();
      expect(
        await service.getSession({ appName: undefined as unknown as string, userId: 'u1', sessionId: 's1' }),
      ).toBeUndefined();
    });

    test('createSession requires a non-empty appName and userId', async (kit) => {
      const service = await kit.service();
      await expectCode(
        service.createSession({ appName: '', userId: 'u1' }),
        'INVALID_ARGUMENT',
        'InvalidArgumentError',
      );
      await expectCode(service.createSession({ appName: kit.app(), userId: '' }), 'INVALID_ARGUMENT');
      await expectCode(
        service.createSession({ appName: kit.app(), userId: undefined as unknown as string }),
        'INVALID_ARGUMENT',
      );
    });

    test('a returned session is a copy: mutating it never changes storage', async (kit) => {
      const { service, session: created } = await kit.fresh({
        sessionId: 's1',
        state: { nested: { list: [1, 2] }, 'user:u': { v: 1 } },
      });
      // Callers, ADK's Runner among them, change the objects they hold; only an append may reach storage.
      (created.state.nested as { list: number[] }).list.push(3);
      created.state.added = true;
      await put(service, created, { n: 1 });
      const loaded = await kit.reload(created);
      (loaded.state['user:u'] as { v: number }).v = 99;
      loaded.events.length = 0;
      loaded.state.nested = 'gone';
      const again = await kit.reload(created);
      expect(plain(again.state)).toEqual({ nested: { list: [1, 2] }, n: 1, 'user:u': { v: 1 } });
      expect(again.events).toHaveLength(1);
    });

    test('getOrCreateSession returns the stored session, or creates it when missing', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const made = await service.getOrCreateSession({ appName, userId: 'u1', sessionId: 's1', state: { a: 1 } });
      await put(service, made, { a: 2 });
      const again = await service.getOrCreateSession({ appName, userId: 'u1', sessionId: 's1', state: { a: 3 } });
      expect(plain(again.state)).toEqual({ a: 2 });
      expect(ids(again)).toEqual(ids(made));
      const generated = await service.getOrCreateSession({ appName, userId: 'u1' });
      expect(generated.id).not.toBe('');
      expect(await kit.reload(generated)).toBeDefined();
    });

    test('concurrent getOrCreateSession calls for one missing id all get the one session that was created', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const request = { appName, userId: 'u1', sessionId: 'shared', state: { a: 1 } };
      const sessions = await allAwaited([0, 1, 2, 3].map(() => service.getOrCreateSession(request)));
      for (const session of sessions) {
        expect(session.id).toBe('shared');
        expect(plain(session.state)).toEqual({ a: 1 });
      }
      const listed = await service.listSessions({ appName, userId: 'u1' });
      expect(listed.sessions.map((session) => session.id)).toEqual(['shared']);
      // What each caller got is the stored session: appending through it needs no reload.
      await put(service, sessions[0] as Session, { a: 2 });
      expect(plain((await kit.reload(sessions[0] as Session)).state)).toEqual({ a: 2 });
    });
  },
};
