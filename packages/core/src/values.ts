/**
 * JSON value rules: what a state value may be, and its stored text form.
 * Every value is checked before anything is written, and a rejected value
 * names the state key and the path inside it.
 */
import { StateValueError, UnreadableDataError } from './errors.js';

/** A JSON value, the only thing that session state may hold. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/**
 * How deeply arrays and objects may nest in a state value (a scalar is at
 * depth 0, `[1]` at depth 1). Deeper values are refused with
 * {@link StateValueError}; the check itself never recurses, so no value can
 * overflow the stack.
 */
export const MAX_VALUE_DEPTH = 512;

/** Throws {@link StateValueError} unless `value` is a JSON value; `key` is the state key it belongs to. */
export function assertJsonValue(key: string, value: unknown): asserts value is JsonValue {
  if (keepsRules(value, STATE_RULES, 0)) return;
  const found = findNonJson(value, STATE_RULES);
  if (found) throw new StateValueError(key, found.path, found.problem);
}

/**
 * The stored text of a state value, checked on the way: {@link StateValueError}
 * (naming `key` and the path inside the value) unless it is a JSON value.
 */
export function encodeStateValue(key: string, value: unknown): string {
  assertJsonValue(key, value);
  return JSON.stringify(value);
}

/**
 * The JSON text of `value` under `rules`, or the first place where it breaks
 * them. The check is one tight pass beside the native encoder; the walk
 * that names the path ({@link findNonJson}) runs only for a value that fails.
 */
export function encodeChecked(value: unknown, rules: JsonRules): { json: string } | JsonProblem {
  if (!keepsRules(value, rules, 0)) {
    const found = findNonJson(value, rules);
    if (found) return found;
  }
  return { json: JSON.stringify(value) };
}

/**
 * Whether `value` keeps the rules: the same verdict as {@link findNonJson},
 * without a record per value visited. Recursive, bounded by the depth limit
 * (a few hundred frames), which also stops it on a reference cycle.
 */
function keepsRules(value: unknown, rules: JsonRules, depth: number): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      if (value === null) return true;
      break;
    default:
      return false;
  }
  if (depth >= rules.maxDepth) return false;
  const next = depth + 1;
  if (Array.isArray(value)) {
    if (!rules.asStringified && (Object.getPrototypeOf(value) !== Array.prototype || hasToJson(value))) return false;
    for (let index = 0; index < value.length; index++) {
      if (!(index in value) || !keepsRules(value[index], rules, next)) return false;
    }
    return true;
  }
  const object = value as Record<string, unknown>;
  if (rules.asStringified) {
    if (typeof object.toJSON === 'function') return true;
    for (const name of Object.keys(object)) {
      const child = object[name];
      if (child !== undefined && !keepsRules(child, rules, next)) return false;
    }
    return true;
  }
  const proto = Object.getPrototypeOf(object);
  if (proto !== Object.prototype && proto !== null) return false;
  if (hasToJson(object) || Object.getOwnPropertySymbols(object).length > 0) return false;
  for (const name of Object.keys(object)) {
    const descriptor = Object.getOwnPropertyDescriptor(object, name);
    if (descriptor === undefined || 'get' in descriptor || !keepsRules(descriptor.value, rules, next)) return false;
  }
  return true;
}

/**
 * Whether JSON would call a `toJSON` method of `value` (own, hidden, or
 * inherited) and store what it returns instead of the value: a state value
 * must be stored as the caller holds it.
 */
function hasToJson(value: object): boolean {
  return typeof (value as { toJSON?: unknown }).toJSON === 'function';
}

const TO_JSON_PROBLEM = 'has a toJSON method, which JSON would store in its place';

/** Where a value breaks the JSON rules, and how. */
export interface JsonProblem {
  /** `$` for the value itself, then `.name`, `["odd name"]` and `[index]` segments. */
  path: string;
  problem: string;
}

/** What {@link findNonJson} accepts beyond plain JSON. */
export interface JsonRules {
  /** Containers nested deeper than this are refused. */
  maxDepth: number;
  /**
   * `false` (state values): only plain objects and arrays, no `undefined`
   * anywhere. `true` (whole events): class instances count by their own
   * enumerable properties, objects with `toJSON` are left to it, and an
   * `undefined` property is left out, all as `JSON.stringify` does; values
   * that JSON would drop or change silently (functions, symbols, `undefined`
   * or holes in arrays, NaN/±Infinity) are still refused.
   */
  asStringified: boolean;
}

const STATE_RULES: JsonRules = { maxDepth: MAX_VALUE_DEPTH, asStringified: false };

/** One value met on the walk; the path is built from the parent chain only when a problem is found. */
interface Visit {
  value: unknown;
  parent: Visit | undefined;
  segment: string | number | undefined;
  depth: number;
}

/**
 * The first place where `value` breaks the JSON rules, or `undefined` when it
 * keeps them. Walks with an explicit stack, in the order a recursive walk
 * would, so any depth is safe to check.
 */
export function findNonJson(value: unknown, rules: JsonRules): JsonProblem | undefined {
  const stack: Visit[] = [{ value, parent: undefined, segment: undefined, depth: 0 }];
  for (let visit = stack.pop(); visit !== undefined; visit = stack.pop()) {
    const scalar = scalarProblem(visit.value, rules);
    if (scalar === undefined && visit.depth >= rules.maxDepth) {
      const cycle = firstRepeat(visit);
      if (cycle) return { path: pathOf(cycle), problem: 'is a reference cycle' };
      return { path: pathOf(visit), problem: `nests deeper than ${rules.maxDepth} levels` };
    }
    const problem = scalar ?? containerProblem(visit, rules, stack);
    if (problem) return { path: pathOf(visit), problem };
  }
  return undefined;
}

