/**
 * The query language subset of the stand-in: filter matching, sorting,
 * projection and the update operators. Anything outside the subset is an
 * error with MongoDB's code, never a silent approximation.
 */
import { errors } from './errors.js';
import { evaluate, isExpression, REMOVE } from './expressions.js';
import {
  clone,
  compareValues,
  type Doc,
  defineField,
  getPath,
  isDocument,
  pathValues,
  splitPath,
  valuesEqual,
} from './values.js';

function isOperatorObject(value: unknown): value is Doc {
  if (!isDocument(value)) return false;
  const keys = Object.keys(value);
  return keys.length > 0 && (keys[0] as string).startsWith('$');
}

const FIELD_OPERATORS = new Set([
  '$eq',
  '$ne',
  '$in',
  '$nin',
  '$gt',
  '$gte',
  '$lt',
  '$lte',
  '$exists',
  '$not',
  '$type',
]);

/** The BSON type aliases `$type` takes, with their numbers, as MongoDB names them. */
const TYPE_ALIASES: ReadonlyMap<string, number> = new Map([
  ['double', 1],
  ['string', 2],
  ['object', 3],
  ['array', 4],
  ['binData', 5],
  ['objectId', 7],
  ['bool', 8],
  ['date', 9],
  ['null', 10],
  ['regex', 11],
  ['javascript', 13],
  ['int', 16],
  ['timestamp', 17],
  ['long', 18],
  ['decimal', 19],
  ['minKey', -1],
  ['maxKey', 127],
]);

/** The numeric BSON types: double, int, long, decimal. */
const NUMERIC_TYPES: ReadonlySet<number> = new Set([1, 16, 18, 19]);

/** The type numbers a `$type` operand asks for (`'number'` is every numeric type); an unknown alias fails as on MongoDB. */
function typeNumbers(operand: unknown): Set<number> {
  const wanted = new Set<number>();
  for (const entry of Array.isArray(operand) ? operand : [operand]) {
    if (entry === 'number') for (const numeric of NUMERIC_TYPES) wanted.add(numeric);
    else if (typeof entry === 'string' && TYPE_ALIASES.has(entry)) wanted.add(TYPE_ALIASES.get(entry) as number);
    else if (typeof entry === 'number' && [...TYPE_ALIASES.values()].includes(entry)) wanted.add(entry);
    else throw errors.badValue(`unknown type name alias: ${String(entry)}`);
  }
  return wanted;
}

/** Whether `value` is of a numeric BSON type (what `$isNumber` says). */
export function isNumeric(value: unknown): boolean {
  return value !== undefined && NUMERIC_TYPES.has(typeNumberOf(value));
}

/** The BSON type number of a value as the driver decodes it (a JavaScript number is a double unless whole and 32-bit). */
function typeNumberOf(value: unknown): number {
  if (value === null) return 10;
  if (typeof value === 'number') return Number.isInteger(value) && value === (value | 0) ? 16 : 1;
  if (typeof value === 'bigint') return 18;
  if (typeof value === 'string') return 2;
  if (typeof value === 'boolean') return 8;
  if (value instanceof Date) return 9;
  if (value instanceof RegExp) return 11;
  if (Array.isArray(value)) return 4;
  const tag = (value as { _bsontype?: string })._bsontype;
  return tag === undefined ? 3 : (TYPE_OF_BSON_CLASS.get(tag) ?? 3);
}

/** The BSON type numbers of the driver's value classes, by their `_bsontype`. */
const TYPE_OF_BSON_CLASS: ReadonlyMap<string, number> = new Map([
  ['Double', 1],
  ['Binary', 5],
  ['ObjectId', 7],
  ['BSONRegExp', 11],
  ['Code', 13],
  ['Int32', 16],
  ['Timestamp', 17],
  ['Long', 18],
  ['Decimal128', 19],
  ['MinKey', -1],
  ['MaxKey', 127],
]);

/** Parses a filter as MongoDB does before running a query: unknown operators fail even on an empty collection. */
export function validateFilter(filter: unknown): void {
  if (filter === undefined || filter === null) return;
  if (!isDocument(filter)) throw errors.badValue('the query filter must be an object');
  for (const key of Object.keys(filter)) {
    const condition = filter[key];
    if (key === '$and' || key === '$or' || key === '$nor') {
      for (const sub of subFilters(key, condition)) validateFilter(sub);
      continue;
    }
    if (key.startsWith('$')) throw errors.badValue(`unknown top level operator: ${key}`);
    splitPath(key);
    if (condition instanceof RegExp) throw errors.badValue('regular expressions are not supported by the stand-in');
    if (isOperatorObject(condition)) validateOperators(condition);
  }
}

