/**
 * The database commands of the stand-in: CRUD, cursors, the aggregation
 * stages it supports, and index management. Each reads and writes through
 * the storage engine in the caller's transaction, or in a one-statement
 * transaction of its own outside any.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BSON, Long, ObjectId } from 'bson';
import { CommandError, errors, MAX_DOCUMENT_BYTES } from './errors.js';
import { evaluate } from './expressions.js';
import { applyUpdate, matches, project, sortComparator, upsertSeed, validateFilter, validateUpdate } from './query.js';
import { selectByRange, type Wanted } from './ranges.js';
import { Blocked, type Engine, type IndexInfo, idKeyOf, type Transaction } from './storage.js';
import { clone, type Doc, defineField, getPath, isDocument, valuesEqual } from './values.js';

/** MongoDB's limit for one reply document, less room for the envelope. */
const MAX_BATCH_BYTES = MAX_DOCUMENT_BYTES - 16 * 1024;
const DEFAULT_FIRST_BATCH = 101;
/** How long a write outside a transaction waits for a transaction's lock. */
const LOCK_WAIT_MS = 30_000;

interface OpenCursor {
  ns: string;
  docs: Doc[];
  position: number;
  txn: Transaction | undefined;
  lastUsed: number;
}

export interface CommandContext {
  engine: Engine;
  db: string;
  /** The client's open multi-document transaction, when the command runs in one. */
  txn: Transaction | undefined;
  cursors: Map<string, OpenCursor>;
  /** The command's `maxTimeMS`, when it gives one: how long it may wait for a lock. */
  maxTimeMS?: number;
  /** The server version the stand-in reports, e.g. `7.0.0`. */
  version: string;
}

export type Handler = (body: Doc, ctx: CommandContext) => Doc | Promise<Doc>;

/** Commands a multi-document transaction may run. */
export const TRANSACTION_COMMANDS = new Set([
  'find',
  'getMore',
  'killCursors',
  'insert',
  'update',
  'delete',
  'findAndModify',
  'aggregate',
  'bulkWrite',
  'commitTransaction',
  'abortTransaction',
]);

function collectionName(body: Doc, command: string): string {
  const name = body[command];
  if (typeof name !== 'string' || name === '') {
    throw errors.invalidNamespace(`collection name has invalid type ${typeof name}`);
  }
  if (name.includes('$') || name.includes('\u0000') || name.startsWith('system.')) {
    throw errors.invalidNamespace(`Invalid collection name: ${name}`);
  }
  return name;
}

function nsOf(ctx: CommandContext, collection: string): string {
  return `${ctx.db}.${collection}`;
}

function asDoc(value: unknown, what: string): Doc | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isDocument(value)) throw errors.typeMismatch(`${what} must be an object`);
  return value;
}

function asCount(value: unknown, what: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isInteger(n) || n < 0) throw errors.badValue(`${what} must be a non-negative integer`);
  return n;
}

/**
 * The documents of `ns` matching `filter`, looked up by `_id` when the filter
 * pins it, else through a compound index's order when one serves the filter
 * (`wanted`: the find's sort and limit, to stop early), else by the
 * narrowest equality posting.
 */
function select(ctx: CommandContext, ns: string, filter: Doc | undefined, wanted?: Wanted): Doc[] {
  validateFilter(filter);
  const id = filter?._id;
  if (filter && id !== undefined && !(isDocument(id) && Object.keys(id)[0]?.startsWith('$'))) {
    const doc = ctx.engine.get(ns, id, ctx.txn);
    return doc && matches(doc, filter) ? [doc] : [];
  }
  if (filter && isDocument(id) && Array.isArray(id.$in) && Object.keys(id).length === 1) {
    const found: Doc[] = [];
    const seen = new Set<string>();
    for (const candidate of id.$in) {
      const key = idKeyOf(candidate);
      if (seen.has(key)) continue;
      seen.add(key);
      const doc = ctx.engine.get(ns, candidate, ctx.txn);
      if (doc && matches(doc, filter)) found.push(doc);
    }
    return found;
  }
  const collection = ctx.engine.collection(ns);
  if (filter && collection && collection.ranges.size > 0) {
    const snapshot = ctx.txn ? ctx.txn.snapshot : ctx.engine.clock;
    const ranged = selectByRange(collection, filter, snapshot, ctx.txn, wanted);
    if (ranged) return ranged;
  }
  if (filter) {
    // The narrowest equality an index has a field for.
    let best: { path: string; value: unknown; count: number } | undefined;
    for (const path of Object.keys(filter)) {
      const condition = filter[path];
      if (path.startsWith('$')) continue;
      let pinned: unknown = condition;
      if (isDocument(condition) && Object.keys(condition)[0]?.startsWith('$')) {
        if (!Object.hasOwn(condition, '$eq')) continue;
        pinned = condition.$eq;
      }
      const count = ctx.engine.postingCount(ns, path, pinned);
      if (count !== undefined && (best === undefined || count < best.count)) best = { path, value: pinned, count };
    }
    if (best) {
      const candidates = ctx.engine.candidates(ns, best.path, best.value, ctx.txn) as Doc[];
      return candidates.filter((doc) => matches(doc, filter));
    }
  }
  return ctx.engine.scan(ns, ctx.txn).filter((doc) => matches(doc, filter));
}

