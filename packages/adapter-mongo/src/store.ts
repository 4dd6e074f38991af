/**
 * The MongoDB store: each operation is one multi-document transaction with
 * as few statements as the layout allows. An append is a compare-and-set on
 * the session's revision (which also writes the session state), an upsert of
 * the event document and, when the delta has them, upserts of the user and
 * app buckets, then the commit. Concurrent writers of one session meet on the
 * session document: MongoDB lets exactly one of them write it.
 *
 * Every statement carries the time left before the call's deadline as
 * `maxTimeMS` (and the call's abort signal, which driver 7 honours); a call
 * the service has given up on sends no further statement and never commits.
 */
import { randomUUID } from 'node:crypto';
import type {
  AppendInput,
  AppendResult,
  Bucket,
  CreateInput,
  CreateResult,
  EventFilter,
  ListQuery,
  ListResult,
  LoadResult,
  SessionKey,
  SessionRecord,
  SessionStore,
  StoreCall,
  StoredEvent,
} from '@adk-state/core';
import { AdkStateError, BackendError } from '@adk-state/core';
import type { ClientSession, Collection, Db, Document, MongoClient } from 'mongodb';
import { decodeKeyPart, encodeKeyPart, sortKey } from './encoding.js';
import {
  appBucketId,
  type BucketDoc,
  type CollectionNames,
  collectionNames,
  EVENT_EXPIRY_GRACE_MS,
  type EventDoc,
  eventIndexes,
  fromStateFields,
  SCHEMA_VERSION,
  type SessionDoc,
  type StateFields,
  sessionId,
  sessionIndexes,
  stateSets,
  toStateFields,
  userBucketId,
} from './layout.js';
import { assertTransactions } from './topology.js';

export interface MongoStoreConfig {
  client: MongoClient;
  /** Whether {@link MongoStore.close} closes the client (true when the store created it). */
  ownsClient: boolean;
  dbName: string;
  collectionPrefix: string;
  /** Sessions expire this long after their creation; undefined keeps them forever. */
  sessionTtlSeconds?: number;
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

const NAMESPACE_EXISTS = 48;
const DUPLICATE_KEY = 11000;
const MAX_TIME_MS_EXPIRED = 50;
const TRANSIENT = 'TransientTransactionError';
const UNKNOWN_COMMIT_RESULT = 'UnknownTransactionCommitResult';
/** How long a transaction is retried when its call has no deadline (as the driver's `withTransaction`). */
const RETRY_WINDOW_MS = 120_000;
/** The store methods that write; their failures say whether they were applied. */
const WRITES = new Set(['createSession', 'appendEvent', 'deleteSession']);

type SessionHeadDoc = Pick<SessionDoc, '_id' | 'lastUpdateTime' | 'revision' | 'state' | 'schemaVersion' | 'expiresAt'>;

/** What a statement carries of its call: the time left (`maxTimeMS`) and the abort signal. */
interface CallOptions {
  maxTimeMS?: number;
  signal?: AbortSignal;
}

/** The statement options of a transaction's next statement. */
interface StatementOptions extends CallOptions {
  session: ClientSession;
}

/** What the work of one transaction gets. */
interface TransactionScope {
  session: ClientSession;
  /** Options for the next statement; throws once the call is abandoned, so no further statement is sent. */
  next(): StatementOptions;
}

/** The service gave up on the call at its deadline; the store sends nothing more for it. */
class CallAbandoned extends Error {
  constructor() {
    super('the call passed its deadline (timeoutMs) before this step');
    this.name = 'CallAbandoned';
  }
}

/**
 * The options that pass a call's deadline on to the driver: `maxTimeMS`, the
 * time left, which the server enforces (both driver majors), and the abort
 * signal, which driver 7 uses to stop waiting for a server or a reply.
 */
function callOptions(call: StoreCall | undefined): CallOptions {
  if (!call) return {};
  if (call.signal.aborted) throw new CallAbandoned();
  const left = call.deadline - Date.now();
  if (!Number.isFinite(left)) return { signal: call.signal };
  if (left <= 0) throw new CallAbandoned();
  return { maxTimeMS: Math.ceil(left), signal: call.signal };
}

export class MongoStore implements SessionStore {
  readonly backend = 'mongodb';
  readonly client: MongoClient;
  readonly db: Db;
  readonly names: CollectionNames;
  readonly #config: MongoStoreConfig;
  readonly #sessions: Collection<SessionDoc>;
  readonly #events: Collection<EventDoc>;
  readonly #userStates: Collection<BucketDoc>;
  readonly #appStates: Collection<BucketDoc>;
  #ready: Promise<void> | undefined;

