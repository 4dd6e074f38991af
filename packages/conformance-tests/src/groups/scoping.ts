/** Scoping: a key's prefix decides who sees it, from create-state and from deltas alike. */
import { type Session, State } from '@google/adk';
import { expect } from 'vitest';
import { expectCode, type Group, makeEvent, plain, put } from '../kit.js';

/**
 * The deltas of two branches of one invocation that each wrote `x`, `user:x`
 * and `app:x` through ADK's State (context.state), the older write first.
 */
function branchWrites(
  session: Session,
  older: string,
  newer: string,
): [Record<string, unknown>, Record<string, unknown>] {
  const deltas: [Record<string, unknown>, Record<string, unknown>] = [{}, {}];
  for (const [at, value] of [older, newer].entries()) {
    const state = new State(session.state, deltas[at]);
    for (const key of ['x', 'user:x', 'app:x']) state.set(key, value);
  }
  return deltas;
}

export const scoping: Group = {
  title: 'scoping by key prefix',
  define({ test }) {
    test('create-state is split: app: and user: go to their buckets, the rest to the session', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const created = await service.createSession({
        appName,
        userId: 'u1',
        sessionId: 's1',
        state: { plain: 1, 'user:name': 'Ada', 'app:theme': 'dark' },
      });
      expect(plain(created.state)).toEqual({ plain: 1, 'user:name': 'Ada', 'app:theme': 'dark' });
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({ name: 'Ada' });
      expect(await service.getAppState({ appName })).toEqual({ theme: 'dark' });
      const sibling = await service.createSession({ appName, userId: 'u1', sessionId: 's2' });
      expect(plain(sibling.state)).toEqual({ 'user:name': 'Ada', 'app:theme': 'dark' });
      // Another user sees the app: part of that initial state, and a change of it is seen back.
      const other = await service.createSession({ appName, userId: 'u2', sessionId: 's3' });
      expect(plain(other.state)).toEqual({ 'app:theme': 'dark' });
      await put(service, other, { 'app:theme': 'light' });
      expect(plain((await kit.reload(created)).state)).toEqual({ plain: 1, 'user:name': 'Ada', 'app:theme': 'light' });
    });

    test('create-state merges into existing buckets instead of replacing them', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await service.createSession({ appName, userId: 'u1', state: { 'user:a': 1, 'app:x': 1 } });
      const second = await service.createSession({ appName, userId: 'u1', state: { 'user:b': 2, 'app:y': 2 } });
      expect(plain(second.state)).toEqual({ 'user:a': 1, 'user:b': 2, 'app:x': 1, 'app:y': 2 });
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({ a: 1, b: 2 });
      expect(await service.getAppState({ appName })).toEqual({ x: 1, y: 2 });
    });

    test('session state is seen by that session only', async (kit) => {
      const { service, session: a, appName } = await kit.fresh({ sessionId: 'a' });
      const b = await service.createSession({ appName, userId: 'u1', sessionId: 'b' });
      await put(service, a, { mine: 'a' });
      expect((await kit.reload(a)).state.mine).toBe('a');
      expect(plain((await kit.reload(b)).state)).toEqual({});
    });

    test("user state is shared by the user's sessions only", async (kit) => {
      const { service, session: a, appName } = await kit.fresh({ sessionId: 'a' });
      const b = await service.createSession({ appName, userId: 'u1', sessionId: 'b' });
      const c = await service.createSession({ appName, userId: 'u2', sessionId: 'c' });
      await put(service, a, { 'user:lang': 'fr' });
      expect(plain((await kit.reload(b)).state)).toEqual({ 'user:lang': 'fr' });
      expect(plain((await kit.reload(c)).state)).toEqual({});
      expect(await service.getUserState({ appName, userId: 'u2' })).toEqual({});
      expect(await service.getUserState({ appName: kit.app(), userId: 'u1' })).toEqual({});
    });

    test('a new session starts with the app state and its user state that earlier sessions wrote', async (kit) => {
      const { service, session, appName } = await kit.fresh();
      await put(service, session, { 'app:appKey': 'appValue', 'user:userKey': 'userValue', own: 1 });
      const second = await service.createSession({ appName, userId: 'u1' });
      expect(plain(second.state)).toEqual({ 'app:appKey': 'appValue', 'user:userKey': 'userValue' });
      const otherUser = await service.createSession({ appName, userId: 'u2' });
      expect(plain(otherUser.state)).toEqual({ 'app:appKey': 'appValue' });
    });

    test('app state is shared by every session of every user of the app, and by no other app', async (kit) => {
      const { service, session: a, appName } = await kit.fresh({ label: 'app' });
      const sibling = `${appName}2`;
      const b = await service.createSession({ appName, userId: 'u2' });
      const other = await service.createSession({ appName: sibling, userId: 'u1' });
      await put(service, a, { 'app:motd': 'hi' });
      expect((await kit.reload(b)).state['app:motd']).toBe('hi');
      expect(plain((await kit.reload(other)).state)).toEqual({});
      expect(await service.getAppState({ appName: sibling })).toEqual({});
      expect(await service.getAppState({ appName })).toEqual({ motd: 'hi' });
    });

    test('a later delta replaces a bucket entry while other entries stay', async (kit) => {
      const { service, session } = await kit.fresh({ state: { 'user:a': 1, 'user:b': 1 } });
      await put(service, session, { 'user:a': 2, s: 1 });
      await put(service, session, { s: 2, 'app:z': [1] });
      expect(plain(session.state)).toEqual({ 'user:a': 2, 'user:b': 1, s: 2, 'app:z': [1] });
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ 'user:a': 2, 'user:b': 1, s: 2, 'app:z': [1] });
    });

    test('prefixes are exact and case-sensitive', async (kit) => {
      const { service, session, appName } = await kit.fresh();
      await put(service, session, { 'User:a': 1, 'APP:b': 2, 'TEMP:c': 3, 'user-d': 4, app_e: 5, user: 6, 'usr:f': 7 });
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({
        'User:a': 1,
        'APP:b': 2,
        'TEMP:c': 3,
        'user-d': 4,
        app_e: 5,
        user: 6,
        'usr:f': 7,
      });
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({});
      expect(await service.getAppState({ appName })).toEqual({});
    });

    test('a key made only of a prefix lands in that bucket under the empty key', async (kit) => {
      const { service, session, appName } = await kit.fresh({ state: { 'user:': 'u', 'app:': 'a' } });
      await put(service, session, { '': 'empty' });
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({ '': 'u' });
      expect(await service.getAppState({ appName })).toEqual({ '': 'a' });
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ '': 'empty', 'user:': 'u', 'app:': 'a' });
    });

    test('user ids that extend one another never share a bucket (u vs u:x vs u2)', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      for (const userId of ['u', 'u:x', 'u2', 'user', 'user:u']) {
        const session = await service.createSession({ appName, userId });
        await put(service, session, { 'user:who': userId });
      }
      for (const userId of ['u', 'u:x', 'u2', 'user', 'user:u']) {
        expect(await service.getUserState({ appName, userId })).toEqual({ who: userId });
      }
    });

    // ADK marks each write made through its State (context.state) with its moment and keeps the caller's
    // state at the newest one; storage must not put an older write back where a reload would show it.
    test('an older context.state write appended after a newer one is stored as ADK leaves the session: the newer value stays', async (kit) => {
      const { service, session, appName } = await kit.fresh();
      const older = {};
      const newer = {};
      const write = (delta: Record<string, unknown>, value: string) => {
        const state = new State(session.state, delta);
        for (const key of ['x', 'user:x', 'app:x']) state.set(key, value);
      };
      write(older, 'first');
      write(newer, 'second');
      // Two branches of one invocation, say: the later write's event is appended first.
      await put(service, session, newer);
      await put(service, session, older);
      const expected = { x: 'second', 'user:x': 'second', 'app:x': 'second' };
      expect(plain(session.state)).toEqual(expected);
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual(expected);
      // Both events are stored whole, each with the delta it carried.
      expect(loaded.events.map((event) => event.actions.stateDelta.x)).toEqual(['second', 'first']);
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({ x: 'second' });
      expect(await service.getAppState({ appName })).toEqual({ x: 'second' });
      // A write that is newer than both is stored; a delta built by hand carries no mark and always applies.
      const third = {};
      write(third, 'third');
      await put(service, session, third);
      await put(service, session, { x: 'by hand' });
      expect(plain((await kit.reload(session)).state)).toEqual({ x: 'by hand', 'user:x': 'third', 'app:x': 'third' });
    });

    test('an append refused before it is stored keeps what earlier appends told about write order', async (kit) => {
      const { service, session, appName } = await kit.fresh();
      const [older, newer] = branchWrites(session, 'first', 'second');
      await put(service, session, newer);
      // An unrelated event JSON cannot carry, refused before anything is written.
      const unstorable = makeEvent({ y: 1 });
      (unstorable as unknown as Record<string, unknown>).customMetadata = { f: () => 1 };
      await expectCode(service.appendEvent({ session, event: unstorable }), 'INVALID_ARGUMENT');
      await put(service, session, older);
      const expected = { x: 'second', 'user:x': 'second', 'app:x': 'second' };
      expect(plain(session.state)).toEqual(expected);
      expect(plain((await kit.reload(session)).state)).toEqual(expected);
      expect(await service.getAppState({ appName })).toEqual({ x: 'second' });
    });

    test('an older context.state write appended first leaves the caller at the newer value, which its own event then stores', async (kit) => {
      const { service, session } = await kit.fresh();
      const [early, late] = branchWrites(session, 'early', 'late');
      const expected = { x: 'late', 'user:x': 'late', 'app:x': 'late' };
      // Sibling branches: the earlier write's event is appended first, as ADK's own test does it.
      await put(service, session, early);
      expect(plain(session.state)).toEqual(expected);
      await put(service, session, late);
      expect(plain(session.state)).toEqual(expected);
      expect(plain((await kit.reload(session)).state)).toEqual(expected);
    });
  },
};
