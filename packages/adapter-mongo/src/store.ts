/**
 * The MongoDB store: the SessionStore contract as MongoDB commands. Each
 * operation is one multi-document transaction with as few commands as the
 * layout allows, run by `runTransaction` of `transaction.ts` (which also
 * carries the call's deadline to every command and says whether a failed
 * write was applied).
 *
 * A write operation is a plan, a list of {@link Write}s handed to
 * `#guardedWrite`, whose first write is the guard that decides whether the
 * rest apply. An append's guard is a compare-and-set on the session's
 * revision (an update that matches only the expected revision and also
 * writes the session state), followed by an upsert of the event document
 * and, when the delta has them, upserts of the user and app buckets, then the
 * commit. Where the server has MongoDB 8's `bulkWrite` command, all of the
 * writes go in that one command (2 round trips with the commit); otherwise
 * the session and bucket writes share one `update` command of the sessions
 * collection and the event its own (3). Concurrent writers of one session
 * meet on the session document: MongoDB lets exactly one of them write it.
 */

import { randomUUID } from 'node:crypto';
import { AdkStateError } from '@adk-state/core';
import type {
  AppendInput,
  AppendResult,
  Bucket,
  CreateInput,
  CreateResult,
  EventFilter,
  HeldSession,
  ImportInput,
  ImportResult,
  ListQuery,
  ListResult,
  LoadResult,
  SessionKey,
  SessionRecord,
  SessionStore,
  SinceResult,
  StoreCall,
  StoredEvent,
  StoredSessionKey,
} from '@adk-state/core/store';
import { compareSessionKeys, utf16OrderKey } from '@adk-state/core/store';
import type {
  AnyBulkWriteOperation,
  ClientBulkWriteModel,
  Collection,
  Db,
  Document,
  Filter,
  MongoClient,
} from 'mongodb';
import { decodeKeyPart, encodeKeyPart, type KeyPart } from './encoding.js';
import {
  appBucketId,
  type BucketDoc,
  type CollectionNames,
  collectionNames,
  DAMAGED_HEADS,
  EVENT_EXPIRY_GRACE_MS,
  type EventDoc,
  eventId,
  eventIndexes,
  eventsOf,
  fromStateFields,
  SCHEMA_VERSION,
  SESSION_HEADS,
  type SessionDoc,
  type StateFields,
  sessionId,
  sessionIndexes,
  stateSets,
  toStateFields,
  userBucketId,
  writeTokens,
} from './layout.js';
import { assertTransactions, hasBulkWriteCommand } from './topology.js';
import {
  BulkWriteUnavailable,
  bulkWriteError,
  callOptions,
  notApplied,
  runTransaction,
  type TransactionScope,
} from './transaction.js';

export interface MongoStoreConfig {
  client: MongoClient;
  /** Whether {@link MongoStore.close} closes the client (true when the store created it). */
  ownsClient: boolean;
  dbName: string;
  collectionPrefix: string;
  /** Sessions expire this long after their creation; undefined keeps them forever. */
  expireAfterCreateSeconds?: number;
  /** Wall clock for expiry, in milliseconds. */
  now: () => number;
}

/** The schema version in a document is newer than this package understands. */
export class SchemaVersionError extends AdkStateError {
  constructor(collection: string, found: unknown) {
    super(
      'BACKEND_ERROR',
      `A document in ${collection} has schemaVersion ${String(found)}, newer than ${SCHEMA_VERSION}, the version this @adk-state/adapter-mongo understands. Upgrade the package on this service.`,
    );
  }
}

type SessionHeadDoc = Pick<
  SessionDoc,
  '_id' | 'lastUpdateTime' | 'revision' | 'state' | 'schemaVersion' | 'expiresAt' | 'logMark' | 'written'
>;

/** What a read of a session head takes. */
const HEAD_PROJECTION = {
  lastUpdateTime: 1,
  revision: 1,
  state: 1,
  schemaVersion: 1,
  expiresAt: 1,
  logMark: 1,
  written: 1,
};

/**
 * One write of a transaction, to the sessions or the events collection. A
 * write operation's plan is a list of them, its guard first (see `#guardedWrite`).
 */
type Write = { to: 'sessions' | 'events' } & (
  | { op: 'updateOne'; filter: Document; update: Document; upsert?: boolean }
  | { op: 'insertOne'; document: Document }
  | { op: 'deleteOne' | 'deleteMany'; filter: Document }
);

/** What one write of a `bulkWrite` command did: documents matched (an upsert counts its own), inserted or deleted. */
interface WriteOutcome {
  n: number;
  upserted: boolean;
}

