/**
 * Stored data that is not what adk-state writes (an event's or a state
 * value's text that is not JSON): every method that reads it fails with a
 * BackendError of kind 'unreadable-data', saying honestly whether its write
 * was made, on every path (through the log cache and without it), never
 * with a raw SyntaxError.
 */
import { createEvent, type Session } from '@google/adk';
import { describe, expect, it } from 'vitest';
import { BackendError, isAdkStateError, StateSessionService } from '../src/index.js';
import {
  type Bucket,
  type LoadResult,
  type SessionStore,
  type StoredEvent,
  UnreadableDataError,
} from '../src/store-kit.js';

/** One stored session whose texts the test chooses; writes are accepted and change nothing. */
interface Held {
  event?: string;
  sessionValue?: string;
  userValue?: string;
  appValue?: string;
  /** Head fields as the store hands them out, in place of good ones. */
  head?: Record<string, unknown>;
}

function storeHolding(texts: Held) {
  const bucket = (text: string | undefined): Bucket => new Map(text === undefined ? [] : [['k', text]]);
  const events = (): StoredEvent[] => [{ id: 'e1', timestamp: 1, json: texts.event ?? '{"author":"a"}' }];
  let revision = 5;
  const load = (): LoadResult => ({
    session: {
      id: 's',
      appName: 'a',
      userId: 'u',
      lastUpdateTime: 1,
      revision,
      state: bucket(texts.sessionValue),
      ...texts.head,
    },
    userState: bucket(texts.userValue),
    appState: bucket(texts.appValue),
    events: events(),
    logMark: 'life-1',
  });
  return {
    async createSession() {
      return { status: 'created', userState: bucket(texts.userValue), appState: bucket(texts.appValue) };
    },
    async appendEvent(input: { expectedRevision: number }) {
      const stored = texts.head && 'revision' in texts.head ? texts.head.revision : revision;
      if (input.expectedRevision !== stored) return { status: 'stale', revision: stored };
      revision++;
      return { status: 'ok' };
    },
    async loadSession() {
      return load();
    },
    async loadSessionSince() {
      return { ...load(), restart: true };
    },
    async deleteSession() {},
    async listSessions() {
      const { session, userState, appState } = load();
      return { totalItems: 1, sessions: [session], userStates: new Map([['u', userState]]), appState };
    },
    async readUserState() {
      return bucket(texts.userValue);
    },
    async readAppState() {
      return bucket(texts.appValue);
    },
  } as unknown as SessionStore;
}

const key = { appName: 'a', userId: 'u', sessionId: 's' };

/** What `run` resolves to, and the process warnings emitted meanwhile. */
async function withWarnings<T>(run: () => Promise<T>): Promise<{ result: T; warnings: Error[] }> {
  const warnings: Error[] = [];
  const listener = (warning: Error) => warnings.push(warning);
  process.on('warning', listener);
  try {
    const result = await run();
    // Warnings are delivered on a later tick.
    await new Promise((resolve) => setImmediate(resolve));
    return { result, warnings };
  } finally {
    process.off('warning', listener);
  }
}

async function expectUnreadable(promise: Promise<unknown>, operation: string, mayHaveApplied = false): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(BackendError);
  expect(isAdkStateError(error, 'BACKEND_ERROR')).toBe(true);
  const backend = error as BackendError;
  expect(backend.kind).toBe('unreadable-data');
  expect(backend.operation).toBe(operation);
  expect(backend.mayHaveApplied).toBe(mayHaveApplied);
  expect(backend.timedOut).toBe(false);
  expect(backend.message).toContain('a retry fails the same way');
  expect(backend.message).not.toContain('retry when the backend is reachable');
}

