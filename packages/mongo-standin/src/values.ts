/**
 * BSON value semantics of the stand-in, as MongoDB defines them: the
 * cross-type sort order, numeric equality across int/long/double, binary
 * (UTF-8 byte) string comparison, order-sensitive embedded documents, and a
 * canonical text form used as the key of `_id` values and unique index keys.
 */

import { CommandError } from './errors.js';

export type Doc = Record<string, unknown>;

/** A BSON class instance from the `bson` package (ObjectId, Binary, Long, ...). */
interface BsonObject {
  _bsontype: string;
}

function bsonTypeOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const tag = (value as Partial<BsonObject>)._bsontype;
  return typeof tag === 'string' ? tag : undefined;
}

/** True for a plain embedded document (not an array, Date or BSON class). */
export function isDocument(value: unknown): value is Doc {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  if (value instanceof Date || value instanceof RegExp || bsonTypeOf(value) !== undefined) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** MongoDB's canonical type rank, used to order values of different types. */
function rank(value: unknown): number {
  if (value === undefined || value === null) return 2;
  switch (typeof value) {
    case 'number':
    case 'bigint':
      return 3;
    case 'string':
      return 4;
    case 'boolean':
      return 9;
  }
  if (Array.isArray(value)) return 6;
  if (value instanceof Date) return 10;
  if (value instanceof RegExp) return 12;
  switch (bsonTypeOf(value)) {
    case 'MinKey':
      return 1;
    case 'Int32':
    case 'Double':
    case 'Long':
    case 'Decimal128':
      return 3;
    case 'BSONSymbol':
      return 4;
    case 'Binary':
      return 7;
    case 'ObjectId':
      return 8;
    case 'Timestamp':
      return 11;
    case 'BSONRegExp':
      return 12;
    case 'MaxKey':
      return 13;
    case undefined:
      return 5;
    default:
      return 5;
  }
}

function toNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  const tag = bsonTypeOf(value);
  if (tag === 'Long') return (value as { toNumber(): number }).toNumber();
  if (tag === 'Int32' || tag === 'Double') return (value as { valueOf(): number }).valueOf();
  if (tag === 'Decimal128') return Number.parseFloat(String(value));
  return Number.NaN;
}