/**
 * Runs `statement` in the caller's transaction, or outside any in a
 * one-statement transaction that waits (as MongoDB does) while an open
 * transaction holds a document it must write.
 */
async function writeStatement<T>(ctx: CommandContext, statement: (txn: Transaction) => T): Promise<T> {
  if (ctx.txn) return statement(ctx.txn);
  const deadline = Date.now() + Math.min(LOCK_WAIT_MS, ctx.maxTimeMS ?? LOCK_WAIT_MS);
  for (;;) {
    const txn = ctx.engine.begin('auto');
    try {
      const result = statement(txn);
      ctx.engine.commit(txn);
      return result;
    } catch (error) {
      ctx.engine.abort(txn);
      if (!(error instanceof Blocked)) throw error;
      if (Date.now() > deadline) throw errors.maxTimeExpired();
      await sleep(2);
    }
  }
}

function withIdFirst(doc: Doc): Doc {
  if (Object.keys(doc)[0] === '_id') return doc;
  const ordered: Doc = { _id: doc._id };
  for (const key of Object.keys(doc)) if (key !== '_id') defineField(ordered, key, doc[key]);
  return ordered;
}

function ensureId(doc: Doc): Doc {
  const withId = doc._id === undefined ? { _id: new ObjectId(), ...doc } : doc;
  if (Array.isArray(withId._id)) throw errors.badValue("The '_id' value cannot be of type array");
  return withIdFirst(withId);
}

function writeError(index: number, error: CommandError): Doc {
  return { index, code: error.code, codeName: error.codeName, errmsg: error.message };
}

/** Write errors become `writeErrors` entries outside a transaction; inside one they abort it. */
function isStatementError(error: unknown): error is CommandError {
  return error instanceof CommandError && error.code !== 112;
}

function makeCursor(ctx: CommandContext, ns: string, docs: Doc[], batchSize: number | undefined, single: boolean): Doc {
  const firstBatch = takeBatch(docs, 0, batchSize ?? DEFAULT_FIRST_BATCH);
  let id = Long.ZERO;
  if (firstBatch.length < docs.length && !single) {
    id = Long.fromBigInt(BigInt.asIntN(64, (BigInt(Date.now()) << 20n) | BigInt(Math.floor(Math.random() * 2 ** 20))));
    if (id.isNegative()) id = id.negate();
    ctx.cursors.set(id.toString(), { ns, docs, position: firstBatch.length, txn: ctx.txn, lastUsed: Date.now() });
  }
  return { cursor: { firstBatch, id, ns }, ok: 1 };
}

function takeBatch(docs: Doc[], from: number, count: number): Doc[] {
  const batch: Doc[] = [];
  let bytes = 0;
  for (let i = from; i < docs.length && batch.length < (count === 0 ? Number.POSITIVE_INFINITY : count); i++) {
    const doc = docs[i] as Doc;
    const size = BSON.calculateObjectSize(doc);
    if (batch.length > 0 && bytes + size > MAX_BATCH_BYTES) break;
    batch.push(doc);
    bytes += size;
  }
  return batch;
}

