/**
 * The stand-in's storage engine: multi-version documents for snapshot
 * isolation, first-writer-wins write locks, unique indexes and the TTL
 * monitor. A transaction reads the snapshot taken at its first statement plus
 * its own writes; its writes stay invisible to everyone else until commit and
 * vanish on abort. Writing a document that another open transaction wrote, or
 * that changed after the snapshot, is a WriteConflict, as in MongoDB.
 */
import { BSON } from 'bson';
import { CommandError, errors, MAX_DOCUMENT_BYTES } from './errors.js';
import { canonical, type Doc, getPath, pathValues } from './values.js';

export interface IndexInfo {
  name: string;
  key: Doc;
  unique: boolean;
  expireAfterSeconds?: number;
}

/**
 * The order of a compound index's last field, for each value of the fields
 * before it: what lets a query pinned on those fields read a range of the
 * last one, or its first or last entries, without reading the rest (as a
 * B-tree index does). Entries are (value, document) for every finite number
 * the field held in some version of a document: a superset, as the postings
 * are, so readers check each document's visible version.
 */
export interface RangeIndex {
  prefix: string[];
  field: string;
  /** The canonical values of `prefix` to that group's entries. */
  groups: Map<string, RangeGroup>;
  /**
   * Documents of no group: a prefix field missing or met through an array.
   * Every reader of the index takes them as candidates.
   */
  loose: Set<string>;
}

/** The entries of one value of a {@link RangeIndex}'s leading fields. */
export interface RangeGroup {
  /** The field's finite numbers in ascending order, and beside each its document. */
  values: number[];
  ids: string[];
  /** Documents whose field held something else (missing, text, an array): every reader of the group takes them. */
  loose: Set<string>;
}

/**
 * Where a document's entry of a {@link RangeIndex} is, to take it out again:
 * the group's key (none: the index's loose set) and the value (none: the
 * group's loose set).
 */
type RangeEntry = [RangeIndex, string | undefined, number | undefined];