function compareStrings(a: string, b: string): number {
  // MongoDB's simple collation compares the UTF-8 bytes.
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function sign(n: number): number {
  return n < 0 ? -1 : n > 0 ? 1 : 0;
}

/** Orders two BSON values as MongoDB does (negative, zero, positive). */
export function compareValues(a: unknown, b: unknown): number {
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  switch (ra) {
    case 1:
    case 2:
    case 13:
      return 0;
    case 3: {
      const x = toNumber(a);
      const y = toNumber(b);
      if (Number.isNaN(x) || Number.isNaN(y)) return Number.isNaN(x) ? (Number.isNaN(y) ? 0 : -1) : 1;
      return sign(x - y);
    }
    case 4:
      return compareStrings(String(a), String(b));
    case 5:
      return compareDocuments(a as Doc, b as Doc);
    case 6: {
      const x = a as unknown[];
      const y = b as unknown[];
      for (let i = 0; i < Math.min(x.length, y.length); i++) {
        const c = compareValues(x[i], y[i]);
        if (c !== 0) return c;
      }
      return x.length - y.length;
    }
    case 7: {
      const x = a as { buffer: Uint8Array; sub_type: number };
      const y = b as { buffer: Uint8Array; sub_type: number };
      if (x.buffer.length !== y.buffer.length) return x.buffer.length - y.buffer.length;
      if (x.sub_type !== y.sub_type) return x.sub_type - y.sub_type;
      return Buffer.compare(Buffer.from(x.buffer), Buffer.from(y.buffer));
    }
    case 8:
      return compareStrings(
        String((a as { toHexString(): string }).toHexString()),
        (b as { toHexString(): string }).toHexString(),
      );
    case 9:
      return Number(a) - Number(b);
    case 10:
      return sign((a as Date).getTime() - (b as Date).getTime());
    case 11: {
      const x = a as { t: number; i: number };
      const y = b as { t: number; i: number };
      return x.t !== y.t ? sign(x.t - y.t) : sign(x.i - y.i);
    }
    default:
      return compareStrings(String(a), String(b));
  }
}

function compareDocuments(a: Doc, b: Doc): number {
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  for (let i = 0; i < Math.min(ka.length, kb.length); i++) {
    const nameA = ka[i] as string;
    const nameB = kb[i] as string;
    const va = a[nameA];
    const vb = b[nameB];
    const byType = rank(va) - rank(vb);
    if (byType !== 0) return byType;
    const byName = compareStrings(nameA, nameB);
    if (byName !== 0) return byName;
    const byValue = compareValues(va, vb);
    if (byValue !== 0) return byValue;
  }
  return ka.length - kb.length;
}

/** True when two values are equal for MongoDB (numbers across types, documents in field order). */
export function valuesEqual(a: unknown, b: unknown): boolean {
  return rank(a) === rank(b) && compareValues(a, b) === 0;
}

/**
 * A text form that is equal for two values exactly when MongoDB considers
 * them equal: used as the key of `_id` values and of unique index entries.
 */
export function canonical(value: unknown): string {
  if (value === undefined || value === null) return 'z';
  switch (typeof value) {
    case 'number':
      return `n${Object.is(value, -0) ? 0 : value}`;
    case 'bigint':
      return `n${value}`;
    case 'string':
      return `s${JSON.stringify(value)}`;
    case 'boolean':
      return value ? 'b1' : 'b0';
  }
  if (Array.isArray(value)) return `a[${value.map(canonical).join(',')}]`;
  if (value instanceof Date) return `d${value.getTime()}`;
  const tag = bsonTypeOf(value);
  if (tag === 'Int32' || tag === 'Double' || tag === 'Long' || tag === 'Decimal128') return `n${toNumber(value)}`;
  if (tag === 'ObjectId') return `i${(value as { toHexString(): string }).toHexString()}`;
  if (tag === 'Binary') {
    const binary = value as { buffer: Uint8Array; sub_type: number };
    return `x${binary.sub_type}:${Buffer.from(binary.buffer).toString('hex')}`;
  }
  if (tag !== undefined) return `?${tag}:${String(value)}`;
  if (isDocument(value)) {
    return `o{${Object.keys(value)
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`)
      .join(',')}}`;
  }
  return `?${String(value)}`;
}

/** Sets an own property, even one named `__proto__`. */
export function defineField(target: Doc, name: string, value: unknown): void {
  Object.defineProperty(target, name, { value, enumerable: true, writable: true, configurable: true });
}

/** A deep copy of documents and arrays; BSON class instances are immutable and shared. */
export function clone<T>(value: T): T {
  if (Array.isArray(value)) return value.map(clone) as T;
  if (value instanceof Date) return new Date(value.getTime()) as T;
  if (isDocument(value)) {
    const copy: Doc = {};
    for (const key of Object.keys(value)) defineField(copy, key, clone(value[key]));
    return copy as T;
  }
  return value;
}

/** A field path split into its parts, refusing the empty parts MongoDB refuses. */
export function splitPath(path: string): string[] {
  const parts = path.split('.');
  if (parts.some((part) => part === '')) {
    throw new CommandError(
      56,
      'EmptyFieldName',
      `The update path '${path}' contains an empty field name, which is not allowed.`,
    );
  }
  return parts;
}

/** The value at a dotted path without array expansion (`undefined` when missing). */
export function getPath(doc: unknown, path: string): unknown {
  let current: unknown = doc;
  for (const part of path.split('.')) {
    if (Array.isArray(current) && /^\d+$/.test(part)) current = current[Number(part)];
    else if (isDocument(current) && Object.hasOwn(current, part)) current = current[part];
    else return undefined;
  }
  return current;
}

/**
 * Every value a query on `path` considers, as MongoDB does: arrays met along
 * the way are traversed, and an array at the end counts both as itself and
 * as each of its elements. `missing` is true when some branch has no value.
 */
export function pathValues(doc: unknown, parts: readonly string[]): { values: unknown[]; missing: boolean } {
  const values: unknown[] = [];
  let missing = false;
  const walk = (current: unknown, index: number): void => {
    if (index === parts.length) {
      values.push(current);
      if (Array.isArray(current)) values.push(...current);
      return;
    }
    const part = parts[index] as string;
    if (Array.isArray(current)) {
      if (/^\d+$/.test(part) && Number(part) < current.length) walk(current[Number(part)], index + 1);
      for (const element of current) if (isDocument(element)) walk(element, index);
      return;
    }
    if (isDocument(current) && Object.hasOwn(current, part)) walk(current[part], index + 1);
    else missing = true;
  };
  walk(doc, 0);
  return { values, missing };
}
