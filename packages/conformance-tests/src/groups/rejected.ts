/** Bad input: non-JSON values and malformed requests are refused with typed errors, and nothing is written. */
import type { Session } from '@google/adk';
import { expect } from 'vitest';
import { expectCode, type Group, ids, makeEvent, plain, put } from '../kit.js';

class Point {
  constructor(
    public x: number,
    public y: number,
  ) {}
}

function cycle(): unknown {
  const node: Record<string, unknown> = { name: 'loop' };
  node.self = { back: node };
  return node;
}

/** Non-JSON values, each with the path the error must name inside `{ outer: [ok, <value>] }`. */
const BAD_VALUES: Array<[string, () => unknown]> = [
  ['undefined', () => undefined],
  ['a function', () => () => 1],
  ['a symbol', () => Symbol('s')],
  ['a BigInt', () => BigInt(1)],
  ['NaN', () => Number.NaN],
  ['Infinity', () => Number.POSITIVE_INFINITY],
  ['-Infinity', () => Number.NEGATIVE_INFINITY],
  ['a Date', () => new Date(0)],
  ['a Map', () => new Map([[1, 2]])],
  ['a Set', () => new Set([1])],
  ['a class instance', () => new Point(1, 2)],
  ['a typed array', () => new Uint8Array([1, 2])],
  ['a RegExp', () => /x/],
  ['a boxed string', () => new String('s')],
  // biome-ignore lint/suspicious/noSparseArray: a hole is exactly what must be refused
  ['a sparse array', () => [1, , 3]],
  // JSON would store what toJSON returns, not the value the caller's state holds.
  ['an array with its own toJSON', () => Object.assign([1, 2], { toJSON: () => 'other' })],
  ['an object with a hidden toJSON', () => Object.defineProperty({ a: 1 }, 'toJSON', { value: () => ({ b: 2 }) })],
];

/** Values whose reading throws: a Proxy's traps, at the top of the value and inside it. */
const UNREADABLE_VALUES: Array<[string, () => unknown]> = [
  [
    'a Proxy whose ownKeys throws',
    () =>
      new Proxy(
        {},
        {
          ownKeys() {
            throw new Error('trap');
          },
        },
      ),
  ],
  [
    'a Proxy whose get throws, inside an array',
    () => [
      new Proxy(
        { a: 1 },
        {
          get() {
            throw new Error('trap');
          },
          getOwnPropertyDescriptor() {
            throw new Error('trap');
          },
        },
      ),
    ],
  ],
];

/** A state map whose key `k` is a getter: what it gives the store and what it gives the caller could differ. */
function withGetter(): Record<string, unknown> {
  return Object.defineProperty({ fine: 1 }, 'k', { get: () => ({ fresh: Math.random() }), enumerable: true });
}

