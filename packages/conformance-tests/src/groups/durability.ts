/** Durability: what one service instance stored, another instance on the same backend reads. */
import { expect } from 'vitest';
import { allAwaited, type Group, ids, plain, put, whileWriting } from '../kit.js';

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
      'reads through another instance never show part of an append while appends run',
      async (kit) => {
        const { service: writer, session, appName } = await kit.fresh({ sessionId: 's1', state: { n: 0 } });
        const reader = await kit.service();
        const key = { appName, userId: 'u1', sessionId: 's1' };
        await whileWriting(
          async (stopped) => {
            for (let n = 1; n <= 50 && !stopped(); n++) await put(writer, session, { n, 'user:n': n, 'app:n': n });
          },
          async (writing) => {
            for (let rounds = 0; writing() || rounds === 0; rounds++) {
              // Several reads at once, so that appends land in the middle of some of them.
              const [all, tail, after, listed] = await allAwaited([
                reader.getSession(key),
                reader.getSession({ ...key, config: { numRecentEvents: 1 } }),
                reader.getSession({ ...key, config: { afterTimestamp: 0 } }),
                reader.listSessions({ appName, userId: 'u1' }),
              ]);
              for (const [name, read] of Object.entries({ all, tail, after })) {
                const last = read?.events.at(-1);
                const n = (last?.actions.stateDelta.n as number | undefined) ?? 0;
                expect(read?.state.n, `${name}: the state against the last event`).toBe(n);
                expect(read?.state['user:n'] ?? 0, `${name}: user: state against the last event`).toBe(n);
                expect(read?.state['app:n'] ?? 0, `${name}: app: state against the last event`).toBe(n);
              }
              expect(all?.events, 'all: the events against the state').toHaveLength(all?.state.n as number);
              expect(after?.events, 'after: the events against the state').toHaveLength(after?.state.n as number);
              // A listing may show app: keys late (a store may apply them in a second step), never user: keys.
              const [summary] = listed.sessions;
              expect(summary?.state['user:n'] ?? 0, 'listed: user: state against the session state').toBe(
                summary?.state.n,
              );
            }
          },
        );
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