function find(body: Doc, ctx: CommandContext): Doc {
  const ns = nsOf(ctx, collectionName(body, 'find'));
  const sort = asDoc(body.sort, 'sort');
  const skip = asCount(body.skip, 'skip') ?? 0;
  const limit = asCount(body.limit, 'limit');
  const count = limit === undefined || limit === 0 ? undefined : skip + limit;
  let docs = select(ctx, ns, asDoc(body.filter, 'filter'), { sort, count });
  if (sort && Object.keys(sort).length > 0) docs = [...docs].sort(sortComparator(sort));
  docs = docs.slice(skip, count);
  const projection = asDoc(body.projection, 'projection');
  docs = docs.map((doc) => project(doc, projection));
  return makeCursor(ctx, ns, docs, asCount(body.batchSize, 'batchSize'), body.singleBatch === true);
}

function getMore(body: Doc, ctx: CommandContext): Doc {
  const id = String(body.getMore);
  const cursor = ctx.cursors.get(id);
  if (!cursor || cursor.txn !== ctx.txn) throw errors.cursorNotFound(id);
  const batch = takeBatch(cursor.docs, cursor.position, asCount(body.batchSize, 'batchSize') ?? 0);
  cursor.position += batch.length;
  cursor.lastUsed = Date.now();
  let next = Long.fromString(id);
  if (cursor.position >= cursor.docs.length) {
    ctx.cursors.delete(id);
    next = Long.ZERO;
  }
  return { cursor: { nextBatch: batch, id: next, ns: cursor.ns }, ok: 1 };
}

function killCursors(body: Doc, ctx: CommandContext): Doc {
  const ids = Array.isArray(body.cursors) ? body.cursors : [];
  const killed: unknown[] = [];
  const notFound: unknown[] = [];
  for (const id of ids) {
    if (ctx.cursors.delete(String(id))) killed.push(id);
    else notFound.push(id);
  }
  return { cursorsKilled: killed, cursorsNotFound: notFound, cursorsAlive: [], cursorsUnknown: [], ok: 1 };
}

/** One insert statement: the document, with an `_id` made when it has none. */
async function insertStatement(ctx: CommandContext, ns: string, raw: unknown): Promise<void> {
  if (!isDocument(raw)) throw errors.typeMismatch('each document must be an object');
  const doc = ensureId(clone(raw));
  await writeStatement(ctx, (txn) => ctx.engine.write(ns, idKeyOf(doc._id), doc, txn, true));
}

async function insert(body: Doc, ctx: CommandContext): Promise<Doc> {
  const ns = nsOf(ctx, collectionName(body, 'insert'));
  const documents = body.documents;
  if (!Array.isArray(documents)) throw errors.typeMismatch('documents must be an array');
  const ordered = body.ordered !== false;
  let n = 0;
  const writeErrors: Doc[] = [];
  for (let index = 0; index < documents.length; index++) {
    try {
      await insertStatement(ctx, ns, documents[index]);
      n++;
    } catch (error) {
      if (!isStatementError(error) || ctx.txn) throw error;
      writeErrors.push(writeError(index, error));
      if (ordered) break;
    }
  }
  return { n, ...(writeErrors.length > 0 ? { writeErrors } : {}), ok: 1 };
}

/** One update statement: returns matched, modified and the upserted id. */
function updateOne(
  ctx: CommandContext,
  ns: string,
  txn: Transaction,
  filter: Doc | undefined,
  update: unknown,
  options: { multi: boolean; upsert: boolean; sort?: Doc },
): { matched: number; modified: number; upserted?: unknown; before: Doc | null; after: Doc | null } {
  validateUpdate(update);
  const reader: CommandContext = { ...ctx, txn };
  let found = select(reader, ns, filter);
  if (options.sort && Object.keys(options.sort).length > 0) found = [...found].sort(sortComparator(options.sort));
  if (!options.multi) found = found.slice(0, 1);
  if (found.length === 0) {
    if (!options.upsert) return { matched: 0, modified: 0, before: null, after: null };
    const seed = upsertSeed(filter);
    const created = ensureId(applyUpdate(seed, update, true));
    if (seed._id !== undefined && !valuesEqual(seed._id, created._id)) throw errors.immutableField('_id');
    ctx.engine.write(ns, idKeyOf(created._id), created, txn, true);
    return { matched: 0, modified: 0, upserted: created._id, before: null, after: created };
  }
  let modified = 0;
  let last: { before: Doc; after: Doc } | undefined;
  for (const doc of found) {
    const next = withIdFirst(applyUpdate(doc, update, false));
    if (!valuesEqual(next, doc)) {
      ctx.engine.write(ns, idKeyOf(doc._id), next, txn, false);
      modified++;
    }
    last = { before: doc, after: next };
  }
  return { matched: found.length, modified, before: last?.before ?? null, after: last?.after ?? null };
}