export const rejected: Group = {
  title: 'bad input is refused and nothing is written',
  define({ test }) {
    test('each non-JSON value is a StateValueError naming the key and the path, and createSession stores nothing', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      for (const [label, make] of BAD_VALUES) {
        const sessionId = `s-${label}`;
        const error = await expectCode(
          service.createSession({
            appName,
            userId: 'u1',
            sessionId,
            state: { fine: 1, 'user:fine': 1, 'app:fine': 1, 'user:bad': { outer: ['ok', make()] } },
          }),
          'INVALID_STATE_VALUE',
          'StateValueError',
        );
        expect((error as { key?: string }).key, label).toBe('user:bad');
        expect((error as { path?: string }).path, label).toMatch(/^\$\.outer\[1\]/);
        expect(error.message, label).toContain('user:bad');
        expect(await service.getSession({ appName, userId: 'u1', sessionId }), label).toBeUndefined();
      }
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({});
      expect(await service.getAppState({ appName })).toEqual({});
    });

    test('a value whose reading throws (a Proxy) is a StateValueError naming its key; nothing is written', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      for (const [label, make] of UNREADABLE_VALUES) {
        const created = await expectCode(
          service.createSession({ appName, userId: 'u1', sessionId: 's2', state: { fine: 1, 'user:bad': make() } }),
          'INVALID_STATE_VALUE',
          'StateValueError',
        );
        expect((created as { key?: string }).key, label).toBe('user:bad');
        const appended = await expectCode(put(service, session, { fine: 1, bad: make() }), 'INVALID_STATE_VALUE');
        expect((appended as { key?: string }).key, label).toBe('bad');
      }
      // The delta itself a Proxy whose traps throw: the delta cannot be read.
      for (const trap of ['getPrototypeOf', 'ownKeys'] as const) {
        const delta = new Proxy(
          {},
          {
            [trap]() {
              throw new Error('trap');
            },
          },
        );
        await expectCode(put(service, session, delta), 'INVALID_ARGUMENT', 'InvalidArgumentError');
      }
      expect(await service.getSession({ appName, userId: 'u1', sessionId: 's2' })).toBeUndefined();
      expect((await kit.reload(session)).events).toEqual([]);
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({});
    });

    test('a top-level getter in an initial state or a delta is a StateValueError; nothing is written', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      const created = await expectCode(
        service.createSession({ appName, userId: 'u1', sessionId: 's2', state: withGetter() }),
        'INVALID_STATE_VALUE',
        'StateValueError',
      );
      expect((created as { key?: string }).key).toBe('k');
      const appended = await expectCode(put(service, session, withGetter()), 'INVALID_STATE_VALUE');
      expect((appended as { key?: string }).key).toBe('k');
      expect(plain(session.state)).toEqual({});
      expect(await service.getSession({ appName, userId: 'u1', sessionId: 's2' })).toBeUndefined();
      expect((await kit.reload(session)).events).toEqual([]);
    });

    test('a frozen or sealed session object, state or events array is an InvalidArgumentError before anything is written', async (kit) => {
      const { service, session } = await kit.fresh({ sessionId: 's1' });
      const variants: Array<[string, (copy: Session) => void]> = [
        ['a frozen session', (copy) => Object.freeze(copy)],
        ['a frozen state', (copy) => Object.freeze(copy.state)],
        ['a sealed state', (copy) => Object.seal(copy.state)],
        ['a frozen events array', (copy) => Object.freeze(copy.events)],
      ];
      for (const [label, fix] of variants) {
        const copy = await kit.reload(session);
        fix(copy);
        const error = await expectCode(put(service, copy, { n: 1 }), 'INVALID_ARGUMENT', 'InvalidArgumentError');
        expect(error.message, label).toContain('session');
      }
      const loaded = await kit.reload(session);
      expect(loaded.events).toEqual([]);
      expect(plain(loaded.state)).toEqual({});
      // The session is still current for a writable object.
      await put(service, session, { n: 2 });
      expect(plain((await kit.reload(session)).state)).toEqual({ n: 2 });
    });

    test('a generateId or now option that throws or gives an unusable value is an InvalidArgumentError; nothing is stored', async (kit) => {
      const appName = kit.app();
      const options = [
        { generateId: () => '' },
        { generateId: () => 42 as unknown as string },
        {
          generateId: (): string => {
            throw new Error('no ids today');
          },
        },
        { now: () => Number.NaN },
        { now: () => 'soon' as unknown as number },
        {
          now: (): number => {
            throw new Error('no clock');
          },
        },
      ];
      for (const option of options) {
        const service = await kit.service(option);
        const error = await expectCode(service.createSession({ appName, userId: 'u1' }), 'INVALID_ARGUMENT');
        expect(error.message).toContain(Object.keys(option)[0]);
      }
      expect((await (await kit.service()).listSessions({ appName })).totalItems).toBe(0);
    });

    test('appendEvent without a request object is an InvalidArgumentError', async (kit) => {
      const service = await kit.service();
      for (const request of [undefined, null, 'event']) {
        await expectCode(
          service.appendEvent(request as unknown as Parameters<typeof service.appendEvent>[0]),
          'INVALID_ARGUMENT',
          'InvalidArgumentError',
        );
      }
    });

    test('a cycle is a StateValueError, not a crash', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const error = await expectCode(
        service.createSession({ appName, userId: 'u1', state: { loop: cycle() } }),
        'INVALID_STATE_VALUE',
      );
      expect((error as { path?: string }).path).toBe('$.self.back');
    });

    test('a bad value in a delta refuses the whole event: no event, no state, caller untouched', async (kit) => {
      const { service, session, appName } = await kit.fresh({ state: { keep: 1 } });
      await put(service, session, { before: true });
      // The caller may fix the event and try again, so a refusal leaves its session exactly as it was.
      for (const [label, make] of BAD_VALUES) {
        const snapshot = { state: { ...session.state }, events: ids(session) };
        const event = makeEvent({ good: 1, 'user:good': 1, 'app:good': 1, 'temp:t': 1, bad: { nested: [0, make()] } });
        const error = await expectCode(
          service.appendEvent({ session, event }),
          'INVALID_STATE_VALUE',
          'StateValueError',
        );
        expect((error as { key?: string }).key, label).toBe('bad');
        expect((error as { path?: string }).path, label).toMatch(/^\$\.nested\[1\]/);
        expect(session.state, label).toEqual(snapshot.state);
        expect(ids(session), label).toEqual(snapshot.events);
      }
      const loaded = await kit.reload(session);
      expect(plain(loaded.state)).toEqual({ keep: 1, before: true });
      expect(loaded.events).toHaveLength(1);
      expect(await service.getUserState({ appName, userId: 'u1' })).toEqual({});
      expect(await service.getAppState({ appName })).toEqual({});
      await put(service, session, { after: true });
      expect((await kit.reload(session)).events).toHaveLength(2);
    });

    test('an event without a non-empty id or a finite timestamp is an InvalidArgumentError', async (kit) => {
      const { service, session } = await kit.fresh();
      const noId = makeEvent({ a: 1 });
      noId.id = '';
      await expectCode(service.appendEvent({ session, event: noId }), 'INVALID_ARGUMENT', 'InvalidArgumentError');
      for (const timestamp of [Number.NaN, Number.POSITIVE_INFINITY, '1' as unknown as number]) {
        const event = makeEvent({ a: 1 });
        event.timestamp = timestamp;
        await expectCode(service.appendEvent({ session, event }), 'INVALID_ARGUMENT');
      }
      const loaded = await kit.reload(session);
      expect(loaded.events).toEqual([]);
      expect(plain(loaded.state)).toEqual({});
    });

    test('appending to a session that was never created is a SessionNotFoundError', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const ghost: Session = { id: 'ghost', appName, userId: 'u1', state: {}, events: [], lastUpdateTime: 0 };
      const error = await expectCode(put(service, ghost, { a: 1 }), 'SESSION_NOT_FOUND', 'SessionNotFoundError');
      expect(error.message.startsWith('Session ghost not found')).toBe(true);
      expect(await service.getSession({ appName, userId: 'u1', sessionId: 'ghost' })).toBeUndefined();
      // A session the service returned, pointed at a key that does not exist: not found, not stale.
      const real = await service.createSession({ appName, userId: 'u1', sessionId: 'real' });
      real.id = 'missing';
      const moved = await expectCode(put(service, real, { a: 1 }), 'SESSION_NOT_FOUND', 'SessionNotFoundError');
      expect(moved.message.startsWith('Session missing not found')).toBe(true);
      expect(plain((await service.getSession({ appName, userId: 'u1', sessionId: 'real' }))?.state)).toEqual({});
    });

    test('an event that cannot be serialised is refused before anything is written', async (kit) => {
      const { service, session } = await kit.fresh();
      const event = makeEvent({ a: 1 });
      (event as unknown as Record<string, unknown>).customMetadata = { big: BigInt(1) };
      await expectCode(service.appendEvent({ session, event }), 'INVALID_ARGUMENT');
      expect(plain((await kit.reload(session)).state)).toEqual({});
      expect(session.events).toEqual([]);
    });

    test('a non-object initial state is an InvalidArgumentError', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      for (const state of [[1, 2], 'text', 5]) {
        await expectCode(
          service.createSession({
            appName,
            userId: 'u1',
            sessionId: 's',
            state: state as unknown as Record<string, unknown>,
          }),
          'INVALID_ARGUMENT',
        );
      }
      expect(await service.getSession({ appName, userId: 'u1', sessionId: 's' })).toBeUndefined();
    });
  },
};