  constructor(config: MongoStoreConfig) {
    this.#config = config;
    this.client = config.client;
    this.db = config.client.db(config.dbName);
    this.names = collectionNames(config.collectionPrefix);
    this.#sessions = this.db.collection(this.names.sessions);
    this.#events = this.db.collection(this.names.events);
    this.#userStates = this.db.collection(this.names.userStates);
    this.#appStates = this.db.collection(this.names.appStates);
  }

  /**
   * Connects (a client the store created), refuses a standalone server and
   * creates the indexes; once per store, again after a failure.
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
    await assertTransactions(this.db, this.client.options.hosts.map(String).join(','));
    const withTtl = this.#config.sessionTtlSeconds !== undefined;
    // The bucket collections exist before any transaction writes them: MongoDB
    // cannot create a collection inside a transaction that spans shards.
    await Promise.all([
      this.#sessions.createIndexes(sessionIndexes(withTtl)),
      this.#events.createIndexes(eventIndexes(withTtl)),
      this.#createCollection(this.names.userStates),
      this.#createCollection(this.names.appStates),
    ]);
  }

  async #createCollection(name: string): Promise<void> {
    try {
      await this.db.command({ create: name });
    } catch (error) {
      if ((error as { code?: unknown }).code !== NAMESPACE_EXISTS) throw error;
    }
  }

  /**
   * Runs `work` in one transaction, retried as the driver's `withTransaction`
   * retries (the whole transaction on a `TransientTransactionError`, the
   * commit on an `UnknownTransactionCommitResult`) while the call has time
   * left. MongoDB discards a transaction that was never committed, so a write
   * that failed before its commit was sent throws a {@link BackendError} that
   * says it was not applied; a failed or unanswered commit is thrown as it is,
   * and the service reports that the write may have been applied.
   */
  async #transaction<T>(
    operation: string,
    call: StoreCall | undefined,
    work: (scope: TransactionScope) => Promise<T>,
  ): Promise<T> {
    const notApplied = (error: unknown): unknown => {
      if (!WRITES.has(operation) || error instanceof AdkStateError) return error;
      return new BackendError(operation, error, { mayHaveApplied: false, timedOut: error instanceof CallAbandoned });
    };
    try {
      await this.ready();
      callOptions(call);
    } catch (error) {
      throw notApplied(error);
    }
    const until = Math.min(call?.deadline ?? Number.POSITIVE_INFINITY, Date.now() + RETRY_WINDOW_MS);
    const timeLeft = () => Date.now() < until && !call?.signal.aborted;
    let session = this.client.startSession();
    const scope: TransactionScope = { session, next: () => ({ session: scope.session, ...callOptions(call) }) };
    /** The next attempt runs on a fresh session, so that it never waits for the abort of the last one. */
    const renew = () => {
      void endSession(session);
      session = this.client.startSession();
      scope.session = session;
    };
    try {
      attempt: for (;;) {
        let result: T;
        try {
          const { maxTimeMS } = callOptions(call);
          session.startTransaction({
            readPreference: 'primary',
            ...(maxTimeMS !== undefined ? { maxCommitTimeMS: maxTimeMS } : {}),
          });
          result = await work(scope);
        } catch (error) {
          if (hasLabel(error, TRANSIENT) && timeLeft()) {
            renew();
            continue;
          }
          throw notApplied(error);
        }
        if (!session.inTransaction()) return result; // the work aborted it: nothing to commit
        if (call?.signal.aborted) throw notApplied(new CallAbandoned());
        let commitUnknown = false;
        for (;;) {
          try {
            await session.commitTransaction();
            return result;
          } catch (error) {
            if (hasLabel(error, UNKNOWN_COMMIT_RESULT)) {
              commitUnknown = true;
              if ((error as { code?: unknown }).code !== MAX_TIME_MS_EXPIRED && timeLeft()) continue;
              throw error;
            }
            // A commit refused as transient was not applied: the driver's withTransaction runs the whole transaction again.
            if (hasLabel(error, TRANSIENT) && !commitUnknown) {
              if (!timeLeft()) throw notApplied(error);
              renew();
              continue attempt;
            }
            throw error;
          }
        }
      }
    } finally {
      await endSession(session);
    }
  }

