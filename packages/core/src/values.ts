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

/**
 * How deeply arrays and objects may nest in a state value (a scalar is at
 * depth 0, `[1]` at depth 1). Deeper values are refused with
 * {@link StateValueError}; the check itself never recurses, so no value can
 * overflow the stack.
 */
export const MAX_VALUE_DEPTH = 512;

/** Throws {@link StateValueError} unless `value` is a JSON value; `key` is the state key it belongs to. */
export function assertJsonValue(key: string, value: unknown): asserts value is JsonValue {
  const found = findNonJson(value, STATE_RULES);
  if (found) throw new StateValueError(key, found.path, found.problem);
}

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