/** The index of the first entry of `values` (ascending) above `value`, or at or above it when `inclusive`. */
export function boundIndex(values: readonly number[], value: number, inclusive: boolean): number {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    const at = values[middle] as number;
    if (at < value || (!inclusive && at === value)) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** What a query on each path of one document considers ({@link pathValues}), each path read once. */
type PathReader = (path: string) => { values: unknown[]; missing: boolean };

function pathReader(doc: Doc): PathReader {
  const read = new Map<string, { values: unknown[]; missing: boolean }>();
  return (path) => {
    let found = read.get(path);
    if (!found) {
      found = pathValues(doc, path.split('.'));
      read.set(path, found);
    }
    return found;
  };
}

/** The single plain value at `path`, or undefined when it is missing or met through an array. */
function plainValue(at: PathReader, path: string): { value: unknown } | undefined {
  const { values, missing } = at(path);
  if (missing || values.length !== 1 || Array.isArray(values[0])) return undefined;
  return { value: values[0] };
}

/** The key of a range index's group for the prefix values `values`. */
export function groupKeyOf(values: readonly unknown[]): string {
  return canonical(values);
}

interface Version {
  ts: number;
  doc: Doc | null;
}

/** One collection's data: every document's versions, oldest first, and its indexes. */
export class Collection {
  readonly ns: string;
  readonly versions = new Map<string, Version[]>();
  readonly indexes: IndexInfo[] = [{ name: '_id_', key: { _id: 1 }, unique: true }];
  /** For each unique secondary index: index key to the id key of the latest committed holder. */
  readonly uniqueKeys = new Map<string, Map<string, string>>();
  /**
   * Equality lookup on each field of each secondary index: value to the ids
   * of documents that held it in some version (a superset; readers check
   * each candidate's visible version against the whole filter).
   */
  readonly postings = new Map<string, Map<string, Set<string>>>();
  readonly #posted = new Map<string, Array<[string, string]>>();
  /** By index name, each compound secondary index's order of its last field (see {@link RangeIndex}). */
  readonly ranges = new Map<string, RangeIndex>();
  readonly #ranged = new Map<string, RangeEntry[]>();
  /** The transaction that created this collection, until it commits. */
  pendingCreator: Transaction | undefined;

  constructor(ns: string) {
    this.ns = ns;
  }

  indexField(path: string): void {
    if (path === '_id' || this.postings.has(path)) return;
    this.postings.set(path, new Map());
    for (const [idKey, chain] of this.versions)
      for (const version of chain) if (version.doc) this.post(idKey, version.doc);
  }

  /** Keeps the order of `index`'s last field (a compound index's) from now on, for every version stored. */
  rangeIndex(index: IndexInfo): void {
    const paths = Object.keys(index.key);
    if (paths.length < 2 || paths.includes('_id') || this.ranges.has(index.name)) return;
    const range: RangeIndex = {
      prefix: paths.slice(0, -1),
      field: paths[paths.length - 1] as string,
      groups: new Map(),
      loose: new Set(),
    };
    this.ranges.set(index.name, range);
    for (const [idKey, chain] of this.versions)
      for (const version of chain) if (version.doc) this.#postRange(range, idKey, pathReader(version.doc));
  }

  #postRange(range: RangeIndex, idKey: string, at: PathReader): void {
    let entries = this.#ranged.get(idKey);
    if (!entries) {
      entries = [];
      this.#ranged.set(idKey, entries);
    }
    const prefix: unknown[] = [];
    for (const path of range.prefix) {
      const plain = plainValue(at, path);
      if (!plain) break;
      prefix.push(plain.value);
    }
    if (prefix.length < range.prefix.length) {
      if (!range.loose.has(idKey)) {
        range.loose.add(idKey);
        entries.push([range, undefined, undefined]);
      }
      return;
    }
    const key = groupKeyOf(prefix);
    let group = range.groups.get(key);
    if (!group) {
      group = { values: [], ids: [], loose: new Set() };
      range.groups.set(key, group);
    }
    const field = plainValue(at, range.field);
    if (typeof field?.value !== 'number' || !Number.isFinite(field.value)) {
      if (!group.loose.has(idKey)) {
        group.loose.add(idKey);
        entries.push([range, key, undefined]);
      }
      return;
    }
    const value = field.value;
    const from = boundIndex(group.values, value, true);
    const to = boundIndex(group.values, value, false);
    for (let at = from; at < to; at++) if (group.ids[at] === idKey) return;
    group.values.splice(to, 0, value);
    group.ids.splice(to, 0, idKey);
    entries.push([range, key, value]);
  }

  post(idKey: string, doc: Doc): void {
    const at = pathReader(doc);
    for (const range of this.ranges.values()) this.#postRange(range, idKey, at);
    for (const [path, byValue] of this.postings) {
      // Every value an equality on `path` can match: array elements too, and null when missing.
      const { values, missing } = at(path);
      const keys = new Set(values.map((value) => canonical(value)));
      if (missing || values.length === 0) keys.add(canonical(null));
      for (const valueKey of keys) {
        let ids = byValue.get(valueKey);
        if (!ids) {
          ids = new Set();
          byValue.set(valueKey, ids);
        }
        if (ids.has(idKey)) continue;
        ids.add(idKey);
        let posted = this.#posted.get(idKey);
        if (!posted) {
          posted = [];
          this.#posted.set(idKey, posted);
        }
        posted.push([path, valueKey]);
      }
    }
  }

  unpost(idKey: string): void {
    for (const [path, valueKey] of this.#posted.get(idKey) ?? []) {
      const ids = this.postings.get(path)?.get(valueKey);
      ids?.delete(idKey);
      if (ids?.size === 0) this.postings.get(path)?.delete(valueKey);
    }
    this.#posted.delete(idKey);
    for (const [range, key, value] of this.#ranged.get(idKey) ?? []) {
      if (key === undefined) {
        range.loose.delete(idKey);
        continue;
      }
      const group = range.groups.get(key);
      if (!group) continue;
      if (value === undefined) group.loose.delete(idKey);
      else {
        const to = boundIndex(group.values, value, false);
        for (let at = boundIndex(group.values, value, true); at < to; at++) {
          if (group.ids[at] !== idKey) continue;
          group.values.splice(at, 1);
          group.ids.splice(at, 1);
          break;
        }
      }
      if (group.ids.length === 0 && group.loose.size === 0) range.groups.delete(key);
    }
    this.#ranged.delete(idKey);
  }

  latest(idKey: string): Version | undefined {
    const chain = this.versions.get(idKey);
    return chain?.[chain.length - 1];
  }

  visible(idKey: string, snapshot: number): Doc | null {
    const chain = this.versions.get(idKey);
    if (!chain) return null;
    for (let i = chain.length - 1; i >= 0; i--) {
      const version = chain[i] as Version;
      if (version.ts <= snapshot) return version.doc;
    }
    return null;
  }
}