/** One update statement, in the caller's transaction or a one-statement transaction of its own. */
function updateStatement(
  ctx: CommandContext,
  ns: string,
  filter: Doc | undefined,
  update: unknown,
  options: { multi: boolean; upsert: boolean },
): Promise<ReturnType<typeof updateOne>> {
  return writeStatement(ctx, (txn) => updateOne(ctx, ns, txn, filter, update, options));
}

async function update(body: Doc, ctx: CommandContext): Promise<Doc> {
  const ns = nsOf(ctx, collectionName(body, 'update'));
  const statements = body.updates;
  if (!Array.isArray(statements)) throw errors.typeMismatch('updates must be an array');
  const ordered = body.ordered !== false;
  let n = 0;
  let nModified = 0;
  const upserted: Doc[] = [];
  const writeErrors: Doc[] = [];
  for (let index = 0; index < statements.length; index++) {
    const statement = statements[index] as Doc;
    try {
      if (statement.arrayFilters !== undefined) throw errors.badValue('arrayFilters are not supported by the stand-in');
      const result = await updateStatement(ctx, ns, asDoc(statement.q, 'q'), statement.u, {
        multi: statement.multi === true,
        upsert: statement.upsert === true,
      });
      n += result.matched;
      nModified += result.modified;
      if (result.upserted !== undefined) {
        n += 1;
        upserted.push({ index, _id: result.upserted });
      }
    } catch (error) {
      if (!isStatementError(error) || ctx.txn) throw error;
      writeErrors.push(writeError(index, error));
      if (ordered) break;
    }
  }
  return {
    n,
    nModified,
    ...(upserted.length > 0 ? { upserted } : {}),
    ...(writeErrors.length > 0 ? { writeErrors } : {}),
    ok: 1,
  };
}

/** One delete statement (of every match, or of the first when not `multi`); returns how many it removed. */
function deleteStatement(ctx: CommandContext, ns: string, filter: Doc | undefined, multi: boolean): Promise<number> {
  return writeStatement(ctx, (txn) => {
    let found = select({ ...ctx, txn }, ns, filter);
    if (!multi) found = found.slice(0, 1);
    for (const doc of found) ctx.engine.write(ns, idKeyOf(doc._id), null, txn, false);
    return found.length;
  });
}

async function remove(body: Doc, ctx: CommandContext): Promise<Doc> {
  const ns = nsOf(ctx, collectionName(body, 'delete'));
  const statements = body.deletes;
  if (!Array.isArray(statements)) throw errors.typeMismatch('deletes must be an array');
  let n = 0;
  const writeErrors: Doc[] = [];
  for (let index = 0; index < statements.length; index++) {
    const statement = statements[index] as Doc;
    try {
      n += await deleteStatement(ctx, ns, asDoc(statement.q, 'q'), statement.limit !== 1);
    } catch (error) {
      if (!isStatementError(error) || ctx.txn) throw error;
      writeErrors.push(writeError(index, error));
      if (body.ordered !== false) break;
    }
  }
  return { n, ...(writeErrors.length > 0 ? { writeErrors } : {}), ok: 1 };
}

async function findAndModify(body: Doc, ctx: CommandContext): Promise<Doc> {
  const ns = nsOf(ctx, collectionName(body, 'findAndModify'));
  const query = asDoc(body.query, 'query');
  const sort = asDoc(body.sort, 'sort');
  const fields = asDoc(body.fields, 'fields');
  if (body.remove === true) {
    const removed = await writeStatement(ctx, (txn) => {
      let found = select({ ...ctx, txn }, ns, query);
      if (sort && Object.keys(sort).length > 0) found = [...found].sort(sortComparator(sort));
      const doc = found[0];
      if (doc) ctx.engine.write(ns, idKeyOf(doc._id), null, txn, false);
      return doc ?? null;
    });
    return { lastErrorObject: { n: removed ? 1 : 0 }, value: removed ? project(removed, fields) : null, ok: 1 };
  }
  if (body.update === undefined) throw errors.badValue('Either an update or remove=true must be specified');
  const result = await writeStatement(ctx, (txn) =>
    updateOne(ctx, ns, txn, query, body.update, {
      multi: false,
      upsert: body.upsert === true,
      ...(sort ? { sort } : {}),
    }),
  );
  const chosen = body.new === true ? result.after : result.before;
  const lastErrorObject: Doc = { n: result.matched + (result.upserted !== undefined ? 1 : 0) };
  lastErrorObject.updatedExisting = result.matched > 0;
  if (result.upserted !== undefined) lastErrorObject.upserted = result.upserted;
  return { lastErrorObject, value: chosen ? project(chosen, fields) : null, ok: 1 };
}

