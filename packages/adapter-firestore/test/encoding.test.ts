import { utf16OrderKey } from '@adk-state/core/store';
import { describe, expect, it } from 'vitest';
import { documentId, fieldName, isHashedField, keyOfField, MAX_PLAIN_NAME, numberKey } from '../src/encoding.js';

const AWKWARD = [
  'a',
  'A',
  'a.b',
  'a/b',
  '.',
  '..',
  '__name__',
  '__proto__',
  '_',
  '_0041',
  'k',
  'h',
  '',
  ' ',
  'a b',
  '`tick`',
  '~',
  '*',
  '$set',
  '%2F',
  'ünï©ødé 🚀',
  '\u0000',
  '\ud800',
  '\udfff',
  '\ufffd',
  '\uffff',
  '\u{10000}',
  'x'.repeat(1024),
  '🔑'.repeat(500),
];

function utf8(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

describe('document ids', () => {
  it('are valid Firestore ids for any string', () => {
    for (const text of AWKWARD) {
      const id = documentId(text);
      expect(id).not.toContain('/');
      expect(id).not.toBe('.');
      expect(id).not.toBe('..');
      expect(id).not.toMatch(/^__.*__$/);
      expect(utf8(id)).toBeLessThanOrEqual(1_500);
      expect(id.length).toBeGreaterThan(0);
    }
  });

  it('never collide, including lone surrogates and tuples that join alike', () => {
    const ids = AWKWARD.map((text) => documentId(text));
    expect(new Set(ids).size).toBe(AWKWARD.length);
    const tuples = [
      documentId('a.b', 'c'),
      documentId('a', 'b.c'),
      documentId('a', ''),
      documentId('', 'a'),
      documentId('a'),
      documentId('a_002eb', 'c'),
    ];
    expect(new Set(tuples).size).toBe(tuples.length);
  });

  it('keep short ids readable and hash long ones', () => {
    expect(documentId('session-1')).toBe('ksession-1');
    expect(documentId('u1', 's1')).toBe('ku1.s1');
    expect(documentId('x'.repeat(MAX_PLAIN_NAME))).toBe(`k${'x'.repeat(MAX_PLAIN_NAME)}`);
    expect(documentId('x'.repeat(MAX_PLAIN_NAME + 1))).toMatch(/^h[0-9a-f]{64}$/);
  });
});

describe('state field names', () => {
  it('are plain identifiers that need no quoting in a field path', () => {
    for (const key of AWKWARD) {
      const name = fieldName(key);
      expect(name).toMatch(/^[kh][A-Za-z0-9_]*$/);
      expect(name).not.toMatch(/^__.*__$/);
      expect(utf8(name)).toBeLessThanOrEqual(1_500);
    }
  });

  it('give every key back exactly, or mark it hashed', () => {
    const names = AWKWARD.map((key) => fieldName(key));
    expect(new Set(names).size).toBe(AWKWARD.length);
    AWKWARD.forEach((key, index) => {
      const name = names[index] as string;
      if (isHashedField(name)) expect(fieldName(key).length).toBe(65);
      else expect(keyOfField(name)).toBe(key);
    });
    expect(isHashedField(fieldName('🔑'.repeat(500)))).toBe(true);
    expect(isHashedField(fieldName('x'.repeat(1024)))).toBe(true);
    expect(isHashedField(fieldName('a.b'))).toBe(false);
  });
});

describe('order keys', () => {
  function utf8Compare(a: string, b: string): number {
    return Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  }
  function jsCompare(a: string, b: string): number {
    return a < b ? -1 : a > b ? 1 : 0;
  }

  it("sort in Firestore's byte order exactly as JavaScript sorts the ids", () => {
    const samples = [...AWKWARD, 'a\ud7ff', 'a\ue000', 'a\u{1f680}', 'ab', 'a', '\u{10ffff}', '\ue000'];
    for (const a of samples) {
      for (const b of samples)
        expect(utf8Compare(utf16OrderKey(a), utf16OrderKey(b)), `${a} / ${b}`).toBe(jsCompare(a, b));
    }
  });

  it('leave ordinary ids unchanged', () => {
    expect(utf16OrderKey('session-1 ünï©ødé')).toBe('session-1 ünï©ødé');
  });
});

describe('number keys', () => {
  it('sort as strings exactly as the numbers sort, integers and fractions alike', () => {
    const numbers = [
      Number.NEGATIVE_INFINITY,
      -1e300,
      -1_700_000_000_000.5,
      -2,
      -1.5,
      -Number.MIN_VALUE,
      0,
      Number.MIN_VALUE,
      0.5,
      1,
      10,
      10.5,
      11,
      1_700_000_000_000,
      1_700_000_000_000.5,
      Number.MAX_SAFE_INTEGER,
      1e300,
      Number.POSITIVE_INFINITY,
    ];
    const keys = numbers.map(numberKey);
    expect([...keys].sort()).toEqual(keys);
    expect(new Set(keys).size).toBe(numbers.length);
    expect(numberKey(-0)).toBe(numberKey(0));
    for (const key of keys) expect(key).toMatch(/^[0-9a-f]{16}$/);
  });
});