/** Thrown to a write outside a transaction that must wait for an open transaction's lock. */
export class Blocked extends Error {}

let nextTxnId = 1;

export class Transaction {
  readonly id = nextTxnId++;
  readonly snapshot: number;
  /** 'multi' for a client's multi-document transaction; 'auto' for one statement outside any. */
  readonly kind: 'multi' | 'auto';
  readonly startedAt = Date.now();
  readonly writes = new Map<string, Map<string, Doc | null>>();
  state: 'active' | 'committed' | 'aborted' = 'active';

  constructor(snapshot: number, kind: 'multi' | 'auto') {
    this.snapshot = snapshot;
    this.kind = kind;
  }

  ownWrites(ns: string): Map<string, Doc | null> | undefined {
    return this.writes.get(ns);
  }
}

export function idKeyOf(id: unknown): string {
  return canonical(id);
}

function uniqueKeyOf(index: IndexInfo, doc: Doc): string {
  return canonical(Object.keys(index.key).map((path) => getPath(doc, path) ?? null));
}

export class Engine {
  clock = 0;
  readonly collections = new Map<string, Collection>();
  readonly active = new Set<Transaction>();
  /** `ns` NUL `idKey` to the open transaction that wrote it. */
  readonly locks = new Map<string, Transaction>();

  collection(ns: string): Collection | undefined {
    return this.collections.get(ns);
  }

  /** The collection, created (by `txn`, if any) when it does not exist. */
  ensureCollection(ns: string, txn?: Transaction): Collection {
    let collection = this.collections.get(ns);
    if (!collection) {
      collection = new Collection(ns);
      if (txn?.kind === 'multi') collection.pendingCreator = txn;
      this.collections.set(ns, collection);
    }
    return collection;
  }

  /** True when the collection exists for a reader of `txn` (or for everyone). */
  exists(ns: string, txn?: Transaction): boolean {
    const collection = this.collections.get(ns);
    if (!collection) return false;
    return collection.pendingCreator === undefined || collection.pendingCreator === txn;
  }

  begin(kind: 'multi' | 'auto'): Transaction {
    const txn = new Transaction(this.clock, kind);
    this.active.add(txn);
    return txn;
  }

  /** The documents of `ns` that `txn` (or a reader outside any transaction) sees, in natural order. */
  scan(ns: string, txn?: Transaction): Doc[] {
    const collection = this.collections.get(ns);
    const own = txn?.ownWrites(ns);
    const snapshot = txn ? txn.snapshot : this.clock;
    const result: Doc[] = [];
    if (collection) {
      for (const idKey of collection.versions.keys()) {
        if (own?.has(idKey)) continue;
        const doc = collection.visible(idKey, snapshot);
        if (doc) result.push(doc);
      }
    }
    if (own) for (const doc of own.values()) if (doc) result.push(doc);
    return result;
  }

  /**
   * How many documents may hold `value` at `path`, by the index postings
   * (a bound, for choosing the narrowest lookup); undefined when no index has `path`.
   */
  postingCount(ns: string, path: string, value: unknown): number | undefined {
    const ids = this.collections.get(ns)?.postings.get(path);
    return ids ? (ids.get(canonical(value))?.size ?? 0) : undefined;
  }

  /**
   * The documents `txn` sees whose `path` may equal `value`, through the
   * index postings; undefined when no index has `path`.
   */
  candidates(ns: string, path: string, value: unknown, txn?: Transaction): Doc[] | undefined {
    const collection = this.collections.get(ns);
    const ids = collection?.postings.get(path);
    if (!collection || !ids) return undefined;
    const own = txn?.ownWrites(ns);
    const snapshot = txn ? txn.snapshot : this.clock;
    const result: Doc[] = [];
    for (const idKey of ids.get(canonical(value)) ?? []) {
      if (own?.has(idKey)) continue;
      const doc = collection.visible(idKey, snapshot);
      if (doc) result.push(doc);
    }
    if (own) for (const doc of own.values()) if (doc) result.push(doc);
    return result;
  }

  /** One document by `_id`, as `txn` (or a reader outside any transaction) sees it. */
  get(ns: string, id: unknown, txn?: Transaction): Doc | null {
    const idKey = idKeyOf(id);
    const own = txn?.ownWrites(ns);
    if (own?.has(idKey)) return own.get(idKey) ?? null;
    const collection = this.collections.get(ns);
    if (!collection) return null;
    return collection.visible(idKey, txn ? txn.snapshot : this.clock);
  }