/** One operation of a `bulkWrite` command, read from its `ops` entry. */
type BulkOp =
  | { kind: 'insert'; ns: string; document: unknown }
  | { kind: 'update'; ns: string; filter: Doc | undefined; update: unknown; multi: boolean; upsert: boolean }
  | { kind: 'delete'; ns: string; filter: Doc | undefined; multi: boolean };

const BULK_OP_FIELDS = {
  insert: new Set(['insert', 'document']),
  update: new Set(['update', 'filter', 'updateMods', 'multi', 'upsert']),
  delete: new Set(['delete', 'filter', 'multi']),
} as const;

/** The namespaces of a `bulkWrite`'s `nsInfo`, as `db.collection` strings checked as MongoDB checks them. */
function bulkNamespaces(nsInfo: unknown): string[] {
  if (!Array.isArray(nsInfo) || nsInfo.length === 0) throw errors.badValue('nsInfo must be a non-empty array');
  return nsInfo.map((entry) => {
    const info = asDoc(entry, 'nsInfo entry') ?? {};
    for (const field of Object.keys(info)) {
      if (field !== 'ns') throw errors.badValue(`nsInfo field ${field} is not supported by the stand-in`);
    }
    const ns = info.ns;
    const dot = typeof ns === 'string' ? ns.indexOf('.') : -1;
    if (typeof ns !== 'string' || dot <= 0)
      throw errors.invalidNamespace(`Invalid namespace specified '${String(ns)}'`);
    const db = ns.slice(0, dot);
    if (db === 'admin' || db === 'config' || db === 'local') {
      throw errors.invalidNamespace(`Cannot write to ${ns}: the stand-in writes user databases only`);
    }
    collectionName({ c: ns.slice(dot + 1) }, 'c');
    return ns;
  });
}

function bulkOp(entry: unknown, namespaces: string[]): BulkOp {
  const op = asDoc(entry, 'ops entry') ?? {};
  const kind = Object.keys(op)[0];
  if (kind !== 'insert' && kind !== 'update' && kind !== 'delete') {
    throw errors.badValue(`Unrecognized bulkWrite operation: ${String(kind)}`);
  }
  for (const field of Object.keys(op)) {
    if (!BULK_OP_FIELDS[kind].has(field)) {
      throw errors.badValue(`bulkWrite ${kind} field ${field} is not supported by the stand-in`);
    }
  }
  const index = op[kind];
  const ns = typeof index === 'number' && Number.isInteger(index) ? namespaces[index] : undefined;
  if (ns === undefined) throw errors.badValue(`BulkWrite ops entry has an invalid nsInfo index: ${String(index)}`);
  if (kind === 'insert') return { kind, ns, document: op.document };
  const filter = asDoc(op.filter, 'filter');
  if (kind === 'delete') return { kind, ns, filter, multi: op.multi === true };
  return { kind, ns, filter, update: op.updateMods, multi: op.multi === true, upsert: op.upsert === true };
}

/**
 * MongoDB 8's `bulkWrite`: inserts, updates and deletes on any number of
 * collections in one command, run against `admin`. Inside a transaction its
 * operations are statements of that transaction: a failing one fails the
 * command and aborts the transaction, so nothing of it is ever applied (as
 * on MongoDB). Outside one, each operation stands alone; the ordered form
 * stops at the first failure. The reply is a cursor of per-operation
 * results (errors only, with `errorsOnly`) and the totals.
 */
