import { createEvent, type Session } from '@google/adk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackendError, StateSessionService } from '../src/index.js';
import type { SessionStore, StoreCall } from '../src/store-kit.js';

/** A store whose every method hands its call to `answer`, which decides how it ends. */
function storeAnswering(answer: (method: string, call: StoreCall | undefined) => Promise<unknown>): SessionStore {
  const method =
    (name: string) =>
    (...args: unknown[]) =>
      answer(name, args[args.length - 1] as StoreCall | undefined);
  return {
    createSession: method('createSession'),
    loadSession: method('loadSession'),
    appendEvent: method('appendEvent'),
    deleteSession: method('deleteSession'),
    listSessions: method('listSessions'),
    readUserState: method('readUserState'),
    readAppState: method('readAppState'),
    listAppNames: method('listAppNames'),
    listSessionKeys: method('listSessionKeys'),
  } as unknown as SessionStore;
}

const key = { appName: 'a', userId: 'u', sessionId: 's' };

function handOut(): Session {
  return { id: 's', appName: 'a', userId: 'u', state: {}, events: [], lastUpdateTime: 0 };
}

const calls: Record<string, (service: StateSessionService) => Promise<unknown>> = {
  createSession: (service) => service.createSession(key),
  getSession: (service) => service.getSession(key),
  listSessions: (service) => service.listSessions({ appName: 'a' }),
  deleteSession: (service) => service.deleteSession(key),
  appendEvent: (service) =>
    service.appendEvent({ session: handOut(), event: createEvent({ id: 'e', invocationId: 'i', timestamp: 1 }) }),
  getUserState: (service) => service.getUserState(key),
  getAppState: (service) => service.getAppState({ appName: 'a' }),
  listAppNames: (service) => service.listAppNames(),
  listSessionKeys: (service) => service.listSessionKeys({ appName: 'a', userId: 'u' }),
};
const writes = new Set(['createSession', 'deleteSession']);