/** The problem of a value that is not an object (`''` for a good scalar, `undefined` for an object). */
function scalarProblem(value: unknown, rules: JsonRules): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return '';
    case 'number':
      return Number.isFinite(value) ? '' : `is ${String(value)}, which JSON cannot represent`;
    case 'undefined':
      return rules.asStringified
        ? 'is undefined, which JSON turns into null'
        : 'is undefined (use null to store "no value")';
    case 'bigint':
      return 'is a BigInt (store it as a string)';
    case 'symbol':
      return 'is a symbol';
    case 'function':
      return 'is a function';
  }
  return value === null ? '' : undefined;
}

/**
 * Checks an array or object and pushes its children (last first, so they are
 * visited in order). `''` when it is fine.
 */
function containerProblem(visit: Visit, rules: JsonRules, stack: Visit[]): string {
  const object = visit.value as object;
  const depth = visit.depth + 1;
  if (Array.isArray(object)) {
    if (!rules.asStringified && Object.getPrototypeOf(object) !== Array.prototype) {
      return 'is an instance of an Array subclass';
    }
    if (!rules.asStringified && hasToJson(object)) return TO_JSON_PROBLEM;
    for (let index = 0; index < object.length; index++) {
      if (!(index in object)) return `has a hole at [${index}], as in a sparse array`;
    }
    for (let index = object.length - 1; index >= 0; index--) {
      stack.push({ value: object[index], parent: visit, segment: index, depth });
    }
    return '';
  }
  if (rules.asStringified) {
    if (typeof (object as { toJSON?: unknown }).toJSON === 'function') return '';
  } else {
    const proto = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) return `is a ${describeInstance(object)}, not a plain object`;
    if (hasToJson(object)) return TO_JSON_PROBLEM;
    if (Object.getOwnPropertySymbols(object).length > 0) return 'has symbol keys';
  }
  const names = Object.keys(object);
  for (let index = names.length - 1; index >= 0; index--) {
    const name = names[index] as string;
    if (!rules.asStringified) {
      const descriptor = Object.getOwnPropertyDescriptor(object, name);
      if (descriptor && (descriptor.get || descriptor.set)) {
        return `has an accessor property ${JSON.stringify(name)}`;
      }
    }
    const child = (object as Record<string, unknown>)[name];
    if (child === undefined && rules.asStringified) continue;
    stack.push({ value: child, parent: visit, segment: name, depth });
  }
  return '';
}

/**
 * On a path too deep to be real data, the shallowest object that stands
 * above itself: where a reference cycle closes (cycles are found this way,
 * at the depth limit, instead of by keeping a set of ancestors on every step).
 */
function firstRepeat(visit: Visit): Visit | undefined {
  const chain: Visit[] = [];
  for (let at: Visit | undefined = visit; at !== undefined; at = at.parent) chain.push(at);
  const seen = new Set<unknown>();
  for (let index = chain.length - 1; index >= 0; index--) {
    const at = chain[index] as Visit;
    if (seen.has(at.value)) return at;
    seen.add(at.value);
  }
  return undefined;
}

function pathOf(visit: Visit): string {
  const segments: string[] = [];
  for (let at: Visit | undefined = visit; at?.segment !== undefined; at = at.parent) {
    segments.push(typeof at.segment === 'number' ? `[${at.segment}]` : formatPathSegment(at.segment));
  }
  return `$${segments.reverse().join('')}`;
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

/** Begins an {@link unreadableText}: JSON text never begins with NUL. */
const UNREADABLE_MARK = '\u0000unreadable: ';

/**
 * Parses stored text back into a fresh value. Objects are rebuilt with
 * own-property definitions, so a key such as `__proto__` stays an ordinary key.
 */
export function decodeValue(text: string): JsonValue {
  if (typeof text === 'string' && text.startsWith(UNREADABLE_MARK)) {
    throw new UnreadableDataError(text.slice(UNREADABLE_MARK.length));
  }
  try {
    return JSON.parse(text) as JsonValue;
  } catch (error) {
    throw new UnreadableDataError(`a stored state value is not JSON (${(error as Error).message})`, { cause: error });
  }
}

/**
 * What a store puts in a bucket in place of a stored value that is not text
 * (a record changed outside adk-state): every read of it fails as
 * unreadable data, saying `what`, and a listing shows its session without
 * that scope, as for a text that is not JSON.
 */
export function unreadableText(what: string): string {
  return UNREADABLE_MARK + what;
}

/**
 * A fresh plain object of the given keys and their stored texts, in order.
 * The texts are decoded by one parse of them all, as one array, and the
 * values set by plain assignment (a property definition only for a key the
 * object would otherwise inherit, such as `__proto__`): about the cost of an
 * assignment per key. `undefined` unless the parse gives exactly one value
 * per text (a stored text that is not one JSON value): the caller then
 * decodes text by text, so that the bad one fails alone.
 */
export function decodeEntries(keys: readonly string[], texts: readonly string[]): Record<string, unknown> | undefined {
  const result: Record<string, unknown> = {};
  if (keys.length === 0) return result;
  let values: unknown;
  try {
    values = JSON.parse(`[${texts.join(',')}]`);
  } catch {
    return undefined;
  }
  if (!Array.isArray(values) || values.length !== keys.length) return undefined;
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index] as string;
    if (key in result) defineEntry(result, key, values[index]);
    else result[key] = values[index];
  }
  return result;
}

/**
 * Sets `key` on `target` as an own enumerable property, even for `__proto__`
 * (a plain assignment would call the inherited setter instead).
 */
export function defineEntry(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}
