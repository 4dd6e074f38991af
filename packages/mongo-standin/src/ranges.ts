/**
 * Queries served by a compound index's order (see `RangeIndex`): a filter
 * that pins every field of the index but the last by equality, and either
 * bounds the last one (`$gt`, `$gte`, `$lt`, `$lte` on numbers), or names it
 * in a top-level `$or` whose every clause bounds the last field of another
 * such index with the same leading fields, or leaves it free. The candidates
 * are the entries within the bounds, in the index's order; with a sort on
 * that field alone and a limit, a walk in the sort's direction stops once it
 * has the documents the limit asks for. Every candidate is still checked
 * against the whole filter, as MongoDB checks what an index scan returns.
 */
import { matches } from './query.js';
import { boundIndex, type Collection, groupKeyOf, type RangeIndex, type Transaction } from './storage.js';
import { type Doc, getPath, isDocument } from './values.js';

/** What a `find` asks beyond its filter: its sort, and how many documents it can return at most (skip + limit). */
export interface Wanted {
  sort?: Doc | undefined;
  count?: number | undefined;
}

interface Bounds {
  low?: { value: number; inclusive: boolean };
  high?: { value: number; inclusive: boolean };
}

interface Scan {
  range: RangeIndex;
  bounds: Bounds;
}

/** The documents of `collection` that `txn` sees and that match `filter`, read through an index's order; undefined when no index serves the filter. */
export function selectByRange(
  collection: Collection,
  filter: Doc,
  snapshot: number,
  txn: Transaction | undefined,
  wanted: Wanted = {},
): Doc[] | undefined {
  for (const range of collection.ranges.values()) {
    const scans = scansOf(collection, range, filter);
    if (!scans) continue;
    const own = txn?.ownWrites(collection.ns);
    const found = new Map<string, Doc>();
    const take = (idKey: string, check?: (doc: Doc) => boolean): boolean => {
      if (found.has(idKey) || own?.has(idKey)) return false;
      const doc = collection.visible(idKey, snapshot);
      if (!doc || !matches(doc, filter) || (check && !check(doc))) return false;
      found.set(idKey, doc);
      return true;
    };
    const key = groupKeyOf(range.prefix.map((path) => pinnedValue(filter[path])));
    const direction = walkDirection(wanted, scans);
    for (const scan of scans) {
      const group = scan.range.groups.get(key);
      if (group) {
        const from = scan.bounds.low ? boundIndex(group.values, scan.bounds.low.value, scan.bounds.low.inclusive) : 0;
        const to = scan.bounds.high
          ? boundIndex(group.values, scan.bounds.high.value, !scan.bounds.high.inclusive)
          : group.values.length;
        if (direction === undefined) {
          for (let at = from; at < to; at++) take(group.ids[at] as string);
        } else {
          // Only a document met at the entry of its visible value counts: an entry an older
          // version left behind would put it out of order.
          const field = scan.range.field;
          let taken = 0;
          for (let step = 0; step < to - from && taken < (wanted.count as number); step++) {
            const at = direction > 0 ? from + step : to - 1 - step;
            const value = group.values[at];
            if (take(group.ids[at] as string, (doc) => getPath(doc, field) === value)) taken++;
          }
        }
        for (const idKey of group.loose) take(idKey);
      }
      for (const idKey of scan.range.loose) take(idKey);
    }
    const result = [...found.values()];
    if (own) for (const doc of own.values()) if (doc && matches(doc, filter)) result.push(doc);
    return result;
  }
  return undefined;
}

/** The scans of `range` (and of indexes with its leading fields) that hold every document `filter` can match. */
function scansOf(collection: Collection, range: RangeIndex, filter: Doc): Scan[] | undefined {
  for (const path of range.prefix) if (pinnedValue(filter[path]) === undefined) return undefined;
  const condition = filter[range.field];
  if (condition !== undefined) {
    const bounds = boundsOf(condition);
    return bounds ? [{ range, bounds }] : undefined;
  }
  const clauses = filter.$or;
  if (clauses === undefined) return [{ range, bounds: {} }];
  if (!Array.isArray(clauses)) return undefined;
  const scans: Scan[] = [];
  for (const clause of clauses) {
    if (!isDocument(clause) || Object.keys(clause).length !== 1) return undefined;
    const [field] = Object.keys(clause) as [string];
    const other = [...collection.ranges.values()].find(
      (each) => each.field === field && each.prefix.join('\u0000') === range.prefix.join('\u0000'),
    );
    const bounds = boundsOf(clause[field]);
    if (!other || !bounds) return undefined;
    scans.push({ range: other, bounds });
  }
  return scans;
}

/** The value an equality condition pins (a plain value, or `$eq`), when a group key can stand for it. */
function pinnedValue(condition: unknown): unknown {
  let value = condition;
  if (isDocument(condition) && Object.keys(condition)[0]?.startsWith('$')) {
    if (Object.keys(condition).length !== 1 || !Object.hasOwn(condition, '$eq')) return undefined;
    value = condition.$eq;
  }
  // null also matches a missing field, and an array matches by element: the postings answer those.
  if (value === null || value === undefined || Array.isArray(value) || value instanceof RegExp) return undefined;
  return value;
}

/** The bounds of range operators on numbers; undefined for any other condition. */
function boundsOf(condition: unknown): Bounds | undefined {
  if (!isDocument(condition)) return undefined;
  const bounds: Bounds = {};
  const operators = Object.keys(condition);
  if (operators.length === 0) return undefined;
  for (const operator of operators) {
    const value = condition[operator];
    if (typeof value !== 'number' || Number.isNaN(value)) return undefined;
    if (operator === '$gt' || operator === '$gte') {
      if (bounds.low) return undefined;
      bounds.low = { value, inclusive: operator === '$gte' };
    } else if (operator === '$lt' || operator === '$lte') {
      if (bounds.high) return undefined;
      bounds.high = { value, inclusive: operator === '$lte' };
    } else return undefined;
  }
  return bounds;
}

/** +1 or -1 when one scan can stop early: a limit, and a sort on the scanned field alone. */
function walkDirection(wanted: Wanted, scans: Scan[]): number | undefined {
  if (wanted.count === undefined || wanted.count === 0 || scans.length !== 1 || !wanted.sort) return undefined;
  const keys = Object.keys(wanted.sort);
  const only = scans[0] as Scan;
  if (keys.length !== 1 || keys[0] !== only.range.field) return undefined;
  const direction = wanted.sort[keys[0]];
  return direction === 1 || direction === -1 ? direction : undefined;
}
