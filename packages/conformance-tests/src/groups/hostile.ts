/** Hostile ids and keys: any string is an exact, opaque id that never reaches another key's data. */

import { isDeepStrictEqual } from 'node:util';
import { compareSessions } from '@adk-state/core/store';
import { State } from '@google/adk';
import { expect } from 'vitest';
import { type Group, ids, plain, put, uniqueName } from '../kit.js';

/**
 * Id fragments that break naive key encodings (separators, wildcards, hash
 * tags, paths, escapes), and strings that are not well-formed UTF-16 (lone
 * surrogates), which many backends cannot store as text.
 */
export const HOSTILE_IDS: readonly string[] = [
  'a:b',
  'a/b',
  'a.b',
  '..',
  '.',
  '$a',
  '{a}',
  '{',
  '}',
  '*',
  '?',
  '[a]',
  'a\\b',
  '"q"',
  '__proto__',
  'constructor',
  '__name__',
  ' a',
  'a ',
  'A',
  'a',
  'a\nb',
  'a\u0000b',
  '%2F',
  'ünï©ødé 🚀',
  '\u{10000}',
  '\uffff',
  '\ufffd',
  '\ud800',
  '\udc00',
  'a\udfffb',
  '\udbff\ud800',
  'x'.repeat(1024),
];

/** A user id of 2,000 bytes of UTF-8, longer than many backends index as a plain value. */
export const LONG_USER_ID = `${'ü'.repeat(999)}!!`;

