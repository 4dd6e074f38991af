import { describe, expect, it } from 'vitest';
import { assertJsonValue, combineState, StateValueError, splitState } from '../src/index.js';

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
