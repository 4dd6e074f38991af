/**
 * Outages: with the backend gone, every call fails with a typed error within
 * the service's deadline (none stays pending, none crashes the process), the
 * error says honestly whether a write may have been applied, and once the
 * backend is back the same service works again with nothing half-applied.
 */
import type { Session } from '@google/adk';
import { expect } from 'vitest';
import { allAwaited, type Group, handed, put } from '../kit.js';
import type { OutageControl } from '../target.js';
import { keysOf } from './session-keys.js';

/** The deadline the outage tests give the service. */
const TIMEOUT_MS = 2_000;
/** How much later than the deadline a call may settle (timers, a loaded machine). */
const MARGIN_MS = 3_000;
/** How long the backend may take to be usable again after it is back. */
const RECOVERY_MS = 60_000;

type Outcome =
  | { settled: 'resolved'; ms: number }
  | { settled: 'rejected'; ms: number; error: unknown }
  | { settled: 'pending' };

/** Waits for `promise`, but never longer than `limitMs`. */
async function outcomeOf(promise: Promise<unknown>, limitMs: number): Promise<Outcome> {
  const started = Date.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const pending = new Promise<Outcome>((resolve) => {
    timer = setTimeout(() => resolve({ settled: 'pending' }), limitMs);
  });
  const settled = promise.then(
    (): Outcome => ({ settled: 'resolved', ms: Date.now() - started }),
    (error: unknown): Outcome => ({ settled: 'rejected', ms: Date.now() - started, error }),
  );
  try {
    return await Promise.race([settled, pending]);
  } finally {
    clearTimeout(timer);
  }
}

/** Retries `attempt` until it succeeds or `RECOVERY_MS` has passed. */
async function eventually<T>(attempt: () => Promise<T>): Promise<T> {
  const until = Date.now() + RECOVERY_MS;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

interface BackendFailure {
  code: string;
  name: string;
  mayHaveApplied: unknown;
}

/**
 * Runs every call at once while the backend is gone (it is brought back
 * whatever happens), and checks that each rejects within the deadline with
 * a `BackendError` that says, as a boolean, whether it may have applied.
 * Returns those errors by call name.
 */
async function failuresWhileGone(
  control: OutageControl,
  calls: Record<string, () => Promise<unknown>>,
): Promise<Map<string, BackendFailure>> {
  let outcomes: Array<[string, Outcome]>;
  await control.stop();
  try {
    outcomes = await allAwaited(
      Object.entries(calls).map(
        async ([name, call]): Promise<[string, Outcome]> => [name, await outcomeOf(call(), TIMEOUT_MS + MARGIN_MS)],
      ),
    );
  } finally {
    await control.start();
  }
  const failures = new Map<string, BackendFailure>();
  for (const [name, outcome] of outcomes) {
    expect(outcome.settled, `${name} must reject within ${TIMEOUT_MS + MARGIN_MS} ms`).toBe('rejected');
    if (outcome.settled !== 'rejected') continue;
    const error = outcome.error as BackendFailure;
    expect([error.code, error.name], name).toEqual(['BACKEND_ERROR', 'BackendError']);
    expect(typeof error.mayHaveApplied, `${name}: mayHaveApplied`).toBe('boolean');
    failures.set(name, error);
  }
  return failures;
}

export const outage: Group = {
  title: 'a backend outage gives typed errors in bounded time, and the service recovers',
  define({ test }) {
    test(
      'with the backend gone every method rejects with a BackendError within timeoutMs; afterwards the same service works and nothing is half-applied',
      async (kit) => {
        const control = handed(kit.outage, 'outage');
        const { service, session, appName } = await kit.fresh({
          sessionId: 's1',
          state: { n: 0 },
          serviceOptions: { timeoutMs: TIMEOUT_MS },
        });
        const key = { appName, userId: 'u1', sessionId: 's1' };
        await put(service, session, { n: 1 });
        await service.createSession({ ...key, sessionId: 'doomed' });

        const calls: Record<string, () => Promise<unknown>> = {
          createSession: () => service.createSession({ ...key, sessionId: 'born', state: { b: 1 } }),
          appendEvent: () => put(service, session, { n: 2, 'user:n': 2, 'app:n': 2 }),
          deleteSession: () => service.deleteSession({ ...key, sessionId: 'doomed' }),
          getSession: () => service.getSession(key),
          listSessions: () => service.listSessions({ appName }),
          getUserState: () => service.getUserState(key),
          getAppState: () => service.getAppState({ appName }),
        };
        const writes = new Set(['createSession', 'appendEvent', 'deleteSession']);
        const failures = await failuresWhileGone(control, calls);
        for (const [name, error] of failures) {
          if (!writes.has(name)) expect(error.mayHaveApplied, `${name} is a read`).toBe(false);
        }

        // The same service, once the backend is back: every write applied whole or not at all.
        const stored = (await eventually(() => service.getSession(key))) as Session;
        const appended = stored.events.length === 2;
        expect(stored.events.length === 1 || appended, 'one or two events').toBe(true);
        const expectState = appended ? { n: 2, 'user:n': 2, 'app:n': 2 } : { n: 1 };
        expect(JSON.parse(JSON.stringify(stored.state))).toEqual(expectState);
        expect(await service.getUserState(key)).toEqual(appended ? { n: 2 } : {});
        expect(await service.getAppState({ appName })).toEqual(appended ? { n: 2 } : {});
        if (failures.get('appendEvent')?.mayHaveApplied === false) expect(appended).toBe(false);

        const born = await service.getSession({ ...key, sessionId: 'born' });
        // The same user and app as the append: its user: and app: keys show in this session too.
        const bornState = appended ? { b: 1, 'user:n': 2, 'app:n': 2 } : { b: 1 };
        if (born) expect(JSON.parse(JSON.stringify(born.state))).toEqual(bornState);
        if (failures.get('createSession')?.mayHaveApplied === false) expect(born).toBeUndefined();
        const doomed = await service.getSession({ ...key, sessionId: 'doomed' });
        if (failures.get('deleteSession')?.mayHaveApplied === false) expect(doomed).toBeDefined();

        await put(service, stored, { n: 3 });
        expect((await kit.reload(session)).state.n).toBe(3);
        expect((await service.listSessions({ appName })).totalItems).toBe(1 + (born ? 1 : 0) + (doomed ? 1 : 0));
      },
      { requires: 'outage' },
    );

    test(
      'with the backend gone listSessionKeys and listAppNames reject with a BackendError within timeoutMs that says nothing was written; afterwards they answer',
      async (kit) => {
        const control = handed(kit.outage, 'outage');
        const { service, appName, userId } = await kit.fresh({
          sessionId: 's1',
          serviceOptions: { timeoutMs: TIMEOUT_MS },
        });
        const keys = keysOf(service);
        const calls: Record<string, () => Promise<unknown>> = { listSessionKeys: () => keys(appName) };
        const apps = (service as { listAppNames?: () => Promise<unknown> }).listAppNames;
        if (typeof apps === 'function') calls.listAppNames = () => apps.call(service);
        for (const [name, error] of await failuresWhileGone(control, calls)) {
          expect(error.mayHaveApplied, `${name} writes nothing`).toBe(false);
        }
        expect(await eventually(() => keys(appName))).toEqual([{ userId, sessionId: 's1' }]);
      },
      { requires: ['outage', 'sessionKeys'] },
    );
  },
};
