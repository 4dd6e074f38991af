/**
 * Records changed or damaged outside adk-state (straight in the backend):
 * reads of the damaged session fail with a BackendError of kind
 * 'unreadable-data' that says nothing was written, on every read path;
 * the other sessions of the app read and list as before; an append through
 * a session object read before the damage is never acknowledged without
 * being stored, and says honestly whether it wrote; once the record is put
 * back, the session reads exactly as it was.
 */
import type { Session } from '@google/adk';
import { expect } from 'vitest';
import { type Group, handed, ids, makeEvent, plain, put } from '../kit.js';
import type { ConformanceService, DamageControl, DamagedKey, Restore } from '../target.js';

interface Failure {
  code?: unknown;
  name?: unknown;
  kind?: unknown;
  mayHaveApplied?: unknown;
}

/** What a call settled as. */
async function settle(promise: Promise<unknown>): Promise<{ ok: true } | { ok: false; error: Failure }> {
  try {
    await promise;
    return { ok: true };
  } catch (error) {
    return { ok: false, error: error as Failure };
  }
}

async function expectUnreadable(promise: Promise<unknown>, label: string): Promise<void> {
  const outcome = await settle(promise);
  expect(outcome.ok, `${label} must fail`).toBe(false);
  if (outcome.ok) return;
  const { error } = outcome;
  expect([error.code, error.kind, error.mayHaveApplied], label).toEqual(['BACKEND_ERROR', 'unreadable-data', false]);
}

type Damage = (control: DamageControl, key: DamagedKey, eventId: string) => Promise<Restore>;

const DAMAGES: ReadonlyArray<[string, Damage]> = [
  ['a revision that is not a whole number', (control, key) => control.revision(key)],
  ['a lastUpdateTime that is not a number', (control, key) => control.lastUpdateTime(key)],
  ['a state value that is not JSON text', (control, key) => control.stateValue(key, 'n')],
  ['an event that is not an event', (control, key, eventId) => control.event(key, eventId)],
];

/** The reads a caller can make of one session: with and without the log cache, filtered or not. */
function reads(services: ConformanceService[], key: DamagedKey): Array<[string, () => Promise<unknown>]> {
  const out: Array<[string, () => Promise<unknown>]> = [];
  for (const [index, service] of services.entries()) {
    out.push([`getSession (service ${index})`, () => service.getSession(key)]);
    out.push([
      `getSession, the last event (service ${index})`,
      () => service.getSession({ ...key, config: { numRecentEvents: 1 } }),
    ]);
  }
  return out;
}

export const damage: Group = {
  title: 'records damaged outside adk-state fail their own reads typed, hide nothing else, and never take an append',
  define({ test }) {
    for (const [label, damageOf] of DAMAGES) {
      test(
        `${label}: reads of that session fail as unreadable data; the others read and list; an append through it writes whole or says it did not; put back, it reads as before`,
        async (kit) => {
          const control = handed(kit.damage, 'damage');
          const { service, session, appName, userId } = await kit.fresh({ sessionId: 'hurt', state: { n: 0 } });
          const key = { appName, userId, sessionId: 'hurt' };
          const event = await put(service, session, { n: 1, 'user:u': 1, 'app:a': 1 });
          const other = await service.createSession({ appName, userId, sessionId: 'other', state: { m: 1 } });
          await put(service, other, { m: 2 });
          // Read before the damage: this object, and the service's log cache, hold the good record.
          const held = (await service.getSession(key)) as Session;
          const before = { state: plain(held.state), ids: ids(held) };
          const uncached = await kit.service({ logCacheBytes: 0 });
          const fresh = await kit.service();

          const restore = await damageOf(control, key, event.id);
          let appended: Awaited<ReturnType<typeof settle>> | undefined;
          const late = makeEvent({ late: true });
          try {
            // A service that read the log before may go on showing the events it holds: the damage came
            // behind the revision's back. Every other reader meets it.
            const readers = label.startsWith('an event') ? [uncached, fresh] : [service, uncached, fresh];
            for (const [name, read] of reads(readers, key)) await expectUnreadable(read(), name);
            // The other session of the same user and app, and the buckets, read as before.
            expect(plain((await fresh.getSession({ ...key, sessionId: 'other' }))?.state)).toEqual({
              m: 2,
              'user:u': 1,
              'app:a': 1,
            });
            expect(await fresh.getUserState({ appName, userId })).toEqual({ u: 1 });
            expect(await fresh.getAppState({ appName })).toEqual({ a: 1 });
            // A listing fails for none of it: it shows the others, and the damaged session too (with what can
            // be read of it), so that a copy or an export of the app meets it rather than skipping it unseen.
            for (const userId of [undefined, key.userId]) {
              const listed = await fresh.listSessions({ appName, ...(userId === undefined ? {} : { userId }) });
              expect(listed.sessions.map((each) => each.id).sort(), `listed ${userId ?? 'for every user'}`).toEqual([
                'hurt',
                'other',
              ]);
              expect(listed.totalItems).toBe(2);
            }
            // An append through the object read before: stored whole, or refused with nothing written.
            appended = await settle(service.appendEvent({ session: held, event: late }));
            if (!appended.ok) {
              expect(appended.error.code === 'BACKEND_ERROR' || appended.error.code === 'STALE_SESSION').toBe(true);
            }
          } finally {
            await restore();
          }
          const after = (await fresh.getSession(key)) as Session;
          const wrote = appended?.ok === true || (appended?.ok === false && appended.error.mayHaveApplied === true);
          const landed = ids(after).includes(late.id);
          if (appended?.ok === true) expect(landed, 'an acknowledged append is stored').toBe(true);
          if (appended?.ok === false && appended.error.mayHaveApplied === false) {
            expect(landed, 'an append that says it wrote nothing wrote nothing').toBe(false);
          }
          const expected = landed ? [...before.ids, late.id] : before.ids;
          expect(ids(after)).toEqual(expected);
          expect(plain(after.state)).toEqual(landed ? { ...before.state, late: true } : before.state);
          if (!wrote) expect(landed).toBe(false);
          // Put back, every reader reads it again, the log cache's holder included.
          for (const reader of [service, uncached])
            expect(ids((await reader.getSession(key)) as Session)).toEqual(expected);
        },
        { requires: 'damage' },
      );
    }
  },
};