export const hostile: Group = {
  title: 'hostile ids and keys never collide',
  define({ test }) {
    test('every hostile string works as a sessionId, exactly and apart from the others', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      for (const sessionId of HOSTILE_IDS) {
        const session = await service.createSession({ appName, userId: 'u1', sessionId, state: { me: sessionId } });
        await put(service, session, { again: sessionId });
      }
      for (const sessionId of HOSTILE_IDS) {
        const loaded = await service.getSession({ appName, userId: 'u1', sessionId });
        expect(loaded?.id).toBe(sessionId);
        expect(plain(loaded?.state)).toEqual({ me: sessionId, again: sessionId });
        expect(loaded?.events).toHaveLength(1);
      }
      const listed = await service.listSessions({ appName, userId: 'u1' });
      expect(listed.sessions.map((s) => s.id).sort()).toEqual([...HOSTILE_IDS].sort());
    });

    test('every hostile string works as a userId with buckets of its own', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      for (const userId of HOSTILE_IDS) {
        const session = await service.createSession({ appName, userId, sessionId: 's', state: { 'user:me': userId } });
        await put(service, session, { own: userId });
      }
      for (const userId of HOSTILE_IDS) {
        expect(await service.getUserState({ appName, userId })).toEqual({ me: userId });
        const loaded = await service.getSession({ appName, userId, sessionId: 's' });
        expect(loaded?.userId).toBe(userId);
        expect(plain(loaded?.state)).toEqual({ own: userId, 'user:me': userId });
        const listed = await service.listSessions({ appName, userId });
        expect(listed.sessions.map((s) => [s.userId, s.id])).toEqual([[userId, 's']]);
      }
      expect((await service.listSessions({ appName })).totalItems).toBe(HOSTILE_IDS.length);
    });

    test('every hostile string works inside an appName without reaching a neighbour app', async (kit) => {
      const service = await kit.service();
      const base = kit.app();
      for (const id of HOSTILE_IDS) {
        const appName = `${base}${id}`;
        await service.createSession({ appName, userId: 'u', sessionId: 's', state: { 'app:me': id, own: id } });
      }
      for (const id of HOSTILE_IDS) {
        const appName = `${base}${id}`;
        expect(await service.getAppState({ appName })).toEqual({ me: id });
        const listed = await service.listSessions({ appName });
        expect(listed.sessions.map((s) => s.appName)).toEqual([appName]);
        expect(plain(listed.sessions[0]?.state)).toEqual({ own: id, 'app:me': id });
      }
    });

    test('keys that would collide when joined with a separator stay apart', async (kit) => {
      const service = await kit.service();
      const base = kit.app();
      const triples: Array<[string, string, string]> = [
        [`${base}a:b`, 'c', 'd'],
        [`${base}a`, 'b:c', 'd'],
        [`${base}a`, 'b', 'c:d'],
        [`${base}a/b`, 'c', 'd'],
        [`${base}a`, 'b/c', 'd'],
        [`${base}a`, 'b', 'c/d'],
        [`${base}a`, 'b', 'c\u0000d'],
        [`${base}a\u0000b`, 'c', 'd'],
        [`${base}a{b}`, 'c', 'd'],
        [`${base}a`, '{b}c', 'd'],
        [`${base}a.b`, 'c', 'd'],
        [`${base}a`, 'b.c', 'd'],
        [`${base}a|b`, 'c', 'd'],
        [`${base}a`, 'b|c', 'd'],
      ];
      for (const [appName, userId, sessionId] of triples) {
        const tag = `${appName}|${userId}|${sessionId}`;
        await service.createSession({
          appName,
          userId,
          sessionId,
          state: { tag, 'user:tag': tag, 'app:tag': appName },
        });
      }
      // Several triples share an (app, user) pair: its bucket holds the tag written last.
      const lastUserTag = new Map<string, string>();
      for (const [appName, userId, sessionId] of triples) {
        lastUserTag.set(JSON.stringify([appName, userId]), `${appName}|${userId}|${sessionId}`);
      }
      for (const [appName, userId, sessionId] of triples) {
        const tag = `${appName}|${userId}|${sessionId}`;
        const loaded = await service.getSession({ appName, userId, sessionId });
        expect(loaded?.state.tag).toBe(tag);
        expect(loaded?.state['app:tag']).toBe(appName);
        const userTag = lastUserTag.get(JSON.stringify([appName, userId]));
        expect(loaded?.state['user:tag']).toBe(userTag);
        expect(await service.getUserState({ appName, userId })).toEqual({ tag: userTag });
      }
    });

    test('every hostile string works as an event id, and a 2,000-byte user id lists and reads back', async (kit) => {
      const { service, session, appName } = await kit.fresh({ userId: LONG_USER_ID, sessionId: 's' });
      for (const id of HOSTILE_IDS) await put(service, session, { last: id }, { id });
      const loaded = await kit.reload(session);
      expect(ids(loaded)).toEqual([...HOSTILE_IDS]);
      expect(loaded.userId).toBe(LONG_USER_ID);
      expect(ids(await kit.reload(session, { numRecentEvents: 3 }))).toEqual(HOSTILE_IDS.slice(-3));
      // Appending an already stored id again replaces that event in place.
      const again = HOSTILE_IDS[HOSTILE_IDS.length - 8] as string;
      await put(service, session, { last: 'again' }, { id: again });
      expect(ids(await kit.reload(session))).toEqual([...HOSTILE_IDS]);
      for (const listed of [
        await service.listSessions({ appName, userId: LONG_USER_ID }),
        await service.listSessions({ appName }),
      ]) {
        expect(listed.sessions.map((s) => [s.userId, s.id])).toEqual([[LONG_USER_ID, 's']]);
        expect(listed.sessions[0]?.state.last).toBe('again');
      }
      expect(await service.getUserState({ appName, userId: LONG_USER_ID })).toEqual({});
      await service.deleteSession({ appName, userId: LONG_USER_ID, sessionId: 's' });
      expect((await service.listSessions({ appName })).totalItems).toBe(0);
    });

    test('sessions updated at one instant list in UTF-16 id order across small pages, in both orders', async (kit) => {
      const instant = 1_750_000_000_000;
      const service = await kit.service({ now: () => instant });
      const appName = kit.app();
      const users = ['u1', '\ud800', LONG_USER_ID];
      for (const [index, sessionId] of HOSTILE_IDS.entries()) {
        await service.createSession({ appName, userId: users[index % users.length] as string, sessionId });
      }
      for (const order of ['asc', 'desc'] as const) {
        const expected = HOSTILE_IDS.map((id) => ({ id, lastUpdateTime: instant }))
          .sort(compareSessions(order))
          .map((s) => s.id);
        const seen: string[] = [];
        for (let page = 1; page <= Math.ceil(HOSTILE_IDS.length / 4); page++) {
          const listed = await service.listSessions({ appName, order, limit: 4, page });
          expect(listed.totalItems).toBe(HOSTILE_IDS.length);
          seen.push(...listed.sessions.map((s) => s.id));
        }
        expect(seen, order).toEqual(expected);
        for (const [index, userId] of users.entries()) {
          const mine = HOSTILE_IDS.filter((_, i) => i % users.length === index);
          const listed = await service.listSessions({ appName, userId, order, limit: 3, offset: 1 });
          const want = expected.filter((id) => mine.includes(id));
          expect(
            listed.sessions.map((s) => s.id),
            `${order} ${index}`,
          ).toEqual(want.slice(1, 4));
          expect(listed.totalItems).toBe(mine.length);
        }
      }
    });

    test('ids are exact: no trimming, no case folding, no normalisation', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const variants = ['id', ' id', 'id ', 'ID', 'Id', 'é', 'e\u0301'];
      for (const sessionId of variants)
        await service.createSession({ appName, userId: 'u', sessionId, state: { v: sessionId } });
      for (const sessionId of variants) {
        expect((await service.getSession({ appName, userId: 'u', sessionId }))?.state.v).toBe(sessionId);
      }
      expect(await service.getSession({ appName, userId: 'u', sessionId: 'iD' })).toBeUndefined();
      expect(await service.getSession({ appName: `${appName} `, userId: 'u', sessionId: 'id' })).toBeUndefined();
    });

    test('hostile state keys round-trip exactly in every scope', async (kit) => {
      const keys = [
        'a.b',
        '$set',
        'a.$b',
        '`tick`',
        '~',
        '*',
        'a/b',
        '__proto__',
        '__name__',
        'x'.repeat(1024),
        '🔑',
        'a:b',
        '\ud800',
        '\udc00',
        'a\udfffb',
        '\ufffd',
      ];
      const state: Record<string, unknown> = {};
      for (const key of keys) {
        Object.defineProperty(state, key, { value: key, enumerable: true, configurable: true, writable: true });
        state[`user:${key}`] = `u-${key}`;
        state[`app:${key}`] = `a-${key}`;
      }
      const { service, session: created, appName } = await kit.fresh({ state: {} });
      await put(service, created, state);
      const loaded = await kit.reload(created);
      expect(Object.keys(loaded.state).sort()).toEqual(Object.keys(state).sort());
      for (const key of Object.keys(state)) {
        expect(Object.getOwnPropertyDescriptor(loaded.state, key)?.value).toBe(
          Object.getOwnPropertyDescriptor(state, key)?.value,
        );
      }
      const user = await service.getUserState({ appName, userId: 'u1' });
      expect(Object.getOwnPropertyDescriptor(user, '__proto__')?.value).toBe('u-__proto__');
      expect(user['a.b']).toBe('u-a.b');
      expect(Object.getPrototypeOf(loaded.state)).toBe(Object.prototype);
    });

    test('an app or user named exactly __proto__, and __proto__ keys holding objects, reach no prototype', async (kit) => {
      const service = await kit.service();
      const fresh = () => ({}) as Record<string, unknown>;
      // The app name is exactly __proto__ (shared by every run), so the session id is this test's own.
      const sessionId = uniqueName('s');
      await service.createSession({ appName: '__proto__', userId: 'polluted', sessionId, state: { polluted: true } });
      expect(fresh().polluted).toBeUndefined();
      expect((await service.getSession({ appName: '__proto__', userId: 'polluted', sessionId }))?.id).toBe(sessionId);
      expect((await service.listSessions({ appName: uniqueName('polluted'), userId: 'polluted' })).sessions).toEqual(
        [],
      );
      const listed = await service.listSessions({ appName: '__proto__', userId: 'polluted' });
      expect(listed.sessions.map((each) => each.id)).toContain(sessionId);
      // The app state of the app named __proto__, under one fixed key whatever the run (app state cannot be
      // removed through ADK: a key per run would grow it on a backend that keeps its data), holding this run's value.
      // Another run of the suite on the same backend may write that key between this run's write and its read:
      // the write and the read are tried again then, and one of the tries must read this run's own value.
      const appKey = 'pwned';
      const written = { isAdmin: true, run: uniqueName('run') };
      let seen: unknown;
      for (let attempt = 0; attempt < 5 && !isDeepStrictEqual(seen, written); attempt++) {
        const inProto = await service.getSession({ appName: '__proto__', userId: 'polluted', sessionId });
        if (!inProto) throw new Error('the session is stored');
        await put(service, inProto, { [`app:${appKey}`]: written });
        expect(fresh()[appKey]).toBeUndefined();
        expect(fresh().isAdmin).toBeUndefined();
        const sameApp = await service.createSession({ appName: '__proto__', userId: uniqueName('other') });
        seen = sameApp.state[`app:${appKey}`];
        await service.deleteSession({ appName: '__proto__', userId: sameApp.userId, sessionId: sameApp.id });
        expect(seen).toMatchObject({ isAdmin: true, run: expect.any(String) });
      }
      expect(seen).toEqual(written);
      // Nothing of the run's own is left in the shared app but its one app key.
      await service.deleteSession({ appName: '__proto__', userId: 'polluted', sessionId });
      expect(await service.getSession({ appName: '__proto__', userId: 'polluted', sessionId })).toBeUndefined();

      const appName = kit.app();
      const victim = await service.createSession({ appName, userId: '__proto__' });
      const evil = { baseUrl: 'https://evil.test' };
      await put(service, victim, { 'user:httpOptions': evil, 'user:__proto__': evil });
      expect(fresh().httpOptions).toBeUndefined();
      expect(fresh().baseUrl).toBeUndefined();
      const sibling = await service.createSession({ appName, userId: '__proto__' });
      expect(sibling.state['user:__proto__']).toEqual(evil);
      expect(sibling.state['user:httpOptions']).toEqual(evil);

      // JSON.parse makes __proto__ an own key: it is a state key like any other, in the state and in a delta.
      const made = await service.createSession({
        appName,
        userId: 'u1',
        state: JSON.parse('{"__proto__":{"isAdmin":true}}'),
      });
      const check = (state: Record<string, unknown>) => {
        expect(Object.getOwnPropertyDescriptor(state, '__proto__')?.value).toEqual({ isAdmin: true });
        expect(Object.getPrototypeOf(state)).toBe(Object.prototype);
        expect(state.isAdmin).toBeUndefined();
        expect(new State(state).get('isAdmin')).toBeUndefined();
      };
      check(made.state);
      check((await kit.reload(made)).state);
      const other = await service.createSession({ appName, userId: 'u1' });
      await put(service, other, JSON.parse('{"__proto__":{"isAdmin":true}}'));
      check(other.state);
      check((await kit.reload(other)).state);
      expect(fresh().isAdmin).toBeUndefined();
    });
  },
};
