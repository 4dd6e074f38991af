/**
 * `SessionStore.listSessionKeys`, for stores that offer it: the key of every
 * session the store holds for an app, found without the listing's indexes,
 * so that a tool that copies a whole store (`adk-state migrate`) copies a
 * session whose listing entries were changed outside adk-state too.
 */
import type { Session } from '@google/adk';
import { expect } from 'vitest';
import { type Group, handed, ids, plain, put } from '../kit.js';
import type { ConformanceService } from '../target.js';

interface SessionKey {
  userId: string;
  sessionId: string;
}

/** The service's `listSessionKeys`, as the session-keys capability promises it (its store offers it). */
export function keysOf(service: ConformanceService): (appName: string, userId?: string) => Promise<SessionKey[]> {
  const lister = service as { listSessionKeys?: (request: object) => Promise<SessionKey[] | undefined> };
  if (typeof lister.listSessionKeys !== 'function') {
    throw new Error("the target declares 'sessionKeys', but its service has no listSessionKeys method");
  }
  return async (appName, userId) => {
    const keys = await lister.listSessionKeys?.({ appName, ...(userId === undefined ? {} : { userId }) });
    if (keys === undefined) throw new Error("the target declares 'sessionKeys', but its store has no listSessionKeys");
    return keys;
  };
}

/** Users and ids that need escaping somewhere: separators, braces, dots, NUL, an emoji. */
const KEYS: readonly SessionKey[] = [
  { userId: 'ada', sessionId: 'one' },
  { userId: 'ada', sessionId: 'x}:s:y.z' },
  { userId: 'ada', sessionId: '$dollar' },
  { userId: 'b\u0000nul', sessionId: 'emoji 🙂' },
  { userId: 'with {braces} #1', sessionId: 'a.b' },
];

const byUserThenId = (a: SessionKey, b: SessionKey) =>
  a.userId === b.userId ? (a.sessionId < b.sessionId ? -1 : 1) : a.userId < b.userId ? -1 : 1;

export const sessionKeys: Group = {
  title: 'listSessionKeys names every stored session of an app, listed or not',
  define({ test }) {
    test(
      'every session of the app, by user then id; of one user only theirs; never a deleted one or another app’s',
      async (kit) => {
        const service = await kit.service();
        const appName = kit.app();
        for (const key of KEYS) await service.createSession({ appName, ...key, state: { 'user:seen': true } });
        await service.createSession({ appName, userId: 'ada', sessionId: 'gone' });
        await service.deleteSession({ appName, userId: 'ada', sessionId: 'gone' });
        for (const other of [`${appName}2`, `${appName}#1`, `${appName}.x`]) {
          await service.createSession({ appName: other, userId: 'ada', sessionId: 'elsewhere' });
        }
        const list = keysOf(service);
        const every = [...KEYS].sort(byUserThenId);
        expect(await list(appName)).toEqual(every);
        expect(await list(appName, 'ada')).toEqual(every.filter((key) => key.userId === 'ada'));
        expect(await list(appName, 'nobody')).toEqual([]);
        expect(await list(kit.app('empty'))).toEqual([]);
        // The same sessions the listing shows, when nothing was changed outside adk-state.
        const listed = await service.listSessions({ appName });
        expect(
          listed.sessions.map((session) => ({ userId: session.userId, sessionId: session.id })).sort(byUserThenId),
        ).toEqual(every);
      },
      { requires: 'sessionKeys' },
    );

    test(
      'a session taken out of what the listing reads is still named, of its app and of its user; it reads whole or fails as unreadable data; put back, it lists and reads as before',
      async (kit) => {
        const control = handed(kit.damage, 'damage');
        if (!control.listingEntry) {
          throw new Error("a target that declares both 'damage' and 'sessionKeys' must give damage.listingEntry");
        }
        const { service, session, appName, userId } = await kit.fresh({ sessionId: 'hidden', state: { n: 0 } });
        const key = { appName, userId, sessionId: 'hidden' };
        await put(service, session, { n: 1, 'user:u': 1 });
        const other = await service.createSession({ appName, userId, sessionId: 'other' });
        await put(service, other, { m: 1 });
        const before = (await service.getSession(key)) as Session;
        const fresh = await kit.service();
        const list = keysOf(fresh);
        const restore = await control.listingEntry(key);
        try {
          for (const owner of [undefined, userId]) {
            expect(await list(appName, owner), `keys ${owner ?? 'of every user'}`).toEqual([
              { userId, sessionId: 'hidden' },
              { userId, sessionId: 'other' },
            ]);
            // The listing fails for none of it, and still shows the other session.
            const listed = await fresh.listSessions({ appName, ...(owner === undefined ? {} : { userId: owner }) });
            expect(listed.sessions.map((each) => each.id)).toContain('other');
          }
          const read = await fresh.getSession(key).then(
            (session) => ({ session }),
            (error: { code?: unknown; kind?: unknown }) => ({ error }),
          );
          if ('error' in read) {
            const { code, kind } = read.error;
            expect([code, kind], 'a read of it that fails').toEqual(['BACKEND_ERROR', 'unreadable-data']);
          } else {
            expect(ids(read.session)).toEqual(ids(before));
            expect(plain(read.session?.state)).toEqual(plain(before.state));
          }
        } finally {
          await restore();
        }
        const listed = await fresh.listSessions({ appName, userId });
        expect(listed.sessions.map((each) => each.id).sort()).toEqual(['hidden', 'other']);
        const after = (await fresh.getSession(key)) as Session;
        expect(ids(after)).toEqual(ids(before));
        expect(plain(after.state)).toEqual(plain(before.state));
      },
      { requires: ['damage', 'sessionKeys'] },
    );
  },
};