  #expired(doc: { expiresAt?: unknown }, now: number): boolean {
    return doc.expiresAt instanceof Date && doc.expiresAt.getTime() <= now;
  }

  async createSession(input: CreateInput, call?: StoreCall): Promise<CreateResult> {
    const { appName, userId, sessionId: id } = input.key;
    const now = this.#config.now();
    const ttl = this.#config.sessionTtlSeconds;
    const doc: SessionDoc = {
      _id: sessionId(appName, userId, id),
      incarnation: randomUUID(),
      sortId: sortKey(id),
      lastUpdateTime: input.createTime,
      revision: input.revision,
      state: toStateFields(input.state),
      createdAt: new Date(now),
      ...(ttl !== undefined ? { expiresAt: new Date(now + ttl * 1000) } : {}),
      schemaVersion: SCHEMA_VERSION,
    };
    for (let attempt = 0; ; attempt++) {
      const created = await this.#transaction('createSession', call, async (scope) => {
        try {
          await this.#sessions.insertOne(doc, scope.next());
        } catch (error) {
          if (!isDuplicateKey(error)) throw error;
          await scope.session.abortTransaction();
          return undefined;
        }
        return this.#mergeBuckets(input, scope);
      });
      if (created) return created;
      // An expired session the TTL monitor has not removed yet does not hold its key.
      if (attempt > 0 || !(await this.#removeExpired(doc._id, now, call))) return { status: 'exists' };
    }
  }

  /** Deletes the session `id` if it has expired; true when it did. */
  async #removeExpired(id: SessionDoc['_id'], now: number, call: StoreCall | undefined): Promise<boolean> {
    try {
      const removed = await this.#sessions.deleteOne(
        { _id: id, expiresAt: { $lte: new Date(now) } },
        callOptions(call),
      );
      return removed.deletedCount === 1;
    } catch (error) {
      // At most an expired session, which no reader sees, was removed: the creation itself was not applied.
      throw new BackendError('createSession', error, {
        mayHaveApplied: false,
        timedOut: error instanceof CallAbandoned,
      });
    }
  }

  /**
   * Merges the creation's user and app deltas and returns both whole buckets,
   * in as few statements as the deltas allow: two find-and-modify upserts when
   * both have entries, otherwise the upserts the deltas need and one read of
   * both buckets through the session just inserted.
   */
  async #mergeBuckets(input: CreateInput, scope: TransactionScope): Promise<CreateResult> {
    const { appName, userId, sessionId: id } = input.key;
    const userKey = userBucketId(appName, userId);
    const appId = appBucketId(appName);
    const modify = { upsert: true, returnDocument: 'after', projection: { state: 1 } } as const;
    if (input.userDelta.size > 0 && input.appDelta.size > 0) {
      const user = await this.#userStates.findOneAndUpdate({ _id: userKey }, bucketUpdate(input.userDelta), {
        ...modify,
        ...scope.next(),
      });
      const app = await this.#appStates.findOneAndUpdate({ _id: appId }, bucketUpdate(input.appDelta), {
        ...modify,
        ...scope.next(),
      });
      return {
        status: 'created',
        userState: fromStateFields(user?.state as StateFields | undefined),
        appState: fromStateFields(app?.state as StateFields | undefined),
      };
    }
    if (input.userDelta.size > 0) {
      await this.#userStates.updateOne({ _id: userKey }, bucketUpdate(input.userDelta), {
        upsert: true,
        ...scope.next(),
      });
    }
    if (input.appDelta.size > 0) {
      await this.#appStates.updateOne({ _id: appId }, bucketUpdate(input.appDelta), { upsert: true, ...scope.next() });
    }
    const [doc] = await this.#sessions
      .aggregate(
        [
          { $match: { _id: sessionId(appName, userId, id) } },
          { $project: { _id: 1 } },
          this.#lookupBucket(this.names.userStates, userKey, 'userBucket'),
          this.#lookupBucket(this.names.appStates, appId, 'appBucket'),
        ],
        scope.next(),
      )
      .toArray();
    return {
      status: 'created',
      userState: fromStateFields((doc?.userBucket as BucketDoc[] | undefined)?.[0]?.state),
      appState: fromStateFields((doc?.appBucket as BucketDoc[] | undefined)?.[0]?.state),
    };
  }

  async loadSession(key: SessionKey, filter: EventFilter, call?: StoreCall): Promise<LoadResult | undefined> {
    const now = this.#config.now();
    return this.#transaction('getSession', call, async (scope) => {
      const [doc] = await this.#sessions
        .aggregate(
          [
            { $match: { _id: sessionId(key.appName, key.userId, key.sessionId) } },
            this.#lookupBucket(this.names.userStates, userBucketId(key.appName, key.userId), 'userBucket'),
            this.#lookupBucket(this.names.appStates, appBucketId(key.appName), 'appBucket'),
          ],
          scope.next(),
        )
        .toArray();
      if (!doc || this.#expired(doc, now)) return undefined;
      this.#checkVersion(this.names.sessions, doc);
      const events = await this.#readEvents(doc.incarnation as string, filter, scope);
      return {
        session: this.#toRecord(doc as SessionHeadDoc),
        userState: fromStateFields((doc.userBucket as BucketDoc[])[0]?.state),
        appState: fromStateFields((doc.appBucket as BucketDoc[])[0]?.state),
        events,
      };
    });
  }

  #lookupBucket(from: string, id: BucketDoc['_id'], as: string): Document {
    return { $lookup: { from, pipeline: [{ $match: { _id: id } }, { $project: { _id: 0, state: 1 } }], as } };
  }

  /**
   * The events the filter keeps, read newest first from the (incarnation, seq)
   * index and stopped at the first event at or before `afterTimestamp`, so the
   * cost follows the events returned, not the length of the history.
   */
  async #readEvents(incarnation: string, filter: EventFilter, scope: TransactionScope): Promise<StoredEvent[]> {
    const { afterTimestamp, limit } = filter;
    if (limit === 0) return [];
    const query = { '_id.incarnation': incarnation };
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

  async appendEvent(input: AppendInput, call?: StoreCall): Promise<AppendResult> {
    const { appName, userId, sessionId: id } = input.key;
    const key = sessionId(appName, userId, id);
    const now = this.#config.now();
    return this.#transaction('appendEvent', call, async (scope): Promise<AppendResult> => {
      const before = await this.#sessions.findOneAndUpdate(
        { _id: key, revision: input.expectedRevision },
        { $inc: { revision: 1 }, $set: { lastUpdateTime: input.lastUpdateTime, ...stateSets(input.sessionDelta) } },
        { ...scope.next(), projection: { incarnation: 1, expiresAt: 1 }, returnDocument: 'before' },
      );
      if (!before || this.#expired(before, now)) {
        const current =
          before ??
          (await this.#sessions.findOne({ _id: key }, { ...scope.next(), projection: { revision: 1, expiresAt: 1 } }));
        await scope.session.abortTransaction();
        if (!current || this.#expired(current, now)) return { status: 'missing' };
        return { status: 'stale', revision: current.revision as number };
      }
      const expiresAt =
        before.expiresAt instanceof Date ? new Date(before.expiresAt.getTime() + EVENT_EXPIRY_GRACE_MS) : undefined;
      await this.#events.updateOne(
        { _id: { incarnation: before.incarnation as string, id: encodeKeyPart(input.event.id) } },
        {
          $set: {
            timestamp: input.event.timestamp,
            json: input.event.json,
            schemaVersion: SCHEMA_VERSION,
            ...(expiresAt ? { expiresAt } : {}),
          },
          $setOnInsert: { seq: input.expectedRevision + 1 },
        },
        { ...scope.next(), upsert: true },
      );
      if (input.userDelta.size > 0) {
        await this.#upsertBucket(this.#userStates, userBucketId(appName, userId), input.userDelta, scope);
      }
      if (input.appDelta.size > 0) {
        await this.#upsertBucket(this.#appStates, appBucketId(appName), input.appDelta, scope);
      }
      return { status: 'ok' };
    });
  }

  async #upsertBucket(
    collection: Collection<BucketDoc>,
    id: BucketDoc['_id'],
    delta: Bucket,
    scope: TransactionScope,
  ): Promise<void> {
    await collection.updateOne({ _id: id }, bucketUpdate(delta), { ...scope.next(), upsert: true });
  }

  async deleteSession(key: SessionKey, call?: StoreCall): Promise<void> {
    await this.#transaction('deleteSession', call, async (scope) => {
      const removed = await this.#sessions.findOneAndDelete(
        { _id: sessionId(key.appName, key.userId, key.sessionId) },
        { ...scope.next(), projection: { incarnation: 1 } },
      );
      if (!removed) {
        await scope.session.abortTransaction();
        return;
      }
      await this.#events.deleteMany({ '_id.incarnation': removed.incarnation }, scope.next());
    });
  }

  async listSessions(query: ListQuery, call?: StoreCall): Promise<ListResult> {
    const now = this.#config.now();
    const filter: Document = { '_id.app': encodeKeyPart(query.appName) };
    if (query.userId !== undefined) filter['_id.user'] = encodeKeyPart(query.userId);
    // Expired sessions the TTL monitor has not removed yet are not listed.
    if (this.#config.sessionTtlSeconds !== undefined) filter.expiresAt = { $not: { $lte: new Date(now) } };
    return this.#transaction('listSessions', call, async (scope) => {
      const [counted] = await this.#sessions
        .aggregate(
          [
            { $match: filter },
            { $group: { _id: null, n: { $sum: 1 } } },
            this.#lookupBucket(this.names.appStates, appBucketId(query.appName), 'appBucket'),
          ],
          scope.next(),
        )
        .toArray();
      const totalItems = (counted?.n as number | undefined) ?? 0;
      const appState = fromStateFields((counted?.appBucket as BucketDoc[] | undefined)?.[0]?.state);
      const result: ListResult = { totalItems, sessions: [], userStates: new Map(), appState };
      if (query.limit === 0 || query.offset >= totalItems) return result;
      const docs = await this.#sessions
        .find(filter, {
          ...scope.next(),
          sort: { lastUpdateTime: query.order === 'asc' ? 1 : -1, sortId: 1 },
          projection: { lastUpdateTime: 1, revision: 1, state: 1, schemaVersion: 1 },
          ...(query.offset > 0 ? { skip: query.offset } : {}),
          ...(query.limit !== undefined ? { limit: query.limit } : {}),
        })
        .toArray();
      for (const doc of docs) this.#checkVersion(this.names.sessions, doc);
      result.sessions = docs.map((doc) => this.#toRecord(doc as SessionHeadDoc));
      const owners = new Map<string, BucketDoc['_id']>();
      for (const record of result.sessions) owners.set(record.userId, userBucketId(query.appName, record.userId));
      const buckets = await this.#userStates
        .find({ _id: { $in: [...owners.values()] } }, { ...scope.next(), projection: { state: 1 } })
        .toArray();
      for (const owner of owners.keys()) result.userStates.set(owner, new Map());
      for (const bucket of buckets) {
        const owner = decodeKeyPart((bucket._id as Required<BucketDoc['_id']>).user);
        result.userStates.set(owner, fromStateFields(bucket.state as StateFields));
      }
      return result;
    });
  }

  async readUserState(appName: string, userId: string, call?: StoreCall): Promise<Bucket> {
    await this.ready();
    const found = await this.#userStates.findOne(
      { _id: userBucketId(appName, userId) },
      { ...callOptions(call), projection: { state: 1 } },
    );
    return fromStateFields(found?.state as StateFields | undefined);
  }

  async readAppState(appName: string, call?: StoreCall): Promise<Bucket> {
    await this.ready();
    const found = await this.#appStates.findOne(
      { _id: appBucketId(appName) },
      { ...callOptions(call), projection: { state: 1 } },
    );
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
 * Ends a session. An abort still owed to the server (a transaction left
 * open by a failure) goes on in the background, so that the failure is
 * reported at once; the driver ignores its errors, and an unreachable server
 * drops the transaction at its lifetime limit.
 */
async function endSession(session: ClientSession): Promise<void> {
  const aborting = session.inTransaction();
  const ending = session.endSession().catch(() => undefined);
  if (!aborting) await ending;
}

/** Whether a driver error carries `label` (by duck typing: errors of both driver majors qualify). */
function hasLabel(error: unknown, label: string): boolean {
  const has = (error as { hasErrorLabel?: unknown } | null | undefined)?.hasErrorLabel;
  return typeof has === 'function' && (has as (name: string) => boolean).call(error, label) === true;
}

/** Writes only the keys of `delta` into a bucket document, creating it when needed. */
function bucketUpdate(delta: Bucket): Document {
  return { $set: stateSets(delta), $setOnInsert: { schemaVersion: SCHEMA_VERSION } };
}

function toStoredEvent(doc: Document): StoredEvent {
  return {
    id: decodeKeyPart((doc._id as EventDoc['_id']).id),
    timestamp: doc.timestamp as number,
    json: doc.json as string,
  };
}

function isDuplicateKey(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === DUPLICATE_KEY;
}
