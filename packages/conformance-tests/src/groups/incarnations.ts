/**
 * One session id, many lives: an id deleted and created again (through
 * another instance, or while writers are busy) is a new session, and nothing
 * of the old one (its events, its session keys, what an instance remembers
 * of it) leaks into the new one or stops it from being read and written. The
 * `user:` and `app:` writes of every life stay, each applied exactly once.
 */
import { expect } from 'vitest';
import { allAwaited, expectCode, type Group, ids, plain, put, whileWriting } from '../kit.js';

export const incarnations: Group = {
  title: 'an id deleted and created again is a new session, and every instance sees it so',
  define({ test }) {
    test(
      'an id deleted and created again through a second instance: the first reads and writes only the new one; user: and app: writes of both stay',
      async (kit) => {
        const first = await kit.service();
        const second = await kit.service();
        const appName = kit.app();
        const key = { appName, userId: 'u1', sessionId: 's1' };
        const old = await first.createSession({ ...key, state: { x: 1 } });
        await put(first, old, { n: 1, 'app:a': 1, 'user:u': 1 });
        expect(plain((await kit.reload(old, { service: first })).state)).toEqual({
          x: 1,
          n: 1,
          'app:a': 1,
          'user:u': 1,
        });

        await second.deleteSession(key);
        const reborn = await second.createSession({ ...key, state: { y: 2 } });
        const bornEvent = await put(second, reborn, { n: 10, 'app:b': 2 });

        const seen = await kit.reload(old, { service: first });
        expect(ids(seen)).toEqual([bornEvent.id]);
        expect(plain(seen.state)).toEqual({ y: 2, n: 10, 'app:a': 1, 'app:b': 2, 'user:u': 1 });
        // The first instance's object of the old life is behind the new one.
        await expectCode(put(first, old, { n: 2, 'app:a': 99 }), 'STALE_SESSION');
        expect(await first.getAppState({ appName })).toEqual({ a: 1, b: 2 });

        // Loaded again, it writes to the new life, and the second instance sees that.
        const appended = await put(first, seen, { n: 11, 'app:a': 3 });
        const back = await kit.reload(old, { service: second });
        expect(ids(back)).toEqual([bornEvent.id, appended.id]);
        expect(plain(back.state)).toEqual({ y: 2, n: 11, 'app:a': 3, 'app:b': 2, 'user:u': 1 });
        expect(await second.getAppState({ appName })).toEqual({ a: 3, b: 2 });
      },
      { requires: 'sharedBackend' },
    );

    test(
      'ids deleted and created again over and over by one instance while another appends to other sessions: every read succeeds, and each app: key holds its last acknowledged write',
      async (kit) => {
        const writer = await kit.service();
        const churner = await kit.service();
        const reader = await kit.service();
        const appName = kit.app();
        const WRITERS = 4;
        const ROUNDS = 12;
        const sessions = await allAwaited(
          Array.from({ length: WRITERS }, (_, index) =>
            writer.createSession({ appName, userId: `w${index}`, sessionId: 'steady' }),
          ),
        );
        const lastAcked = new Array<number>(WRITERS).fill(0);
        await whileWriting(
          async (stopped) => {
            await allAwaited(
              sessions.map(async (session, index) => {
                for (let n = 1; n <= ROUNDS && !stopped(); n++) {
                  await put(writer, session, { n, [`app:w${index}`]: n, 'user:n': n });
                  lastAcked[index] = n;
                }
              }),
            );
          },
          async () => {
            for (let round = 1; round <= ROUNDS; round++) {
              for (let index = 0; index < WRITERS; index++) {
                const key = { appName, userId: `w${index}`, sessionId: 'churned' };
                await churner.deleteSession(key);
                const session = await churner.createSession({ ...key, state: { round } });
                await put(churner, session, { round, [`app:c${index}`]: round });
                // Another instance reads it at once: the new life, whole.
                const read = await reader.getSession(key);
                expect(read?.events).toHaveLength(1);
                expect(plain(read?.state)).toMatchObject({ round, [`app:c${index}`]: round });
              }
            }
          },
        );

        const app = await reader.getAppState({ appName });
        for (let index = 0; index < WRITERS; index++) {
          expect(app[`w${index}`], `app:w${index}`).toBe(lastAcked[index]);
          expect(app[`c${index}`], `app:c${index}`).toBe(ROUNDS);
          const steady = await kit.reload(sessions[index] as (typeof sessions)[number], { service: reader });
          expect(steady.events).toHaveLength(ROUNDS);
          expect(steady.state.n).toBe(ROUNDS);
          expect(await reader.getUserState({ appName, userId: `w${index}` })).toEqual({ n: ROUNDS });
        }
        const listed = await reader.listSessions({ appName });
        expect(listed.sessions).toHaveLength(2 * WRITERS);
      },
      { requires: 'sharedBackend' },
    );

    test(
      'a session that expired is gone for every instance, and its id created again is a new session; user: and app: state stay',
      async (kit) => {
        const first = await kit.service({ expireAfterCreateSeconds: 1 });
        const second = await kit.service({ expireAfterCreateSeconds: 1 });
        const appName = kit.app();
        const key = { appName, userId: 'u1', sessionId: 's1' };
        const old = await first.createSession({ ...key, state: { life: 1 } });
        await put(first, old, { n: 1, 'app:a': 1, 'user:u': 1 });
        expect(plain((await kit.reload(old, { service: second })).state)).toEqual({
          life: 1,
          n: 1,
          'app:a': 1,
          'user:u': 1,
        });
        let gone = false;
        for (let attempt = 0; attempt < 300 && !gone; attempt++) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          gone = (await second.getSession(key)) === undefined;
        }
        expect(gone, 'the session expires within 15 s of a 1 s time to live').toBe(true);
        expect(await first.getSession(key)).toBeUndefined();
        expect((await first.listSessions({ appName })).sessions).toEqual([]);
        await expectCode(put(first, old, { n: 2 }), 'SESSION_NOT_FOUND');
        expect(await second.getUserState({ appName, userId: 'u1' })).toEqual({ u: 1 });
        expect(await second.getAppState({ appName })).toEqual({ a: 1 });

        const reborn = await second.createSession({ ...key, state: { life: 2 } });
        const bornEvent = await put(second, reborn, { n: 10, 'app:b': 2 });
        const seen = await kit.reload(old, { service: first });
        expect(ids(seen)).toEqual([bornEvent.id]);
        expect(plain(seen.state)).toEqual({ life: 2, n: 10, 'app:a': 1, 'app:b': 2, 'user:u': 1 });
        await put(first, seen, { n: 11, 'app:a': 3 });
        expect(await second.getAppState({ appName })).toEqual({ a: 3, b: 2 });
      },
      { requires: ['sharedBackend', 'expiry'] },
    );
  },
};