/** The sub-filters of `$and`, `$or` or `$nor`: a non-empty array, as MongoDB requires. */
function subFilters(key: string, condition: unknown): unknown[] {
  if (!Array.isArray(condition) || condition.length === 0) {
    throw errors.badValue(`${key} argument must be a non-empty array`);
  }
  return condition;
}

function validateOperators(condition: Doc): void {
  for (const operator of Object.keys(condition)) {
    if (!FIELD_OPERATORS.has(operator)) throw errors.badValue(`unknown operator: ${operator}`);
    const operand = condition[operator];
    if ((operator === '$in' || operator === '$nin') && !Array.isArray(operand)) {
      throw errors.badValue(`${operator} needs an array`);
    }
    if (operator === '$not') {
      if (!isOperatorObject(operand)) throw errors.badValue('$not needs a regex or a document');
      validateOperators(operand);
    }
    if (operator === '$type') typeNumbers(operand);
  }
}

/** True when `doc` matches the query `filter`. */
export function matches(doc: Doc, filter: Doc | undefined): boolean {
  if (filter === undefined || filter === null) return true;
  if (!isDocument(filter)) throw errors.badValue('the query filter must be an object');
  for (const key of Object.keys(filter)) {
    const condition = filter[key];
    if (key === '$and' || key === '$or' || key === '$nor') {
      const results = subFilters(key, condition).map((sub) => matches(doc, sub as Doc));
      if (key === '$and' && !results.every(Boolean)) return false;
      if (key === '$or' && !results.some(Boolean)) return false;
      if (key === '$nor' && results.some(Boolean)) return false;
      continue;
    }
    if (key.startsWith('$')) throw errors.badValue(`unknown top level operator: ${key}`);
    if (!matchesField(doc, key, condition)) return false;
  }
  return true;
}

function matchesField(doc: Doc, path: string, condition: unknown): boolean {
  const parts = splitPath(path);
  if (isOperatorObject(condition)) {
    for (const operator of Object.keys(condition)) {
      if (!matchesOperator(doc, parts, operator, condition[operator])) return false;
    }
    return true;
  }
  if (condition instanceof RegExp) throw errors.badValue('regular expressions are not supported by the stand-in');
  return equalsAt(doc, parts, condition);
}

function equalsAt(doc: Doc, parts: readonly string[], expected: unknown): boolean {
  const { values, missing } = pathValues(doc, parts);
  if (expected === null && (missing || values.length === 0)) return true;
  return values.some((value) => valuesEqual(value, expected));
}

function matchesOperator(doc: Doc, parts: readonly string[], operator: string, operand: unknown): boolean {
  switch (operator) {
    case '$eq':
      return equalsAt(doc, parts, operand);
    case '$ne':
      return !equalsAt(doc, parts, operand);
    case '$in':
      if (!Array.isArray(operand)) throw errors.badValue('$in needs an array');
      return operand.some((candidate) => equalsAt(doc, parts, candidate));
    case '$nin':
      if (!Array.isArray(operand)) throw errors.badValue('$nin needs an array');
      return !operand.some((candidate) => equalsAt(doc, parts, candidate));
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte': {
      const { values } = pathValues(doc, parts);
      return values.some((value) => {
        // Comparison operators only match values of the same type bracket.
        if (value === undefined || operand === undefined) return false;
        if (typeBracket(value) !== typeBracket(operand)) return false;
        const c = compareValues(value, operand);
        if (operator === '$gt') return c > 0;
        if (operator === '$gte') return c >= 0;
        if (operator === '$lt') return c < 0;
        return c <= 0;
      });
    }
    case '$exists': {
      const { values } = pathValues(doc, parts);
      const exists = values.length > 0;
      return operand ? exists : !exists;
    }
    case '$not': {
      if (!isOperatorObject(operand)) throw errors.badValue('$not needs a regex or a document');
      return !Object.keys(operand).every((inner) => matchesOperator(doc, parts, inner, operand[inner]));
    }
    case '$type': {
      const wanted = typeNumbers(operand);
      return pathValues(doc, parts).values.some((value) => wanted.has(typeNumberOf(value)));
    }
    default:
      throw errors.badValue(`unknown operator: ${operator}`);
  }
}

function typeBracket(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'number' || typeof value === 'bigint') return 'number';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'boolean') return 'boolean';
  if (value instanceof Date) return 'date';
  if (Array.isArray(value)) return 'array';
  const tag = (value as { _bsontype?: string })._bsontype;
  if (tag === 'Long' || tag === 'Int32' || tag === 'Double' || tag === 'Decimal128') return 'number';
  return tag ?? 'object';
}