export class MongoStore implements SessionStore {
  readonly backend = 'mongodb';
  readonly client: MongoClient;
  readonly db: Db;
  readonly names: CollectionNames;
  readonly #config: MongoStoreConfig;
  /** Session heads and state, user buckets and app buckets. */
  readonly #sessions: Collection;
  readonly #events: Collection;
  #ready: Promise<void> | undefined;
  #bulkWrite = false;
  /** The token of each write this store makes (`SessionDoc.written`). */
  readonly #writeToken = writeTokens();

  constructor(config: MongoStoreConfig) {
    this.#config = config;
    this.client = config.client;
    this.db = config.client.db(config.dbName);
    this.names = collectionNames(config.collectionPrefix);
    this.#sessions = this.db.collection(this.names.sessions);
    this.#events = this.db.collection(this.names.events);
  }

  /**
   * True once {@link ready} found MongoDB 8's multi-collection `bulkWrite`
   * command (a server of wire version 25 or newer and a driver that has
   * `MongoClient.bulkWrite`): an append is then one command and the commit.
   */
  get usesBulkWrite(): boolean {
    return this.#bulkWrite;
  }

  /**
   * Connects (a client the store created), refuses a standalone server,
   * looks for the `bulkWrite` command and creates the indexes; once per
   * store, again after a failure.
   */
  ready(): Promise<void> {
    this.#ready ??= this.#prepare().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  async #prepare(): Promise<void> {
    if (this.#config.ownsClient) await this.client.connect();
    const hello = await assertTransactions(this.db, this.client.options.hosts.map(String).join(','));
    this.#bulkWrite = hasBulkWriteCommand(hello, this.client);
    const withTtl = this.#config.expireAfterCreateSeconds !== undefined;
    // Both collections exist before any transaction writes them: MongoDB
    // cannot create a collection inside a transaction that spans shards.
    await Promise.all([
      this.#sessions.createIndexes(sessionIndexes(withTtl)),
      this.#events.createIndexes(eventIndexes(withTtl)),
    ]);
  }

  /**
   * Sends `writes` in one `bulkWrite` command, in order, and returns what
   * each did. A server that turns out not to have the command (a
   * deployment still at feature compatibility 7.0) makes the store stop
   * using it, and the transaction runs again without it
   * ({@link BulkWriteUnavailable}).
   */
  async #bulk(writes: Write[], scope: TransactionScope): Promise<WriteOutcome[]> {
    const models = writes.map((write) => this.#clientModel(write));
    let result: Awaited<ReturnType<MongoClient['bulkWrite']>>;
    try {
      result = await this.client.bulkWrite(models, { ...scope.next(), ordered: true, verboseResults: true });
    } catch (failure) {
      const error = bulkWriteError(failure);
      if (error instanceof BulkWriteUnavailable) this.#bulkWrite = false;
      throw error;
    }
    return writes.map((write, index): WriteOutcome => {
      if (write.op === 'insertOne') return { n: 1, upserted: false };
      if (write.op === 'updateOne') {
        const updated = result.updateResults?.get(index);
        return { n: updated?.matchedCount ?? 0, upserted: updated?.didUpsert === true };
      }
      return { n: result.deleteResults?.get(index)?.deletedCount ?? 0, upserted: false };
    });
  }

  #clientModel(write: Write): ClientBulkWriteModel {
    const namespace = `${this.db.databaseName}.${write.to === 'sessions' ? this.names.sessions : this.names.events}`;
    switch (write.op) {
      case 'updateOne':
        return {
          namespace,
          name: 'updateOne',
          filter: write.filter,
          update: write.update,
          upsert: write.upsert === true,
        };
      case 'insertOne':
        return { namespace, name: 'insertOne', document: write.document };
      default:
        return { namespace, name: write.op, filter: write.filter };
    }
  }