async function bulkWrite(body: Doc, ctx: CommandContext): Promise<Doc> {
  if (ctx.db !== 'admin') throw errors.unauthorized('bulkWrite may only be run against the admin database.');
  if (body.let !== undefined) throw errors.badValue('bulkWrite with let is not supported by the stand-in');
  const namespaces = bulkNamespaces(body.nsInfo);
  if (!Array.isArray(body.ops) || body.ops.length === 0) throw errors.badValue('ops must be a non-empty array');
  const ops = body.ops.map((entry) => bulkOp(entry, namespaces));
  for (const op of ops) if (op.kind === 'update') validateUpdate(op.update);
  const ordered = body.ordered !== false;
  const errorsOnly = body.errorsOnly === true;
  const totals = { nErrors: 0, nInserted: 0, nMatched: 0, nModified: 0, nUpserted: 0, nDeleted: 0 };
  const replies: Doc[] = [];
  for (const [idx, op] of ops.entries()) {
    try {
      if (op.kind === 'insert') {
        await insertStatement(ctx, op.ns, op.document);
        totals.nInserted += 1;
        if (!errorsOnly) replies.push({ ok: 1, idx, n: 1 });
      } else if (op.kind === 'update') {
        const result = await updateStatement(ctx, op.ns, op.filter, op.update, { multi: op.multi, upsert: op.upsert });
        totals.nMatched += result.matched;
        totals.nModified += result.modified;
        if (result.upserted !== undefined) totals.nUpserted += 1;
        const n = result.matched + (result.upserted !== undefined ? 1 : 0);
        if (!errorsOnly) {
          replies.push({
            ok: 1,
            idx,
            n,
            nModified: result.modified,
            ...(result.upserted !== undefined ? { upserted: { _id: result.upserted } } : {}),
          });
        }
      } else {
        const n = await deleteStatement(ctx, op.ns, op.filter, op.multi);
        totals.nDeleted += n;
        if (!errorsOnly) replies.push({ ok: 1, idx, n });
      }
    } catch (error) {
      // In a transaction the failure fails the command, and the server aborts the transaction.
      if (!isStatementError(error) || ctx.txn) throw error;
      totals.nErrors += 1;
      replies.push({ ok: 0, idx, code: error.code, codeName: error.codeName, errmsg: error.message });
      if (ordered) break;
    }
  }
  // Every result in the first batch (within 16 MB) unless the client asks for smaller batches, as on MongoDB.
  const batchSize = asCount(asDoc(body.cursor, 'cursor')?.batchSize, 'batchSize') ?? 0;
  const reply = makeCursor(ctx, 'admin.$cmd.bulkWrite', replies, batchSize, false);
  return { cursor: reply.cursor, ...totals, ok: 1 };
}

function group(docs: Doc[], spec: Doc): Doc[] {
  if (!Object.hasOwn(spec, '_id')) throw errors.badValue('a group specification must include an _id');
  const groups = new Map<string, Doc>();
  for (const doc of docs) {
    const id = evaluate(doc, spec._id) ?? null;
    const key = idKeyOf(id);
    let current = groups.get(key);
    if (!current) {
      current = { _id: id };
      for (const field of Object.keys(spec)) {
        if (field === '_id') continue;
        const accumulator = spec[field] as Doc;
        const operator = isDocument(accumulator) ? Object.keys(accumulator)[0] : undefined;
        if (operator === '$sum') defineField(current, field, 0);
        else if (operator === '$push') defineField(current, field, []);
        else if (operator !== '$first' && operator !== '$min' && operator !== '$max') {
          throw errors.badValue(`accumulator ${String(operator)} is not supported by the stand-in`);
        }
      }
      groups.set(key, current);
    }
    for (const field of Object.keys(spec)) {
      if (field === '_id') continue;
      const accumulator = spec[field] as Doc;
      const [operator, argument] = Object.entries(accumulator)[0] as [string, unknown];
      const value = evaluate(doc, argument);
      if (operator === '$sum') {
        if (typeof value === 'number') current[field] = (current[field] as number) + value;
      } else if (operator === '$push') {
        (current[field] as unknown[]).push(value);
      } else if (operator === '$first') {
        if (!Object.hasOwn(current, field)) defineField(current, field, value);
      } else if (value !== undefined && value !== null) {
        const best = current[field];
        const better =
          best === undefined || (operator === '$min' ? compare(value, best) < 0 : compare(value, best) > 0);
        if (better) defineField(current, field, value);
      }
    }
  }
  return [...groups.values()];
}

function compare(a: unknown, b: unknown): number {
  return sortComparator({ v: 1 })({ v: a }, { v: b });
}