  /**
   * Writes `doc` (or deletes, with null) the document `idKey` of `ns` in
   * `txn`. `inserting` makes an existing document a duplicate key.
   */
  write(ns: string, idKey: string, doc: Doc | null, txn: Transaction, inserting: boolean): void {
    const collection = this.ensureCollection(ns, txn);
    const lockKey = `${ns}\u0000${idKey}`;
    const holder = this.locks.get(lockKey);
    if (holder && holder !== txn) this.#conflict(txn);
    const latest = collection.latest(idKey);
    if (latest && latest.ts > txn.snapshot) this.#conflict(txn);
    if (inserting) {
      const current = txn.ownWrites(ns)?.has(idKey)
        ? txn.ownWrites(ns)?.get(idKey)
        : collection.visible(idKey, txn.snapshot);
      if (current) throw errors.duplicateKey(ns, '_id_', `{ _id: ${idKey} }`);
    }
    if (doc) {
      const bytes = BSON.calculateObjectSize(doc);
      if (bytes > MAX_DOCUMENT_BYTES) throw errors.documentTooLarge(bytes, inserting);
      this.#checkUnique(collection, idKey, doc, txn);
    }
    this.locks.set(lockKey, txn);
    let own = txn.writes.get(ns);
    if (!own) {
      own = new Map();
      txn.writes.set(ns, own);
    }
    own.set(idKey, doc);
  }