/** A comparator for a MongoDB sort specification (missing sorts as null). */
export function sortComparator(spec: Doc): (a: Doc, b: Doc) => number {
  const fields = Object.keys(spec).map((path) => {
    const direction = spec[path];
    if (direction !== 1 && direction !== -1)
      throw errors.badValue(`$sort key ordering must be 1 or -1, got ${String(direction)}`);
    return { path, direction };
  });
  return (a, b) => {
    for (const { path, direction } of fields) {
      const c = compareValues(sortValue(getPath(a, path), direction), sortValue(getPath(b, path), direction));
      if (c !== 0) return c * direction;
    }
    return 0;
  };
}

function sortValue(value: unknown, direction: number): unknown {
  if (!Array.isArray(value)) return value ?? null;
  if (value.length === 0) return undefined;
  // An array sorts by its smallest element ascending, its largest descending.
  return value.reduce((best, element) => (compareValues(element, best) * direction > 0 ? element : best));
}

/**
 * Applies an inclusion or exclusion projection. In an inclusion projection a
 * field may also be computed from an expression (`expressions.ts`); one
 * that evaluates to `$$REMOVE` is left out.
 */
export function project(doc: Doc, projection: Doc | undefined): Doc {
  if (projection === undefined || projection === null || Object.keys(projection).length === 0) return doc;
  const entries = Object.entries(projection);
  const includeId = projection._id === undefined ? true : Boolean(projection._id);
  const others = entries.filter(([key]) => key !== '_id');
  const includes = (value: unknown) => isExpression(value) || Boolean(value);
  const inclusive =
    others.length > 0
      ? others.every(([, v]) => includes(v))
      : projection._id !== undefined
        ? Boolean(projection._id)
        : true;
  if (others.some(([, v]) => includes(v) !== inclusive)) {
    throw errors.badValue('Cannot do exclusion and inclusion in the same projection (except _id)');
  }
  if (inclusive) {
    const result: Doc = {};
    if (includeId && Object.hasOwn(doc, '_id')) result._id = doc._id;
    for (const [path, value] of others) {
      if (!isExpression(value)) {
        copyPath(doc, result, path.split('.'));
        continue;
      }
      if (path.includes('.')) throw errors.badValue('the stand-in computes top-level fields only');
      const computed = evaluate(doc, value);
      if (computed !== REMOVE) defineField(result, path, clone(computed));
    }
    return result;
  }
  const result = clone(doc);
  if (!includeId) delete result._id;
  for (const [path] of others) removePath(result, path.split('.'));
  return result;
}

function copyPath(source: Doc, target: Doc, parts: string[]): void {
  const [head, ...rest] = parts as [string, ...string[]];
  if (!Object.hasOwn(source, head)) return;
  const value = source[head];
  if (rest.length === 0) {
    defineField(target, head, clone(value));
    return;
  }
  if (!isDocument(value)) return;
  const child = isDocument(target[head]) ? (target[head] as Doc) : {};
  defineField(target, head, child);
  copyPath(value, child, rest);
}

function removePath(target: Doc, parts: string[]): void {
  const [head, ...rest] = parts as [string, ...string[]];
  if (!Object.hasOwn(target, head)) return;
  if (rest.length === 0) {
    delete target[head];
    return;
  }
  const value = target[head];
  if (isDocument(value)) removePath(value, rest);
}

const UPDATE_OPERATORS = new Set(['$set', '$unset', '$inc', '$setOnInsert', '$min', '$max']);

/** True when an update document is made of operators (else it is a replacement). */
export function isOperatorUpdate(update: Doc): boolean {
  const keys = Object.keys(update);
  return keys.length > 0 && keys.every((key) => key.startsWith('$'));
}

/** Parses an update as MongoDB does before running it: bad operators and conflicting paths fail even when nothing matches. */
export function validateUpdate(update: unknown): void {
  if (Array.isArray(update)) throw errors.badValue('pipeline-style updates are not supported by the stand-in');
  if (!isDocument(update)) throw errors.badValue('the update must be a document');
  if (!isOperatorUpdate(update)) {
    if (Object.keys(update).some((key) => key.startsWith('$'))) {
      throw errors.badValue('an update document mixes operators and fields');
    }
    return;
  }
  const targets: string[] = [];
  for (const operator of Object.keys(update)) {
    if (!UPDATE_OPERATORS.has(operator)) throw errors.badValue(`Unknown modifier: ${operator}`);
    const fields = update[operator];
    if (!isDocument(fields))
      throw errors.badValue(`Modifiers operate on fields but we found a non-document for ${operator}`);
    for (const path of Object.keys(fields)) {
      splitPath(path);
      for (const other of targets) {
        if (other === path || other.startsWith(`${path}.`) || path.startsWith(`${other}.`)) {
          throw errors.conflictingUpdate(`Updating the path '${path}' would create a conflict at '${other}'`);
        }
      }
      targets.push(path);
    }
  }
}