function runPipeline(ctx: CommandContext, ns: string, pipeline: unknown): Doc[] {
  if (!Array.isArray(pipeline)) throw errors.typeMismatch('pipeline must be an array');
  let docs: Doc[] | undefined;
  for (const [position, stage] of pipeline.entries()) {
    if (!isDocument(stage) || Object.keys(stage).length !== 1) {
      throw errors.badValue('A pipeline stage specification object must contain exactly one field.');
    }
    const [name, spec] = Object.entries(stage)[0] as [string, unknown];
    if (position === 0 && name === '$match') {
      docs = select(ctx, ns, asDoc(spec, '$match'));
      continue;
    }
    docs ??= ctx.engine.scan(ns, ctx.txn);
    switch (name) {
      case '$match':
        docs = docs.filter((doc) => matches(doc, asDoc(spec, '$match')));
        break;
      case '$sort':
        docs = [...docs].sort(sortComparator(asDoc(spec, '$sort') ?? {}));
        break;
      case '$skip':
        docs = docs.slice(asCount(spec, '$skip') ?? 0);
        break;
      case '$limit': {
        const limit = asCount(spec, '$limit') ?? 0;
        if (limit === 0) throw errors.badValue('the limit must be positive');
        docs = docs.slice(0, limit);
        break;
      }
      case '$project':
        docs = docs.map((doc) => project(doc, asDoc(spec, '$project')));
        break;
      case '$count': {
        if (typeof spec !== 'string' || spec === '')
          throw errors.badValue('the count field must be a non-empty string');
        docs = docs.length > 0 ? [{ [spec]: docs.length }] : [];
        break;
      }
      case '$group':
        docs = group(docs, asDoc(spec, '$group') ?? {});
        break;
      case '$lookup':
        docs = lookup(ctx, docs, asDoc(spec, '$lookup') ?? {});
        break;
      default:
        throw errors.unknownStage(name);
    }
  }
  return docs ?? ctx.engine.scan(ns, ctx.txn);
}

function lookup(ctx: CommandContext, docs: Doc[], spec: Doc): Doc[] {
  const { from, as, pipeline, localField, foreignField } = spec;
  if (typeof from !== 'string' || typeof as !== 'string') throw errors.badValue('$lookup needs from and as');
  if (spec.let !== undefined) throw errors.badValue('$lookup with let is not supported by the stand-in');
  const fromNs = nsOf(ctx, from);
  if (pipeline !== undefined) {
    if (localField !== undefined)
      throw errors.badValue('$lookup with both localField and pipeline is not supported by the stand-in');
    const joined = runPipeline(ctx, fromNs, pipeline);
    return docs.map((doc) => ({ ...doc, [as]: clone(joined) }));
  }
  if (typeof localField !== 'string' || typeof foreignField !== 'string') {
    throw errors.badValue('$lookup needs localField and foreignField, or a pipeline');
  }
  const foreign = ctx.engine.scan(fromNs, ctx.txn);
  return docs.map((doc) => {
    const local = getPath(doc, localField) ?? null;
    const joined = foreign.filter((other) => valuesEqual(getPath(other, foreignField) ?? null, local));
    return { ...doc, [as]: clone(joined) };
  });
}

function aggregate(body: Doc, ctx: CommandContext): Doc {
  if (typeof body.aggregate !== 'string')
    throw errors.badValue('collection-less aggregation is not supported by the stand-in');
  const ns = nsOf(ctx, collectionName(body, 'aggregate'));
  const cursorSpec = asDoc(body.cursor, 'cursor');
  if (!cursorSpec) throw errors.badValue("The 'cursor' option is required");
  const docs = runPipeline(ctx, ns, body.pipeline);
  return makeCursor(ctx, ns, docs, asCount(cursorSpec.batchSize, 'batchSize'), false);
}