  #conflict(txn: Transaction): never {
    if (txn.kind === 'multi') throw errors.writeConflict();
    throw new Blocked();
  }

  #checkUnique(collection: Collection, idKey: string, doc: Doc, txn: Transaction): void {
    for (const index of collection.indexes) {
      if (!index.unique || index.name === '_id_') continue;
      const key = uniqueKeyOf(index, doc);
      const own = txn.ownWrites(collection.ns);
      if (own) {
        for (const [otherId, other] of own) {
          if (otherId !== idKey && other && uniqueKeyOf(index, other) === key) {
            throw errors.duplicateKey(collection.ns, index.name, key);
          }
        }
      }
      const holder = collection.uniqueKeys.get(index.name)?.get(key);
      if (holder !== undefined && holder !== idKey && !own?.has(holder)) {
        const latest = collection.latest(holder);
        if (latest && latest.ts > txn.snapshot) this.#conflict(txn);
        throw errors.duplicateKey(collection.ns, index.name, key);
      }
      for (const other of this.active) {
        if (other === txn) continue;
        for (const [otherId, otherDoc] of other.ownWrites(collection.ns) ?? []) {
          if (otherId !== idKey && otherDoc && uniqueKeyOf(index, otherDoc) === key) this.#conflict(txn);
        }
      }
    }
  }

  commit(txn: Transaction): void {
    if (txn.state !== 'active') return;
    txn.state = 'committed';
    this.active.delete(txn);
    if (txn.writes.size > 0) {
      const ts = ++this.clock;
      for (const [ns, own] of txn.writes) {
        const collection = this.ensureCollection(ns);
        for (const [idKey, doc] of own) {
          const previous = collection.latest(idKey)?.doc ?? null;
          let chain = collection.versions.get(idKey);
          if (!chain) {
            chain = [];
            collection.versions.set(idKey, chain);
          }
          chain.push({ ts, doc });
          if (doc) collection.post(idKey, doc);
          for (const index of collection.indexes) {
            if (!index.unique || index.name === '_id_') continue;
            const keys = collection.uniqueKeys.get(index.name) as Map<string, string>;
            if (previous) {
              const oldKey = uniqueKeyOf(index, previous);
              if (keys.get(oldKey) === idKey) keys.delete(oldKey);
            }
            if (doc) keys.set(uniqueKeyOf(index, doc), idKey);
          }
          this.locks.delete(`${ns}\u0000${idKey}`);
        }
      }
    }
    for (const collection of this.collections.values()) {
      if (collection.pendingCreator === txn) collection.pendingCreator = undefined;
    }
    this.#prune(txn);
  }

  abort(txn: Transaction): void {
    if (txn.state !== 'active') return;
    txn.state = 'aborted';
    this.active.delete(txn);
    for (const [ns, own] of txn.writes) {
      for (const idKey of own.keys()) {
        if (this.locks.get(`${ns}\u0000${idKey}`) === txn) this.locks.delete(`${ns}\u0000${idKey}`);
      }
    }
    txn.writes.clear();
    for (const [ns, collection] of this.collections) {
      if (collection.pendingCreator === txn) this.collections.delete(ns);
    }
  }

  /** Drops the versions of the documents `txn` wrote that no open snapshot can see any more. */
  #prune(txn: Transaction): void {
    let horizon = this.clock;
    for (const open of this.active) horizon = Math.min(horizon, open.snapshot);
    for (const [ns, own] of txn.writes) {
      const collection = this.collections.get(ns);
      if (!collection) continue;
      for (const idKey of own.keys()) {
        const chain = collection.versions.get(idKey);
        if (!chain) continue;
        let keepFrom = 0;
        for (let i = chain.length - 1; i >= 0; i--) {
          if ((chain[i] as Version).ts <= horizon) {
            keepFrom = i;
            break;
          }
        }
        if (keepFrom > 0) chain.splice(0, keepFrom);
        const only = chain[0];
        if (chain.length === 1 && only && only.doc === null && only.ts <= horizon) {
          collection.versions.delete(idKey);
          collection.unpost(idKey);
        }
      }
    }
  }

  /** Adds an index (building unique keys from the committed documents); false when it already exists. */
  createIndex(ns: string, spec: IndexInfo): boolean {
    const collection = this.ensureCollection(ns);
    // A catalog change outside any transaction makes the collection exist for everyone.
    collection.pendingCreator = undefined;
    const same = collection.indexes.find((index) => index.name === spec.name);
    const sameKey = collection.indexes.find((index) => canonical(index.key) === canonical(spec.key));
    if (same) {
      const identical =
        canonical(same.key) === canonical(spec.key) &&
        same.unique === spec.unique &&
        same.expireAfterSeconds === spec.expireAfterSeconds;
      if (identical) return false;
      if (canonical(same.key) !== canonical(spec.key)) {
        throw errors.indexKeySpecsConflict(
          `An existing index has the same name as the requested index. Requested index: ${spec.name}, existing index: ${same.name}`,
        );
      }
      throw errors.indexOptionsConflict(
        `An equivalent index already exists with the same name but different options. Requested index: ${spec.name}`,
      );
    }
    if (sameKey) {
      throw errors.indexOptionsConflict(`Index already exists with a different name: ${sameKey.name}`);
    }
    if (spec.unique) {
      const keys = new Map<string, string>();
      for (const [idKey] of collection.versions) {
        const doc = collection.latest(idKey)?.doc;
        if (!doc) continue;
        const key = uniqueKeyOf(spec, doc);
        if (keys.has(key)) throw errors.duplicateKey(ns, spec.name, key);
        keys.set(key, idKey);
      }
      collection.uniqueKeys.set(spec.name, keys);
    }
    collection.indexes.push(spec);
    for (const path of Object.keys(spec.key)) collection.indexField(path);
    collection.rangeIndex(spec);
    return true;
  }

  drop(ns: string): boolean {
    const collection = this.collections.get(ns);
    if (!collection) return false;
    for (const txn of this.active) {
      if (txn.writes.has(ns)) this.abort(txn);
    }
    this.collections.delete(ns);
    return true;
  }

  /**
   * One pass of the TTL monitor at `now`: removes every document whose TTL
   * field holds a date at least `expireAfterSeconds` in the past. Documents
   * locked by an open transaction wait for the next pass. Returns the count.
   */
  expire(now: Date): number {
    let removed = 0;
    for (const collection of [...this.collections.values()]) {
      for (const index of collection.indexes) {
        const fields = Object.keys(index.key);
        if (index.expireAfterSeconds === undefined || fields.length !== 1) continue;
        const field = fields[0] as string;
        for (const [idKey, chain] of collection.versions) {
          const doc = chain[chain.length - 1]?.doc;
          if (!doc) continue;
          const value = getPath(doc, field);
          const dates = (Array.isArray(value) ? value : [value]).filter((v): v is Date => v instanceof Date);
          if (dates.length === 0) continue;
          const earliest = Math.min(...dates.map((d) => d.getTime()));
          if (earliest + index.expireAfterSeconds * 1000 > now.getTime()) continue;
          const txn = this.begin('auto');
          try {
            this.write(collection.ns, idKey, null, txn, false);
            this.commit(txn);
            removed++;
          } catch (error) {
            this.abort(txn);
            if (!(error instanceof Blocked) && !(error instanceof CommandError)) throw error;
          }
        }
      }
    }
    return removed;
  }
}
