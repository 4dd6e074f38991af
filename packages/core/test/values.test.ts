import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, MAX_VALUE_DEPTH, StateValueError } from '../src/index.js';
import { combineState } from '../src/scopes.js';
import { assertPositiveNumber, expiryOf, splitState, UnreadableDataError } from '../src/store-kit.js';
import { assertJsonValue, encodeChecked, findNonJson } from '../src/values.js';

function rejection(value: unknown): { path: string; message: string } {
  try {
    assertJsonValue('k', value);
  } catch (error) {
    expect(error).toBeInstanceOf(StateValueError);
    return { path: (error as StateValueError).path, message: (error as Error).message };
  }
  throw new Error('expected a rejection');
}

describe('JSON value validation', () => {
  it('accepts every JSON value, at any depth', () => {
    const deep: Record<string, unknown> = {};
    let cursor = deep;
    for (let i = 0; i < 200; i++) {
      cursor.next = {};
      cursor = cursor.next as Record<string, unknown>;
    }
    for (const value of [null, true, false, 0, -1.5, '', 'x', [], {}, [1, [2, [3]]], { a: { b: null } }, deep]) {
      expect(() => assertJsonValue('k', value)).not.toThrow();
    }
    expect(() => assertJsonValue('k', Object.create(null))).not.toThrow();
  });

  it('names the path of the offending part', () => {
    expect(rejection({ a: [1, { b: undefined }] }).path).toBe('$.a[1].b');
    expect(rejection({ 'odd key': Number.NaN }).path).toBe('$["odd key"]');
    expect(rejection([new Date()]).path).toBe('$[0]');
    expect(rejection(new Map()).message).toContain('Map');
  });

  it('accepts a shared (non-cyclic) reference twice', () => {
    const shared = { x: 1 };
    expect(() => assertJsonValue('k', { a: shared, b: [shared] })).not.toThrow();
  });

  it('splits by prefix and combines back to the flat view', () => {
    const writes = splitState({ a: 1, 'user:b': 2, 'app:c': 3, 'temp:d': 4 });
    expect([...writes.session]).toEqual([['a', '1']]);
    expect([...writes.user]).toEqual([['b', '2']]);
    expect([...writes.app]).toEqual([['c', '3']]);
    expect([...writes.temp]).toEqual([['temp:d', 4]]);
    expect(combineState(writes.session, writes.user, writes.app)).toEqual({ a: 1, 'user:b': 2, 'app:c': 3 });
  });
});

describe('depth', () => {
  function nested(depth: number): unknown {
    let value: unknown = 1;
    for (let level = 0; level < depth; level++) value = level % 2 ? [value] : { v: value };
    return value;
  }

  it(`accepts ${MAX_VALUE_DEPTH} levels and refuses deeper values without overflowing the stack`, () => {
    expect(() => assertJsonValue('k', nested(MAX_VALUE_DEPTH))).not.toThrow();
    for (const depth of [MAX_VALUE_DEPTH + 1, 100_000]) {
      const { message, path } = rejection(nested(depth));
      expect(message).toContain(`deeper than ${MAX_VALUE_DEPTH} levels`);
      expect(path.startsWith('$')).toBe(true);
    }
  });

  it('names the place where a cycle closes, however deep it is', () => {
    const inner: Record<string, unknown> = { x: 1 };
    const outer = { a: [{ b: inner }] };
    inner.loop = outer;
    expect(rejection(outer)).toMatchObject({ path: '$.a[0].b.loop' });
    expect(rejection(outer).message).toContain('reference cycle');
  });
});

describe('findNonJson as JSON.stringify sees an event', () => {
  const rules = { maxDepth: 64, asStringified: true };
  it('leaves out undefined properties and class instances, refuses what JSON would silently change', () => {
    class Part {
      text = 'x';
    }
    expect(findNonJson({ a: undefined, b: new Part(), c: new Date(0) }, rules)).toBeUndefined();
    expect(findNonJson({ a: [1, undefined] }, rules)?.path).toBe('$.a[1]');
    expect(findNonJson({ a: { f: () => 1 } }, rules)).toEqual({ path: '$.a.f', problem: 'is a function' });
    expect(findNonJson({ n: Number.NaN }, rules)?.problem).toContain('NaN');
  });
});

describe('assertPositiveNumber', () => {
  it('takes positive numbers within the limits and refuses everything else with InvalidArgumentError', () => {
    expect(() => assertPositiveNumber('x', 1.5)).not.toThrow();
    expect(() => assertPositiveNumber('x', Number.POSITIVE_INFINITY, { allowInfinity: true })).not.toThrow();
    expect(() => assertPositiveNumber('x', 0, { allowZero: true, integer: true })).not.toThrow();
    const bad: Array<[unknown, Parameters<typeof assertPositiveNumber>[2]]> = [
      [0, {}],
      [-1, {}],
      [Number.NaN, {}],
      ['5', {}],
      [Number.POSITIVE_INFINITY, {}],
      [1.5, { integer: true }],
      [11, { max: 10 }],
    ];
    for (const [value, limits] of bad) {
      expect(() => assertPositiveNumber('x', value, limits)).toThrow(InvalidArgumentError);
    }
  });
});