function createIndexes(body: Doc, ctx: CommandContext): Doc {
  const name = collectionName(body, 'createIndexes');
  const ns = nsOf(ctx, name);
  const specs = body.indexes;
  if (!Array.isArray(specs) || specs.length === 0) throw errors.badValue('Must specify at least one index to create');
  const existed = ctx.engine.exists(ns);
  const before = ctx.engine.collection(ns)?.indexes.length ?? 1;
  let created = 0;
  for (const raw of specs) {
    const spec = asDoc(raw, 'index specification') as Doc;
    const key = asDoc(spec.key, 'key');
    if (!key || Object.keys(key).length === 0) throw errors.badValue("The 'key' field must be a non-empty object");
    for (const direction of Object.values(key)) {
      if (direction !== 1 && direction !== -1)
        throw errors.badValue('the stand-in supports ascending and descending index keys only');
    }
    if (typeof spec.name !== 'string' || spec.name === '') throw errors.badValue("The 'name' field must be a string");
    const known = new Set(['key', 'name', 'unique', 'expireAfterSeconds', 'v', 'background']);
    for (const option of Object.keys(spec)) {
      if (!known.has(option)) throw errors.badValue(`index option ${option} is not supported by the stand-in`);
    }
    const info: IndexInfo = { name: spec.name, key: clone(key), unique: spec.unique === true };
    if (spec.expireAfterSeconds !== undefined) {
      const seconds = spec.expireAfterSeconds;
      if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds < 0) {
        throw errors.badValue('expireAfterSeconds must be a non-negative integer');
      }
      if (Object.keys(key).length !== 1) throw errors.badValue('TTL indexes are single-field indexes');
      info.expireAfterSeconds = seconds;
    }
    if (ctx.engine.createIndex(ns, info)) created++;
  }
  const after = ctx.engine.collection(ns)?.indexes.length ?? 1;
  return {
    numIndexesBefore: before,
    numIndexesAfter: after,
    createdCollectionAutomatically: !existed,
    ...(created === 0 ? { note: 'all indexes already exist' } : {}),
    ok: 1,
  };
}

function listIndexes(body: Doc, ctx: CommandContext): Doc {
  const ns = nsOf(ctx, collectionName(body, 'listIndexes'));
  const collection = ctx.engine.collection(ns);
  if (!collection || !ctx.engine.exists(ns)) throw errors.namespaceNotFound(`ns does not exist: ${ns}`);
  const docs = collection.indexes.map((index) => ({
    v: 2,
    key: clone(index.key),
    name: index.name,
    ...(index.unique && index.name !== '_id_' ? { unique: true } : {}),
    ...(index.expireAfterSeconds !== undefined ? { expireAfterSeconds: index.expireAfterSeconds } : {}),
  }));
  return makeCursor(ctx, ns, docs, undefined, false);
}

function listCollections(body: Doc, ctx: CommandContext): Doc {
  const prefix = `${ctx.db}.`;
  const docs: Doc[] = [];
  for (const ns of ctx.engine.collections.keys()) {
    if (!ns.startsWith(prefix) || !ctx.engine.exists(ns)) continue;
    const name = ns.slice(prefix.length);
    const doc: Doc =
      body.nameOnly === true
        ? { name, type: 'collection' }
        : { name, type: 'collection', options: {}, info: { readOnly: false } };
    if (matches(doc, asDoc(body.filter, 'filter'))) docs.push(doc);
  }
  return makeCursor(ctx, `${ctx.db}.$cmd.listCollections`, docs, undefined, false);
}

function drop(body: Doc, ctx: CommandContext): Doc {
  const ns = nsOf(ctx, collectionName(body, 'drop'));
  ctx.engine.drop(ns);
  return { ns, ok: 1 };
}

function dropDatabase(_body: Doc, ctx: CommandContext): Doc {
  for (const ns of [...ctx.engine.collections.keys()]) {
    if (ns.startsWith(`${ctx.db}.`)) ctx.engine.drop(ns);
  }
  return { dropped: ctx.db, ok: 1 };
}

function create(body: Doc, ctx: CommandContext): Doc {
  const ns = nsOf(ctx, collectionName(body, 'create'));
  if (ctx.engine.exists(ns)) throw new CommandError(48, 'NamespaceExists', `Collection ${ns} already exists.`);
  ctx.engine.ensureCollection(ns).pendingCreator = undefined;
  return { ok: 1 };
}

export const handlers: Record<string, Handler> = {
  find,
  getMore,
  killCursors,
  insert,
  update,
  delete: remove,
  findAndModify,
  findandmodify: (body, ctx) => findAndModify({ findAndModify: body.findandmodify, ...body }, ctx),
  aggregate,
  createIndexes,
  listIndexes,
  listCollections,
  drop,
  dropDatabase,
  create,
  ping: () => ({ ok: 1 }),
  bulkWrite,
  buildInfo: (_body, ctx) => buildInfo(ctx.version),
  buildinfo: (_body, ctx) => buildInfo(ctx.version),
};

function buildInfo(version: string): Doc {
  const versionArray = [...version.split('.').map(Number), 0];
  return {
    version,
    versionArray,
    gitVersion: 'adk-state-standin',
    bits: 64,
    maxBsonObjectSize: MAX_DOCUMENT_BYTES,
    ok: 1,
  };
}
