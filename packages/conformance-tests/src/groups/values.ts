/** Value fidelity: what is stored reads back exactly, whatever its JSON shape. */
import { expect } from 'vitest';
import { type Group, put } from '../kit.js';

const SAMPLES: Record<string, unknown> = {
  nothing: null,
  no: false,
  yes: true,
  zero: 0,
  negative: -42,
  fraction: 0.1 + 0.2,
  tiny: 5e-324,
  huge: Number.MAX_VALUE,
  maxSafe: Number.MAX_SAFE_INTEGER,
  minSafe: Number.MIN_SAFE_INTEGER,
  empty: '',
  unicode: 'héllo wörld 🚀 \u0000 \u2028 "quoted" \\ back',
  emptyArray: [],
  emptyObject: {},
  nested: { a: [1, { b: [null, false, 'x'] }], c: { d: { e: { f: 1 } } } },
  oddKeys: { 'dot.key': 1, $dollar: 2, 'a.b.c': { $gt: 3 }, '': 4, ' ': 5, '🔑': 6 },
};

export const values: Group = {
  title: 'values round-trip exactly',
  define({ test }) {
    test('every JSON shape round-trips in each stored scope', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const initial: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(SAMPLES)) {
        initial[key] = value;
        initial[`user:${key}`] = value;
        initial[`app:${key}`] = value;
      }
      const created = await service.createSession({ appName, userId: 'u1', state: initial });
      expect(created.state).toEqual(initial);
      expect((await kit.reload(created)).state).toStrictEqual(initial);
      const viaDelta = await service.createSession({ appName, userId: 'u2' });
      await put(service, viaDelta, initial);
      expect((await kit.reload(viaDelta)).state).toStrictEqual(initial);
    });

    test('null is stored as null and does not delete the key', async (kit) => {
      const { service, session, appName } = await kit.fresh({ state: { a: 1, 'user:b': 1, 'app:c': 1 } });
      // A delta has no way to delete: null is a value like any other, in every scope.
      await put(service, session, { a: null, 'user:b': null, 'app:c': null });
      const loaded = await kit.reload(session);
      expect(loaded.state).toStrictEqual({ a: null, 'user:b': null, 'app:c': null });
      expect(Object.hasOwn(loaded.state, 'a')).toBe(true);
      expect(await service.getUserState({ appName, userId: 'u1' })).toStrictEqual({ b: null });
    });

    test('a write replaces the whole top-level value (no deep merge)', async (kit) => {
      const { service, session } = await kit.fresh({
        state: { cfg: { a: 1, b: { c: 2 } }, 'user:cfg': { keep: 1 } },
      });
      // ADK applies a delta key by key with plain assignment, so a store must not merge nested objects either.
      await put(service, session, { cfg: { b: { d: 3 } }, 'user:cfg': { other: 2 } });
      const loaded = await kit.reload(session);
      expect(loaded.state).toStrictEqual({ cfg: { b: { d: 3 } }, 'user:cfg': { other: 2 } });
      expect(session.state.cfg).toStrictEqual({ b: { d: 3 } });
      expect(session.state['user:cfg']).toStrictEqual({ other: 2 });
    });

    test('booleans stay booleans, numbers keep their exact value and type, -0 reads as 0 as in JSON', async (kit) => {
      const { service, session } = await kit.fresh();
      await put(service, session, {
        f: false,
        t: true,
        one: 1,
        onePointFive: 1.5,
        str1: '1',
        strTrue: 'true',
        zero: -0,
        nested: { zero: -0 },
      });
      const { state } = await kit.reload(session);
      expect(state.f).toBe(false);
      expect(state.t).toBe(true);
      expect(state.one).toBe(1);
      expect(state.onePointFive).toBe(1.5);
      expect(state.str1).toBe('1');
      expect(state.strTrue).toBe('true');
      expect(Object.is(state.zero, 0)).toBe(true);
      expect(Object.is((state.nested as { zero: number }).zero, 0)).toBe(true);
    });

    test('a 1 MB string and a 10,000-element array round-trip', async (kit) => {
      const big = 'x'.repeat(250_000) + 'é'.repeat(250_000);
      const list = Array.from({ length: 10_000 }, (_, i) => ({ i, s: `item-${i}` }));
      const { service, session } = await kit.fresh({ state: { big } });
      await put(service, session, { list });
      const loaded = await kit.reload(session);
      expect(loaded.state.big).toBe(big);
      expect(loaded.state.list).toStrictEqual(list);
    });

    test('nested keys __proto__, constructor and prototype round-trip as plain data without pollution', async (kit) => {
      const hostile = JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"x": 1}}}');
      const { service, session } = await kit.fresh({ state: { h: hostile } });
      await put(service, session, { g: JSON.parse('{"a": {"__proto__": [1, 2]}}') });
      const loaded = await kit.reload(session);
      const h = loaded.state.h as Record<string, unknown>;
      expect(Object.keys(h)).toEqual(['__proto__', 'constructor']);
      expect(Object.getOwnPropertyDescriptor(h, '__proto__')?.value).toEqual({ polluted: true });
      expect(Object.getPrototypeOf(h)).toBe(Object.prototype);
      const g = (loaded.state.g as Record<string, Record<string, unknown>>).a as Record<string, unknown>;
      expect(Object.getOwnPropertyDescriptor(g, '__proto__')?.value).toEqual([1, 2]);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    test('top-level state keys __proto__, constructor and hasOwnProperty are ordinary keys', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      const state = JSON.parse(
        '{"__proto__": 1, "constructor": 2, "hasOwnProperty": 3, "user:__proto__": 4, "app:__proto__": 5, "toString": 6}',
      );
      const created = await service.createSession({ appName, userId: 'u1', state });
      expect(Object.getOwnPropertyDescriptor(created.state, '__proto__')?.value).toBe(1);
      const loaded = await kit.reload(created);
      expect(Object.keys(loaded.state).sort()).toEqual(
        ['__proto__', 'app:__proto__', 'constructor', 'hasOwnProperty', 'toString', 'user:__proto__'].sort(),
      );
      expect(Object.getOwnPropertyDescriptor(loaded.state, '__proto__')?.value).toBe(1);
      expect(Object.getPrototypeOf(loaded.state)).toBe(Object.prototype);
      const user = await service.getUserState({ appName, userId: 'u1' });
      expect(Object.getOwnPropertyDescriptor(user, '__proto__')?.value).toBe(4);
      const app = await service.getAppState({ appName });
      expect(Object.getOwnPropertyDescriptor(app, '__proto__')?.value).toBe(5);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });
  },
};