describe('expiryOf', () => {
  const limits = { max: 100 };

  it('names the clock by the option given, and none when neither is', () => {
    expect(expiryOf({}, limits)).toBeUndefined();
    expect(expiryOf({ expireAfterIdleSeconds: 1.5 }, limits)).toEqual({ clock: 'idle', seconds: 1.5 });
    expect(expiryOf({ expireAfterCreateSeconds: 100 }, limits)).toEqual({ clock: 'create', seconds: 100 });
  });

  it('refuses both clocks at once, a clock the store cannot keep, and bad lengths, with InvalidArgumentError', () => {
    const refused = (options: object, extra: object = {}) => {
      try {
        expiryOf(options, { ...limits, ...extra });
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidArgumentError);
        return error as InvalidArgumentError;
      }
      throw new Error('expected a refusal');
    };
    expect(refused({ expireAfterIdleSeconds: 1, expireAfterCreateSeconds: 1 }).message).toMatch(/at most one/);
    const unsupported = refused({ expireAfterIdleSeconds: 5 }, { clocks: ['create'], unsupported: 'the reason' });
    expect(unsupported.argument).toBe('expireAfterIdleSeconds');
    expect(unsupported.message).toMatch(/the reason/);
    for (const value of [0, -1, 101, Number.NaN, Number.POSITIVE_INFINITY, '5', null]) {
      expect(refused({ expireAfterCreateSeconds: value }).argument).toBe('expireAfterCreateSeconds');
    }
  });
});

describe('the quick check gives the same verdict as the walk that names the path', () => {
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  const withGetter = Object.defineProperty({}, 'x', { get: () => 1, enumerable: true });
  const withSymbol = { [Symbol('s')]: 1, a: 1 };
  class Thing {
    x = 1;
  }
  class List extends Array {}
  const deep = (levels: number): unknown => {
    let value: unknown = 1;
    for (let i = 0; i < levels; i++) value = [value];
    return value;
  };
  const values: unknown[] = [
    null,
    1,
    'x',
    true,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    undefined,
    10n,
    Symbol('x'),
    () => 1,
    new Array(2),
    [undefined],
    { a: undefined },
    cyclic,
    withGetter,
    withSymbol,
    new Thing(),
    List.from([1]),
    new Date(0),
    { toJSON: () => 1 },
    deep(MAX_VALUE_DEPTH),
    deep(MAX_VALUE_DEPTH + 1),
    { a: [{ b: { c: -0 } }] },
    Object.create(null),
    { __proto__: null, x: [1] },
  ];
  for (const asStringified of [false, true]) {
    it(`under ${asStringified ? 'the event rules' : 'the state rules'}`, () => {
      const rules = { maxDepth: MAX_VALUE_DEPTH, asStringified };
      for (const value of values) {
        const problem = findNonJson(value, rules);
        const encoded = encodeChecked(value, rules);
        if (problem) expect(encoded).toEqual(problem);
        else expect(encoded).toEqual({ json: JSON.stringify(value) });
        if (!asStringified) {
          if (problem) expect(() => assertJsonValue('k', value)).toThrow(StateValueError);
          else expect(() => assertJsonValue('k', value)).not.toThrow();
        }
      }
    });
  }
});

describe('the combined state, decoded in one parse', () => {
  it('keeps order, makes __proto__ an own key, and gives fresh copies on every call', () => {
    const session = new Map([
      ['__proto__', '{"polluted":true}'],
      ['b', '[1,2]'],
    ]);
    const app = new Map([['k', '"v"']]);
    const user = new Map([['n', '{"deep":{"x":1}}']]);
    const first = combineState(session, user, app);
    expect(Object.keys(first)).toEqual(['__proto__', 'b', 'app:k', 'user:n']);
    expect(Object.getPrototypeOf(first)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(first, '__proto__')?.value).toEqual({ polluted: true });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const second = combineState(session, user, app);
    expect(second['user:n']).toEqual(first['user:n']);
    expect(second['user:n']).not.toBe(first['user:n']);
  });

  it('a stored text that is not one JSON value fails alone, and cannot add or replace a key', () => {
    expect(
      combineState(
        new Map([
          ['a', '1'],
          ['b', '"x"'],
        ]),
        undefined,
        undefined,
      ),
    ).toEqual({ a: 1, b: 'x' });
    expect(() => combineState(new Map([['a', '1,"b":2']]), undefined, undefined)).toThrow(UnreadableDataError);
    expect(() => combineState(new Map([['a', '1,"a":2']]), undefined, undefined)).toThrow(UnreadableDataError);
    expect(() => combineState(new Map([['a', '{']]), undefined, undefined)).toThrow(UnreadableDataError);
    expect(() => combineState(new Map([['a', '1,2']]), undefined, new Map([['b', '3']]))).toThrow(UnreadableDataError);
  });
});