describe('the deadline of every call', () => {
  const unhandled: unknown[] = [];
  const listener = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', listener);
  });
  afterEach(() => {
    process.off('unhandledRejection', listener);
  });

  for (const [name, call] of Object.entries(calls)) {
    it(`${name} rejects with a timed-out BackendError when the store never answers, and aborts the store's signal`, async () => {
      const signals: AbortSignal[] = [];
      const service = new StateSessionService(
        storeAnswering((_method, storeCall) => {
          if (storeCall) signals.push(storeCall.signal);
          return new Promise(() => {});
        }),
        { timeoutMs: 50 },
      );
      const error = await call(service).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(BackendError);
      const backend = error as BackendError;
      expect(backend.timedOut).toBe(true);
      expect(backend.operation).toBe(name);
      // appendEvent's first step here is the read of an unmarked session: nothing was written.
      expect(backend.mayHaveApplied).toBe(writes.has(name));
      expect(backend.message).toContain(backend.mayHaveApplied ? 'may have been applied' : 'Nothing was written');
      expect(signals.length).toBeGreaterThan(0);
      for (const signal of signals) expect(signal.aborted).toBe(true);
    });
  }

  it("a store's rejection after the deadline is never an unhandled rejection", async () => {
    let fail: (error: Error) => void = () => {};
    const service = new StateSessionService(
      storeAnswering(
        () =>
          new Promise((_resolve, reject) => {
            fail = reject;
          }),
      ),
      { timeoutMs: 20 },
    );
    await expect(service.getSession(key)).rejects.toBeInstanceOf(BackendError);
    fail(new Error('late failure'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(unhandled).toEqual([]);
  });

  it('one deadline bounds the whole append, however many store steps it takes', async () => {
    const started = Date.now();
    const service = new StateSessionService(
      storeAnswering(async (method) => {
        await new Promise((resolve) => setTimeout(resolve, 30));
        if (method === 'loadSession') {
          return {
            session: { ...key, id: 's', revision: 1, lastUpdateTime: 0, state: new Map() },
            userState: new Map(),
            appState: new Map(),
            events: [],
          };
        }
        return { status: 'stale', revision: 2 };
      }),
      { timeoutMs: 200, onStale: 'reload', maxReloads: 1_000 },
    );
    const error = (await calls.appendEvent?.(service).catch((caught: unknown) => caught)) as BackendError;
    expect(error).toBeInstanceOf(BackendError);
    expect(error.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('a failing write may have been applied unless the store says it was not; a failing read never', async () => {
    const refused = new BackendError('createSession', new Error('refused'), { mayHaveApplied: false });
    const cases: Array<[unknown, string, boolean]> = [
      [new Error('connection reset'), 'createSession', true],
      [refused, 'createSession', false],
      [new Error('connection reset'), 'getSession', false],
    ];
    for (const [thrown, name, mayHaveApplied] of cases) {
      const service = new StateSessionService(storeAnswering(() => Promise.reject(thrown)));
      const error = (await calls[name]?.(service).catch((caught: unknown) => caught)) as BackendError;
      expect(error).toBeInstanceOf(BackendError);
      expect([error.mayHaveApplied, error.timedOut]).toEqual([mayHaveApplied, false]);
      if (thrown instanceof BackendError) expect(error).toBe(thrown);
      else expect(error.cause).toBe(thrown);
    }
  });

  it('timeoutMs: Infinity sets no timer and passes a signal that never aborts', async () => {
    let seen: StoreCall | undefined;
    const service = new StateSessionService(
      storeAnswering(async (_method, call) => {
        seen = call;
        return new Map();
      }),
      { timeoutMs: Number.POSITIVE_INFINITY },
    );
    expect(await service.getAppState({ appName: 'a' })).toEqual({});
    expect(seen?.deadline).toBe(Number.POSITIVE_INFINITY);
    expect(seen?.signal.aborted).toBe(false);
  });

  it('a finite timeoutMs reaches the store as an absolute deadline', async () => {
    let seen: StoreCall | undefined;
    const service = new StateSessionService(
      storeAnswering(async (_method, call) => {
        seen = call;
        return new Map();
      }),
      { timeoutMs: 5_000 },
    );
    const before = Date.now();
    await service.getAppState({ appName: 'a' });
    expect(seen?.deadline).toBeGreaterThanOrEqual(before + 5_000);
    expect(seen?.deadline).toBeLessThanOrEqual(Date.now() + 5_000);
    expect(seen?.signal.aborted).toBe(false);
  });

  it('calls begun at different moments each end at their own deadline; a call that settled is never aborted later', async () => {
    const calls: StoreCall[] = [];
    const service = new StateSessionService(
      storeAnswering((method, call) => {
        if (call) calls.push(call);
        // App state answers at once; everything else never answers.
        return method === 'readAppState' ? Promise.resolve(new Map()) : new Promise(() => {});
      }),
      { timeoutMs: 60 },
    );
    const started = Date.now();
    type Outcome = { error: BackendError; at: number };
    const settle = (error: unknown): Outcome => ({ error: error as BackendError, at: Date.now() - started });
    const first = service.getUserState(key).then(() => undefined, settle);
    await service.getAppState({ appName: 'a' });
    await new Promise((resolve) => setTimeout(resolve, 30));
    const secondStart = Date.now() - started;
    const second = service.getUserState(key).then(() => undefined, settle);
    const [early, late] = await Promise.all([first, second]);
    expect(early?.error.timedOut).toBe(true);
    expect(late?.error.timedOut).toBe(true);
    // Neither ends before its own deadline (a timer may round down by a millisecond); a loaded machine may end both later.
    expect(early?.at).toBeGreaterThanOrEqual(60 - 1);
    expect(late?.at).toBeGreaterThanOrEqual(secondStart + 60 - 1);
    const settled = calls[1] as StoreCall;
    await new Promise((resolve) => setTimeout(resolve, 80));
    // The signal of the call that settled, first read after every deadline has passed.
    expect(settled.signal.aborted).toBe(false);
    expect((calls[0] as StoreCall).signal.aborted).toBe(true);
    expect((calls[2] as StoreCall).signal.aborted).toBe(true);
  });

  it('with tracing on but no OpenTelemetry SDK registered, a store call carries no usage record and still its deadline', async () => {
    let seen: StoreCall | undefined;
    const service = new StateSessionService(
      storeAnswering(async (_method, call) => {
        seen = call;
        return new Map();
      }),
      { timeoutMs: 5_000 },
    );
    await service.getAppState({ appName: 'a' });
    await service.getAppState({ appName: 'a' });
    expect(seen?.usage).toBeUndefined();
    expect(Number.isFinite(seen?.deadline)).toBe(true);
  });
});

describe('listAppNames and listSessionKeys', () => {
  const bare = () => storeAnswering(() => Promise.resolve(undefined));

  it("answer undefined when the store does not offer them, and pass the store's answers on (apps sorted)", async () => {
    const store = bare();
    delete store.listAppNames;
    delete store.listSessionKeys;
    const without = new StateSessionService(store);
    expect(await without.listAppNames()).toBeUndefined();
    expect(await without.listSessionKeys({ appName: 'a' })).toBeUndefined();
    const asked: unknown[][] = [];
    const keys = [{ userId: 'u', sessionId: 's' }];
    const offering = new StateSessionService({
      ...bare(),
      listAppNames: async () => ['b', 'a', 'c'],
      listSessionKeys: async (...args: unknown[]) => {
        asked.push(args.slice(0, 2));
        return keys;
      },
    });
    expect(await offering.listAppNames()).toEqual(['a', 'b', 'c']);
    expect(await offering.listSessionKeys({ appName: 'a' })).toEqual(keys);
    expect(await offering.listSessionKeys({ appName: 'a', userId: 'u' })).toEqual(keys);
    expect(asked).toEqual([
      ['a', undefined],
      ['a', 'u'],
    ]);
  });

  it('refuse an app or user that cannot exist', async () => {
    const service = new StateSessionService(bare());
    for (const request of [{ appName: '' }, { appName: 'a', userId: '' }, {}]) {
      await expect(service.listSessionKeys(request as { appName: string })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    }
  });
});