/** Returns the updated copy of `doc`. `inserting` applies `$setOnInsert`. */
export function applyUpdate(doc: Doc, update: unknown, inserting: boolean): Doc {
  validateUpdate(update);
  const spec = update as Doc;
  if (!isOperatorUpdate(spec)) {
    const replaced: Doc = { _id: doc._id };
    for (const key of Object.keys(spec)) {
      if (key === '_id') {
        if (doc._id !== undefined && !valuesEqual(spec._id, doc._id)) throw errors.immutableField('_id');
        continue;
      }
      defineField(replaced, key, clone(spec[key]));
    }
    if (replaced._id === undefined) delete replaced._id;
    return replaced;
  }
  const result = clone(doc);
  for (const operator of Object.keys(spec)) {
    if (operator === '$setOnInsert' && !inserting) continue;
    const fields = spec[operator] as Doc;
    for (const path of Object.keys(fields)) {
      if ((path === '_id' || path.startsWith('_id.')) && !inserting) {
        const current = getPath(result, path);
        const next = operator === '$unset' ? undefined : fields[path];
        if (operator !== '$set' || !valuesEqual(current, next)) throw errors.immutableField('_id');
      }
      applyOperator(result, operator, path, fields[path]);
    }
  }
  return result;
}

function applyOperator(doc: Doc, operator: string, path: string, operand: unknown): void {
  const parts = splitPath(path);
  const last = parts[parts.length - 1] as string;
  if (operator === '$unset') {
    const parent = walkTo(doc, parts.slice(0, -1), false, path);
    if (parent && Object.hasOwn(parent, last)) delete parent[last];
    return;
  }
  const parent = walkTo(doc, parts.slice(0, -1), true, path) as Doc;
  const current = Object.hasOwn(parent, last) ? parent[last] : undefined;
  switch (operator) {
    case '$set':
    case '$setOnInsert':
      defineField(parent, last, clone(operand));
      return;
    case '$inc': {
      if (typeof operand !== 'number') throw errors.typeMismatch('Cannot increment with non-numeric argument');
      if (current === undefined) defineField(parent, last, operand);
      else if (typeof current === 'number') defineField(parent, last, current + operand);
      else
        throw errors.typeMismatch(
          `Cannot apply $inc to a value of non-numeric type. {_id: ...} has the field '${last}' of non-numeric type`,
        );
      return;
    }
    case '$min':
    case '$max': {
      const replace =
        current === undefined ||
        (operator === '$min' ? compareValues(operand, current) < 0 : compareValues(operand, current) > 0);
      if (replace) defineField(parent, last, clone(operand));
      return;
    }
  }
}

function walkTo(doc: Doc, parts: string[], create: boolean, fullPath: string): Doc | undefined {
  let current: Doc = doc;
  for (const part of parts) {
    const next = Object.hasOwn(current, part) ? current[part] : undefined;
    if (next === undefined) {
      if (!create) return undefined;
      const child: Doc = {};
      defineField(current, part, child);
      current = child;
    } else if (isDocument(next)) {
      current = next;
    } else {
      throw errors.pathNotViable(
        `Cannot create field '${part}' in element {${part}: ${JSON.stringify(next)}} (path ${fullPath})`,
      );
    }
  }
  return current;
}

/** The document an upsert starts from: the equality conditions of the filter. */
export function upsertSeed(filter: Doc | undefined): Doc {
  const seed: Doc = {};
  if (!filter) return seed;
  const add = (conditions: Doc) => {
    for (const key of Object.keys(conditions)) {
      const condition = conditions[key];
      if (key === '$and' && Array.isArray(condition)) {
        for (const sub of condition) if (isDocument(sub)) add(sub);
        continue;
      }
      if (key.startsWith('$')) continue;
      let value: unknown;
      if (isOperatorObject(condition)) {
        if (!Object.hasOwn(condition, '$eq')) continue;
        value = condition.$eq;
      } else {
        value = condition;
      }
      applyOperator(seed, '$set', key, value);
    }
  };
  add(filter);
  return seed;
}