describe('stored data that is not what adk-state writes', () => {
  it("an event's text that is not JSON fails getSession as unreadable data, through the log cache and without it", async () => {
    for (const event of ['{"author": "a"', 'not json', '']) {
      for (const logCacheBytes of [0, 1 << 20]) {
        for (const shareReadEvents of [false, true]) {
          const service = new StateSessionService(storeHolding({ event }), { logCacheBytes, shareReadEvents });
          await expectUnreadable(service.getSession(key), 'getSession');
          // The same again: nothing was kept of the failed read.
          await expectUnreadable(service.getSession(key), 'getSession');
        }
      }
      const filtered = new StateSessionService(storeHolding({ event }));
      await expectUnreadable(filtered.getSession({ ...key, config: { numRecentEvents: 1 } }), 'getSession');
    }
  });

  it('a state value that is not JSON fails every read of it as unreadable data; a listing shows the rest, and warns', async () => {
    const readable = { sessionValue: '1', userValue: '"u"', appValue: '[2]' };
    const cases: Array<[Held, Record<string, unknown>]> = [
      [
        { ...readable, sessionValue: '{' },
        { 'user:k': 'u', 'app:k': [2] },
      ],
      [
        { ...readable, userValue: 'undefined' },
        { k: 1, 'app:k': [2] },
      ],
      [
        { ...readable, appValue: "'x'" },
        { k: 1, 'user:k': 'u' },
      ],
    ];
    for (const [texts, shown] of cases) {
      for (const logCacheBytes of [0, 1 << 20]) {
        const service = new StateSessionService(storeHolding(texts), { logCacheBytes });
        await expectUnreadable(service.getSession(key), 'getSession');
        const { result, warnings } = await withWarnings(() => service.listSessions({ appName: 'a' }));
        expect(result.sessions).toEqual(
          [{ ...key, id: 's', state: shown, events: [], lastUpdateTime: 1 }].map(
            ({ sessionId, ...session }) => session,
          ),
        );
        expect(warnings).toEqual([expect.objectContaining({ code: 'ADK_STATE_UNREADABLE_LISTED' })]);
        // Once per session for a service.
        expect((await withWarnings(() => service.listSessions({ appName: 'a' }))).warnings).toEqual([]);
      }
    }
    const service = new StateSessionService(storeHolding({ userValue: '[1,', appValue: 'NaN' }));
    await expectUnreadable(service.getUserState({ appName: 'a', userId: 'u' }), 'getUserState');
    await expectUnreadable(service.getAppState({ appName: 'a' }), 'getAppState');
  });

  it('createSession that stored the session but cannot read the buckets it returned says its write was made', async () => {
    const service = new StateSessionService(storeHolding({ appValue: '{"open":' }));
    await expectUnreadable(service.createSession({ appName: 'a', userId: 'u' }), 'createSession', true);
  });

  it('an append that reloads a stale session it cannot read says nothing was written', async () => {
    const service = new StateSessionService(storeHolding({ event: 'oops' }), { onStale: 'reload' });
    const stale: Session = { id: 's', appName: 'a', userId: 'u', state: {}, events: [], lastUpdateTime: 0 };
    const event = createEvent({ id: 'new', author: 'a', actions: { stateDelta: { n: 1 } } });
    await expectUnreadable(service.appendEvent({ session: stale, event }), 'appendEvent');
    expect(stale.events).toEqual([]);
    expect(stale.state).toEqual({});
  });

  it("a store's own UnreadableDataError, from this copy of the package or another, fails the call as unreadable data", async () => {
    // Each built entry of the package (the root, ./store; ESM and CommonJS) has its own class: they share a mark.
    const fromAnotherCopy = Object.assign(new Error('a record without its id'), {
      [Symbol.for('@adk-state/core.UnreadableDataError')]: true,
    });
    for (const thrown of [new UnreadableDataError('a record without its id'), fromAnotherCopy]) {
      const store = storeHolding({});
      store.readAppState = async () => {
        throw thrown;
      };
      const service = new StateSessionService(store);
      await expectUnreadable(service.getAppState({ appName: 'a' }), 'getAppState');
    }
    const plain = new StateSessionService(
      Object.assign(storeHolding({}), {
        readAppState: async () => {
          throw new Error('connection reset');
        },
      }),
    );
    const outage = await plain.getAppState({ appName: 'a' }).catch((error: unknown) => error);
    expect((outage as BackendError).kind).toBe('outage');
  });

  it('a head whose revision is not a whole number or whose lastUpdateTime is not a number is unreadable on every path', async () => {
    const damaged = [
      { revision: Number.NaN },
      { revision: '5' },
      { revision: 5.5 },
      { revision: undefined },
      { revision: 2 ** 60 },
      { lastUpdateTime: Number.NaN },
      { lastUpdateTime: '1' },
      { lastUpdateTime: Number.POSITIVE_INFINITY },
    ];
    for (const head of damaged) {
      for (const logCacheBytes of [0, 1 << 20]) {
        const texts: Held = {};
        const service = new StateSessionService(storeHolding(texts), { logCacheBytes, onStale: 'reload' });
        // A good read first: the log cache, when on, holds the session at a good revision.
        const good = (await service.getSession(key))!;
        texts.head = head;
        await expectUnreadable(service.getSession(key), 'getSession');
        await expectUnreadable(service.getSession({ ...key, config: { numRecentEvents: 1 } }), 'getSession');
        // Listed with what can be read: its state and a time (0 when the stored one is not a number).
        const listed = (await withWarnings(() => service.listSessions({ appName: 'a' }))).result.sessions;
        expect(listed.map((session) => [session.id, session.lastUpdateTime])).toEqual([
          ['s', 'lastUpdateTime' in head ? 0 : 1],
        ]);
        // An append through a listed session reads the head first, and cannot.
        await expectUnreadable(
          service.appendEvent({ session: listed[0]!, event: createEvent({ author: 'a' }) }),
          'appendEvent',
        );
        // Nothing of the bad head was kept: put right, it reads again.
        texts.head = undefined;
        expect((await service.getSession(key))?.events).toHaveLength(1);
        texts.head = head;
        // An append from a session object the service never saw reads the head first.
        const byHand: Session = { ...good, state: {}, events: good.events.slice() };
        const event = createEvent({ id: 'new', author: 'a' });
        await expectUnreadable(service.appendEvent({ session: byHand, event }), 'appendEvent');
        // An append found stale reloads the session: it cannot, so nothing was written.
        if ('revision' in head) {
          await expectUnreadable(service.appendEvent({ session: good, event }), 'appendEvent');
          expect(good.events.map((each) => each.id)).toEqual(['e1']);
        }
      }
    }
  });

  it('a stored event whose text is not text or whose timestamp is not a number is unreadable, whatever the store', async () => {
    for (const damaged of [
      { id: 'e1', timestamp: 1, json: 12 as unknown as string },
      { id: 'e1', timestamp: 'then' as unknown as number, json: '{"author":"a"}' },
      { id: 'e1', timestamp: Number.NaN, json: '{"author":"a"}' },
    ]) {
      for (const logCacheBytes of [0, 1 << 20]) {
        const store = storeHolding({});
        const load = store.loadSession.bind(store);
        store.loadSession = async (sessionKey, filter, call) => ({
          ...(await load(sessionKey, filter, call))!,
          events: [damaged],
        });
        store.loadSessionSince = async (sessionKey, _held, call) => ({
          ...(await load(sessionKey, {}, call))!,
          events: [damaged],
          restart: true,
        });
        await expectUnreadable(new StateSessionService(store, { logCacheBytes }).getSession(key), 'getSession');
      }
    }
  });

  it('readable data reads as before', async () => {
    const service = new StateSessionService(storeHolding({ sessionValue: '1', userValue: '"u"', appValue: '[2]' }));
    const read = await service.getSession(key);
    expect(read?.state).toEqual({ k: 1, 'user:k': 'u', 'app:k': [2] });
    expect(read?.events.map((event) => event.id)).toEqual(['e1']);
  });
});
