/**
 * JSON value rules: what a state value may be, and its stored text form.
 * Every value is checked before anything is written, and a rejected value
 * names the state key and the path inside it.
 */
import { StateValueError } from './errors.js';

/** A JSON value, the only thing that session state may hold. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/** Throws {@link StateValueError} unless `value` is a JSON value; `key` is the state key it belongs to. */
export function assertJsonValue(key: string, value: unknown): asserts value is JsonValue {
  checkValue(key, value, '$', new Set<object>());
}

function checkValue(key: string, value: unknown, path: string, ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) {
        throw new StateValueError(key, path, `is ${String(value)}, which JSON cannot represent`);
      }
      return;
    case 'undefined':
      throw new StateValueError(key, path, 'is undefined (use null to store "no value")');
    case 'bigint':
      throw new StateValueError(key, path, 'is a BigInt (store it as a string)');
    case 'symbol':
      throw new StateValueError(key, path, 'is a symbol');
    case 'function':
      throw new StateValueError(key, path, 'is a function');
  }
  if (value === null) return;
  const object = value as object;
  if (ancestors.has(object)) {
    throw new StateValueError(key, path, 'is a reference cycle');
  }
  if (Array.isArray(object)) {
    if (Object.getPrototypeOf(object) !== Array.prototype) {
      throw new StateValueError(key, path, 'is an instance of an Array subclass');
    }
    ancestors.add(object);
    for (let index = 0; index < object.length; index++) {
      if (!(index in object)) {
        throw new StateValueError(key, `${path}[${index}]`, 'is a hole in a sparse array');
      }
      checkValue(key, object[index], `${path}[${index}]`, ancestors);
    }
    ancestors.delete(object);
    return;
  }
  const proto = Object.getPrototypeOf(object);
  if (proto !== Object.prototype && proto !== null) {
    throw new StateValueError(key, path, `is a ${describeInstance(object)}, not a plain object`);
  }
  if (Object.getOwnPropertySymbols(object).length > 0) {
    throw new StateValueError(key, path, 'has symbol keys');
  }
  ancestors.add(object);
  for (const name of Object.keys(object)) {
    const descriptor = Object.getOwnPropertyDescriptor(object, name);
    const childPath = `${path}${formatPathSegment(name)}`;
    if (descriptor && (descriptor.get || descriptor.set)) {
      throw new StateValueError(key, childPath, 'is an accessor property');
    }
    checkValue(key, (object as Record<string, unknown>)[name], childPath, ancestors);
  }
  ancestors.delete(object);
}

function describeInstance(object: object): string {
  const name = (object as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? name : 'class instance';
}

function formatPathSegment(name: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? `.${name}` : `[${JSON.stringify(name)}]`;
}

/** The stored text of a JSON value. */
export function encodeValue(value: JsonValue): string {
  return JSON.stringify(value);
}

/**
 * Parses stored text back into a fresh value. Objects are rebuilt with
 * own-property definitions, so a key such as `__proto__` stays an ordinary key.
 */
export function decodeValue(text: string): JsonValue {
  return JSON.parse(text) as JsonValue;
}

/**
 * Sets `key` on `target` as an own enumerable property, even for `__proto__`
 * (a plain assignment would call the inherited setter instead).
 */
export function defineEntry(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}