  /**
   * Sends `writes`, all to one collection, in one command (they are of one
   * kind: `update`, `insert` or `delete`) and returns the driver's result.
   */
  async #collectionBulk(writes: Write[], scope: TransactionScope) {
    const collection = writes[0]?.to === 'events' ? this.#events : this.#sessions;
    const models = writes.map(collectionModel);
    return collection.bulkWrite(models, { ...scope.next(), ordered: true });
  }

  /**
   * Sends a write plan, its guard first, and returns whether the guard
   * passed: whether it created its document (`created`: a new head) or
   * matched or removed exactly one (`matched`: the revision check, a removed
   * head). With `bulkWrite` (when the store uses it, unless `bulkWrite` is
   * false) every write goes in that one command, an insert as an upsert of
   * its fields: it is sent before the guard's outcome is known, and where the
   * guard fails it must meet no duplicate key before the abort. Without it,
   * one command per collection and server command (update, insert, delete),
   * in the order of their first write: the first holds the guard (its other
   * writes are upserts of one document each), and the others are sent only
   * if the guard passed.
   */
  async #guardedWrite(
    scope: TransactionScope,
    passes: 'created' | 'matched',
    plan: Write[],
    bulkWrite = true,
  ): Promise<boolean> {
    if (this.#bulkWrite && bulkWrite) {
      const [guard] = await this.#bulk(plan.map(asUpsert), scope);
      return passes === 'created' ? guard?.upserted === true : guard?.n === 1;
    }
    const [first = [], ...rest] = commandsOf(plan);
    const result = await this.#collectionBulk(first, scope);
    // Every other write of the guard's command matches or creates exactly one document: what is left is the guard's own.
    const passed =
      passes === 'created'
        ? result.upsertedIds[0] !== undefined
        : result.matchedCount + result.upsertedCount + result.deletedCount - (first.length - 1) === 1;
    if (passed) for (const command of rest) await this.#collectionBulk(command, scope);
    return passed;
  }

  /** The upserts of the user and app buckets that merge the deltas (none for an empty delta). */
  #bucketWrites(appName: string, userId: string, userDelta: Bucket, appDelta: Bucket): Write[] {
    const writes: Write[] = [];
    if (userDelta.size > 0) {
      writes.push({
        to: 'sessions',
        op: 'updateOne',
        filter: { _id: userBucketId(appName, userId) },
        update: bucketUpdate(userDelta),
        upsert: true,
      });
    }
    if (appDelta.size > 0) {
      writes.push({
        to: 'sessions',
        op: 'updateOne',
        filter: { _id: appBucketId(appName) },
        update: bucketUpdate(appDelta),
        upsert: true,
      });
    }
    return writes;
  }

  #expired(doc: { expiresAt?: unknown }, now: number): boolean {
    return doc.expiresAt instanceof Date && doc.expiresAt.getTime() <= now;
  }

  /** The events' expiry for an append at `now`: past the session's own (it was created no later), plus the grace period. */
  #eventExpiry(now: number): { expiresAt?: Date } {
    const ttl = this.#config.expireAfterCreateSeconds;
    return ttl === undefined ? {} : { expiresAt: new Date(now + ttl * 1000 + EVENT_EXPIRY_GRACE_MS) };
  }

  /** A new session's head, created with an upsert that only inserts (`$setOnInsert`): it matches an existing key instead. */
  #createHead(key: SessionKey, fields: Omit<SessionDoc, '_id' | 'sortId' | 'createdAt' | 'schemaVersion'>): Write {
    const now = this.#config.now();
    const ttl = this.#config.expireAfterCreateSeconds;
    const head: Omit<SessionDoc, '_id'> = {
      sortId: utf16OrderKey(key.sessionId),
      ...fields,
      createdAt: new Date(now),
      logMark: randomUUID(),
      ...(ttl !== undefined ? { expiresAt: new Date(now + ttl * 1000) } : {}),
      schemaVersion: SCHEMA_VERSION,
    };
    return {
      to: 'sessions',
      op: 'updateOne',
      filter: { _id: sessionId(key.appName, key.userId, key.sessionId) },
      update: { $setOnInsert: head },
      upsert: true,
    };
  }

  /**
   * With a time-to-live, events an expired session of the same key left
   * behind (they outlive it by the grace period): a new session starts empty.
   */
  #strays(key: SessionKey): Write[] {
    if (this.#config.expireAfterCreateSeconds === undefined) return [];
    return [{ to: 'events', op: 'deleteMany', filter: eventsOf(key.appName, key.userId, key.sessionId) }];
  }

  /**
   * Creates a session in one transaction: sends `plan`, whose guard is the
   * new head (see {@link #createHead}), and once the head was created
   * resolves what `created` returns; where the key is stored it aborts and
   * resolves undefined. An expired session the TTL monitor has not removed
   * yet does not hold its key, so it is removed and the creation tried again.
   */
  async #createUnlessExists<T>(
    operation: 'createSession' | 'importSession',
    key: SessionKey,
    call: StoreCall | undefined,
    plan: { writes: Write[]; bulkWrite?: boolean },
    created: (scope: TransactionScope) => Promise<T>,
  ): Promise<T | undefined> {
    const create = () =>
      runTransaction(this, operation, call, async (scope): Promise<T | undefined> => {
        if (await this.#guardedWrite(scope, 'created', plan.writes, plan.bulkWrite)) return created(scope);
        await scope.session.abortTransaction();
        return undefined;
      });
    for (let attempt = 0; ; attempt++) {
      const result = await create();
      if (result !== undefined) return result;
      if (attempt > 0 || !(await this.#removeExpired(operation, key, call))) return undefined;
    }
  }

  async createSession(input: CreateInput, call?: StoreCall): Promise<CreateResult> {
    const { appName, userId } = input.key;
    const head = this.#createHead(input.key, {
      lastUpdateTime: input.createTime,
      revision: input.revision,
      state: toStateFields(input.state),
    });
    const strays = this.#strays(input.key);
    const plan = {
      writes: [head, ...this.#bucketWrites(appName, userId, input.userDelta, input.appDelta), ...strays],
      // Session writes alone are one `update` command: bulkWrite would save no round trip.
      bulkWrite: strays.length > 0,
    };
    const created = await this.#createUnlessExists(
      'createSession',
      input.key,
      call,
      plan,
      async (scope): Promise<CreateResult> => {
        const buckets = await this.#readBuckets(appName, [userBucketId(appName, userId)], scope);
        return { status: 'created', userState: buckets.users.get(userId) ?? new Map(), appState: buckets.app };
      },
    );
    return created ?? { status: 'exists' };
  }

  /**
   * Stores a whole session in one transaction: its head at `input.revision`,
   * the bucket merges and every event (a repeated id keeps its first
   * position and its last content), positioned just below the revision so
   * that later appends follow them.
   */
  async importSession(input: ImportInput, call?: StoreCall): Promise<ImportResult> {
    const { appName, userId, sessionId: id } = input.key;
    const events: StoredEvent[] = [];
    const positions = new Map<string, number>();
    for (const event of input.events) {
      const position = positions.get(event.id);
      if (position === undefined) {
        positions.set(event.id, events.length);
        events.push(event);
      } else {
        events[position] = event;
      }
    }
    // The last event is the one written at the import's revision: it carries the write's token.
    const token = events.length > 0 ? this.#writeToken() : undefined;
    const head = this.#createHead(input.key, {
      lastUpdateTime: input.lastUpdateTime,
      revision: input.revision,
      state: toStateFields(input.state),
      ...(token !== undefined ? { written: { rev: input.revision, token } } : {}),
    });
    const expiry = this.#eventExpiry(this.#config.now());
    const inserts = events.map((event, index): Write => {
      const doc: EventDoc = {
        _id: eventId(appName, userId, id, event.id),
        seq: input.revision - events.length + index + 1,
        rev: input.revision - events.length + index + 1,
        ...(index === events.length - 1 && token !== undefined ? { w: token } : {}),
        timestamp: event.timestamp,
        json: event.json,
        ...expiry,
        schemaVersion: SCHEMA_VERSION,
      };
      return { to: 'events', op: 'insertOne', document: doc };
    });
    const writes = [
      head,
      ...this.#bucketWrites(appName, userId, input.userDelta, input.appDelta),
      ...this.#strays(input.key),
      ...inserts,
    ];
    const imported = await this.#createUnlessExists(
      'importSession',
      input.key,
      call,
      { writes },
      async (): Promise<ImportResult> => ({ status: 'imported' }),
    );
    return imported ?? { status: 'exists' };
  }

  /** Deletes the session `key` if it has expired; true when it did. */
  async #removeExpired(operation: string, key: SessionKey, call: StoreCall | undefined): Promise<boolean> {
    try {
      const removed = await this.#sessions.deleteOne(
        where({
          _id: sessionId(key.appName, key.userId, key.sessionId),
          expiresAt: { $lte: new Date(this.#config.now()) },
        }),
        callOptions(call),
      );
      return removed.deletedCount === 1;
    } catch (error) {
      // At most an expired session, which no reader sees, was removed: the creation itself was not applied.
      throw notApplied(operation, error);
    }
  }

  /** The app bucket and the user buckets `users` (their `_id`s), in one read. */
  async #readBuckets(
    appName: string,
    users: BucketDoc['_id'][],
    scope: TransactionScope,
  ): Promise<{ app: Bucket; users: Map<string, Bucket> }> {
    const docs = await this.#sessions
      .find(where({ _id: { $in: [appBucketId(appName), ...users] } }), { ...scope.next(), projection: { state: 1 } })
      .toArray();
    const result = { app: new Map() as Bucket, users: new Map<string, Bucket>() };
    for (const doc of docs) {
      const owner = (doc._id as unknown as BucketDoc['_id']).user;
      const state = fromStateFields(doc.state as StateFields);
      if (owner === null) result.app = state;
      else result.users.set(decodeKeyPart(owner), state);
    }
    return result;
  }

  async loadSession(key: SessionKey, filter: EventFilter, call?: StoreCall): Promise<LoadResult | undefined> {
    const { appName, userId, sessionId: id } = key;
    return runTransaction(this, 'getSession', call, async (scope) => {
      const read = await this.#readHead(key, scope);
      if (!read) return undefined;
      const events = await this.#readEvents(eventsOf(appName, userId, id), filter, scope);
      return { ...read.result, events };
    });
  }

  /**
   * In one transaction as `loadSession`: the head and buckets, and the
   * events appended after `held.revision` (an event's `seq` is the revision
   * that first wrote it); the whole log instead when the held copy is of
   * another life, an event was written again in place since, or the write
   * the copy was read at is not stored any more (see {@link #sinceHeld}).
   */
  async loadSessionSince(key: SessionKey, held: HeldSession, call?: StoreCall): Promise<SinceResult | undefined> {
    const { appName, userId, sessionId: id } = key;
    return runTransaction(this, 'getSession', call, async (scope) => {
      const read = await this.#readHead(key, scope);
      if (!read) return undefined;
      const query = eventsOf(appName, userId, id);
      const since = await this.#sinceHeld(read.head, query, held, scope);
      if (since) return { ...read.result, events: since, restart: false };
      // Another life, a held event written again, or a held write lost: the whole log.
      const events = await this.#readEvents(query, {}, scope);
      return { ...read.result, events, restart: true };
    });
  }

  /**
   * The events that follow the held copy, or undefined when it is no prefix
   * of the stored log. The copy's mark names its life (`logMark`) and, when
   * the head had it, the token of the write at the held revision
   * (`SessionDoc.written`). A write the backend lost (a rollback after a
   * failover) and another made since at the same revision carry other
   * tokens. At the held revision the head's mark must still be the held one
   * (then no event is read: nothing changed). Past it, the event written at
   * the held revision must still carry the held token, or none when the copy
   * has none (a write of a version without tokens): the query's range on
   * `rev` starts at the held revision so that this event comes along, without
   * its text, which the copy has.
   */
  async #sinceHeld(
    head: SessionHeadDoc,
    query: Document,
    held: HeldSession,
    scope: TransactionScope,
  ): Promise<StoredEvent[] | undefined> {
    const life = head.logMark;
    const mark = markOf(head);
    if (life === undefined || mark === undefined || head.revision < held.revision) return undefined;
    // The held mark is this life alone, or this life, a space and a token.
    let token: string | undefined;
    if (held.logMark !== life) {
      if (!held.logMark.startsWith(`${life} `)) return undefined;
      token = held.logMark.slice(life.length + 1);
    }
    if (head.revision === held.revision) return mark === held.logMark ? [] : undefined;
    const after = { $gt: held.revision };
    // New events, any event written again since, and the one written at the held revision: one query.
    const docs = await this.#events
      .find(
        { ...query, $or: [{ seq: after }, { rev: { $gte: held.revision } }] },
        {
          ...scope.next(),
          projection: {
            seq: 1,
            rev: 1,
            w: 1,
            timestamp: 1,
            json: { $cond: [{ $gt: ['$seq', held.revision] }, '$json', '$$REMOVE'] },
          },
          sort: { seq: 1 },
        },
      )
      .toArray();
    let anchored = token === undefined;
    const events: StoredEvent[] = [];
    for (const doc of docs) {
      if ((doc.seq as number) > held.revision) events.push(toStoredEvent(doc));
      else if (doc.rev === held.revision && doc.w === token) anchored = true;
      else return undefined;
    }
    return anchored ? events : undefined;
  }

  /** The head, the user bucket and the app bucket: one read of the sessions collection. Undefined when not stored or expired. */
  async #readHead(
    key: SessionKey,
    scope: TransactionScope,
  ): Promise<{ head: SessionHeadDoc; result: Omit<LoadResult, 'events'> } | undefined> {
    const now = this.#config.now();
    const { appName, userId, sessionId: id } = key;
    const docs = await this.#sessions
      .find(
        where({
          _id: { $in: [sessionId(appName, userId, id), userBucketId(appName, userId), appBucketId(appName)] },
        }),
        { ...scope.next(), projection: HEAD_PROJECTION },
      )
      .toArray();
    let head: SessionHeadDoc | undefined;
    let userState: Bucket = new Map();
    let appState: Bucket = new Map();
    for (const doc of docs) {
      const docId = doc._id as unknown as { user: KeyPart | null; id?: KeyPart };
      if (docId.id !== undefined) head = doc as unknown as SessionHeadDoc;
      else if (docId.user === null) appState = fromStateFields(doc.state as StateFields);
      else userState = fromStateFields(doc.state as StateFields);
    }
    if (!head || this.#expired(head, now)) return undefined;
    this.#checkVersion(this.names.sessions, head);
    const result: Omit<LoadResult, 'events'> = { session: this.#toRecord(head), userState, appState };
    const mark = markOf(head);
    if (mark !== undefined) result.logMark = mark;
    return { head, result };
  }

  /**
   * The events the filter keeps, read newest first from the `session_seq`
   * index and stopped at the first event at or before `afterTimestamp`, so the
   * cost follows the events returned, not the length of the history.
   */
  async #readEvents(query: Document, filter: EventFilter, scope: TransactionScope): Promise<StoredEvent[]> {
    const { afterTimestamp, limit } = filter;
    if (limit === 0) return [];
    const projection = { timestamp: 1, json: 1 };
    if (afterTimestamp === undefined && limit === undefined) {
      const docs = await this.#events.find(query, { ...scope.next(), projection, sort: { seq: 1 } }).toArray();
      return docs.map(toStoredEvent);
    }
    const cursor = this.#events.find(query, {
      ...scope.next(),
      projection,
      sort: { seq: -1 },
      ...(limit !== undefined ? { limit, batchSize: limit } : {}),
    });
    const newestFirst: StoredEvent[] = [];
    try {
      for await (const doc of cursor) {
        if (afterTimestamp !== undefined && (doc.timestamp as number) <= afterTimestamp) break;
        newestFirst.push(toStoredEvent(doc));
      }
    } finally {
      await cursor.close();
    }
    return newestFirst.reverse();
  }

  /**
   * The revision check is an update that matches only the expected revision
   * of a live session; the event upsert and the bucket upserts go with it.
   * With `bulkWrite`: one command for all, then the commit. Without: the
   * session and bucket writes in one `update` command of the sessions
   * collection, the event upsert once the check passed, then the commit. A
   * check that failed reads the stored revision and aborts: nothing written.
   */
  async appendEvent(input: AppendInput, call?: StoreCall): Promise<AppendResult> {
    const { appName, userId, sessionId: id } = input.key;
    const key = sessionId(appName, userId, id);
    const now = this.#config.now();
    const revision = input.expectedRevision + 1;
    const token = this.#writeToken();
    const check: Write = {
      to: 'sessions',
      op: 'updateOne',
      filter: { _id: key, revision: input.expectedRevision, expiresAt: { $not: { $lte: new Date(now) } } },
      update: {
        $inc: { revision: 1 },
        $set: {
          lastUpdateTime: input.lastUpdateTime,
          written: { rev: revision, token },
          ...stateSets(input.sessionDelta),
        },
      },
    };
    const event: Write = {
      to: 'events',
      op: 'updateOne',
      filter: { _id: eventId(appName, userId, id, input.event.id) },
      update: {
        $set: {
          timestamp: input.event.timestamp,
          json: input.event.json,
          rev: revision,
          w: token,
          schemaVersion: SCHEMA_VERSION,
          ...this.#eventExpiry(now),
        },
        $setOnInsert: { seq: revision },
      },
      upsert: true,
    };
    const plan = [check, event, ...this.#bucketWrites(appName, userId, input.userDelta, input.appDelta)];
    return runTransaction(this, 'appendEvent', call, async (scope): Promise<AppendResult> => {
      if (await this.#guardedWrite(scope, 'matched', plan)) return { status: 'ok' };
      const current = await this.#sessions.findOne(where({ _id: key }), {
        ...scope.next(),
        projection: { revision: 1, expiresAt: 1 },
      });
      await scope.session.abortTransaction();
      if (!current || this.#expired(current as { expiresAt?: unknown }, now)) return { status: 'missing' };
      return { status: 'stale', revision: current.revision as number };
    });
  }

  async deleteSession(key: SessionKey, call?: StoreCall): Promise<void> {
    const head: Write = {
      to: 'sessions',
      op: 'deleteOne',
      filter: { _id: sessionId(key.appName, key.userId, key.sessionId) },
    };
    const events: Write = { to: 'events', op: 'deleteMany', filter: eventsOf(key.appName, key.userId, key.sessionId) };
    await runTransaction(this, 'deleteSession', call, async (scope) => {
      if (!(await this.#guardedWrite(scope, 'matched', [head, events]))) await scope.session.abortTransaction();
    });
  }

  async listSessions(query: ListQuery, call?: StoreCall): Promise<ListResult> {
    const now = this.#config.now();
    const owner: Document = { '_id.app': encodeKeyPart(query.appName) };
    if (query.userId !== undefined) owner['_id.user'] = encodeKeyPart(query.userId);
    // Expired sessions the TTL monitor has not removed yet are not listed.
    if (this.#config.expireAfterCreateSeconds !== undefined) owner.expiresAt = { $not: { $lte: new Date(now) } };
    return runTransaction(this, 'listSessions', call, async (scope) => {
      // One count of both kinds of head: those with a numeric time, and those whose time was damaged.
      const counts = await this.#sessions
        .aggregate(
          [
            { $match: { ...owner, $or: [SESSION_HEADS, DAMAGED_HEADS] } },
            { $group: { _id: { $isNumber: '$lastUpdateTime' }, n: { $sum: 1 } } },
          ],
          scope.next(),
        )
        .toArray();
      const timed = (counts.find((group) => group._id === true)?.n as number | undefined) ?? 0;
      const damaged = (counts.find((group) => group._id === false)?.n as number | undefined) ?? 0;
      const totalItems = timed + damaged;
      const result: ListResult = { totalItems, sessions: [], userStates: new Map(), appState: new Map() };
      // Damaged heads are listed as of time 0 (core lists them so): before the others ascending, after them descending.
      const first =
        query.order === 'asc' ? { filter: DAMAGED_HEADS, count: damaged } : { filter: SESSION_HEADS, count: timed };
      const second = query.order === 'asc' ? SESSION_HEADS : DAMAGED_HEADS;
      const from = query.offset;
      const to = query.limit === undefined ? totalItems : Math.min(totalItems, from + query.limit);
      const docs: Document[] = [];
      if (from < Math.min(to, first.count)) {
        docs.push(...(await this.#listPart(first.filter, owner, query, from, Math.min(to, first.count) - from, scope)));
      }
      const secondFrom = Math.max(0, from - first.count);
      if (secondFrom < to - first.count) {
        docs.push(...(await this.#listPart(second, owner, query, secondFrom, to - first.count - secondFrom, scope)));
      }
      for (const doc of docs) this.#checkVersion(this.names.sessions, doc);
      result.sessions = docs.map((doc) => this.#toRecord(doc as SessionHeadDoc));
      const owners = new Map<string, BucketDoc['_id']>();
      for (const record of result.sessions) owners.set(record.userId, userBucketId(query.appName, record.userId));
      const buckets = await this.#readBuckets(query.appName, [...owners.values()], scope);
      result.appState = buckets.app;
      for (const owner of owners.keys()) result.userStates.set(owner, buckets.users.get(owner) ?? new Map());
      return result;
    });
  }

  /** `count` heads of one kind (`kind`: {@link SESSION_HEADS} or {@link DAMAGED_HEADS}) in listing order, from `skip`. */
  #listPart(
    kind: Document,
    owner: Document,
    query: ListQuery,
    skip: number,
    count: number,
    scope: TransactionScope,
  ): Promise<Document[]> {
    return this.#sessions
      .find(
        { ...owner, ...kind },
        {
          ...scope.next(),
          sort: { lastUpdateTime: query.order === 'asc' ? 1 : -1, sortId: 1 },
          projection: { lastUpdateTime: 1, revision: 1, state: 1, schemaVersion: 1 },
          ...(skip > 0 ? { skip } : {}),
          limit: count,
        },
      )
      .toArray();
  }

  async readUserState(appName: string, userId: string, call?: StoreCall): Promise<Bucket> {
    return this.#readBucket(userBucketId(appName, userId), call);
  }

  async readAppState(appName: string, call?: StoreCall): Promise<Bucket> {
    return this.#readBucket(appBucketId(appName), call);
  }

  async listAppNames(call?: StoreCall): Promise<string[]> {
    await this.ready();
    const groups = await this.#sessions.aggregate([{ $group: { _id: '$_id.app' } }], callOptions(call)).toArray();
    return groups.map((group) => decodeKeyPart(group._id as KeyPart));
  }

  /**
   * Every session of the app (of one user, when given), found by the `_id`
   * of its head (a bucket's has no `id`), whatever its other fields hold: a
   * head whose `lastUpdateTime` and `sortId` were both removed outside
   * adk-state is left out of the listing, not out of this. Sorted by user,
   * then id.
   */
  async listSessionKeys(appName: string, userId: string | undefined, call?: StoreCall): Promise<StoredSessionKey[]> {
    await this.ready();
    const filter: Document = { '_id.app': encodeKeyPart(appName), '_id.id': { $exists: true } };
    if (userId !== undefined) filter['_id.user'] = encodeKeyPart(userId);
    const heads = await this.#sessions.find(where(filter), { ...callOptions(call), projection: { _id: 1 } }).toArray();
    return heads
      .map((head) => {
        const id = head._id as unknown as SessionDoc['_id'];
        return { userId: decodeKeyPart(id.user), sessionId: decodeKeyPart(id.id) };
      })
      .sort(compareSessionKeys);
  }

  async #readBucket(id: BucketDoc['_id'], call: StoreCall | undefined): Promise<Bucket> {
    await this.ready();
    const found = await this.#sessions.findOne(where({ _id: id }), { ...callOptions(call), projection: { state: 1 } });
    return fromStateFields(found?.state as StateFields | undefined);
  }

  async close(): Promise<void> {
    if (this.#config.ownsClient) await this.client.close();
  }

  #checkVersion(collection: string, doc: Document): void {
    const version = doc.schemaVersion;
    if (typeof version === 'number' && version > SCHEMA_VERSION) throw new SchemaVersionError(collection, version);
  }

  #toRecord(doc: SessionHeadDoc): SessionRecord {
    return {
      id: decodeKeyPart(doc._id.id),
      appName: decodeKeyPart(doc._id.app),
      userId: decodeKeyPart(doc._id.user),
      lastUpdateTime: doc.lastUpdateTime,
      revision: doc.revision,
      state: fromStateFields(doc.state),
    };
  }
}

/**
 * A filter as the driver's typed API takes it: the layout's `_id`s are
 * documents of ids, which its types (made for ObjectId `_id`s) do not foresee.
 */
function where(filter: Document): Filter<Document> {
  return filter as Filter<Document>;
}

/** A write as one `bulkWrite` command sends it: an insert as an upsert of its fields (see `#guardedWrite`). */
function asUpsert(write: Write): Write {
  if (write.op !== 'insertOne') return write;
  const { _id, ...fields } = write.document;
  return { to: write.to, op: 'updateOne', filter: { _id }, update: { $set: fields }, upsert: true };
}

/** The server command a write travels in: `Collection.bulkWrite` sends one per kind. */
const SERVER_COMMAND: Record<Write['op'], string> = {
  updateOne: 'update',
  insertOne: 'insert',
  deleteOne: 'delete',
  deleteMany: 'delete',
};

/** `writes` as calls of `Collection.bulkWrite`: one per collection and server command, in the order of their first write. */
function commandsOf(writes: Write[]): Write[][] {
  const commands = new Map<string, Write[]>();
  for (const write of writes) {
    const kind = `${write.to}.${SERVER_COMMAND[write.op]}`;
    const command = commands.get(kind);
    if (command) command.push(write);
    else commands.set(kind, [write]);
  }
  return [...commands.values()];
}

/** One write as a model of `Collection.bulkWrite`. */
function collectionModel(write: Write): AnyBulkWriteOperation {
  switch (write.op) {
    case 'updateOne':
      return { updateOne: { filter: write.filter, update: write.update, upsert: write.upsert === true } };
    case 'insertOne':
      return { insertOne: { document: write.document } };
    case 'deleteOne':
      return { deleteOne: { filter: write.filter } };
    default:
      return { deleteMany: { filter: write.filter } };
  }
}

/** Writes only the keys of `delta` into a bucket document, creating it when needed. */
function bucketUpdate(delta: Bucket): Document {
  return { $set: stateSets(delta), $setOnInsert: { schemaVersion: SCHEMA_VERSION } };
}

/**
 * The mark a reader holds with its copy (`LoadResult.logMark`): the life of
 * the key, then a space and the token of the write at the head's revision
 * when the head has it for that revision (a token holds no space).
 */
function markOf(head: SessionHeadDoc): string | undefined {
  if (typeof head.logMark !== 'string') return undefined;
  const { written } = head;
  if (written?.rev !== head.revision || typeof written.token !== 'string') return head.logMark;
  return `${head.logMark} ${written.token}`;
}

/** An event document as stored; a time or text of the wrong type is left for core's decode to refuse. */
function toStoredEvent(doc: Document): StoredEvent {
  return {
    id: decodeKeyPart((doc._id as EventDoc['_id']).id),
    timestamp: doc.timestamp as number,
    json: doc.json as string,
  };
}
