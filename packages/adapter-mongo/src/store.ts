/**
 * The MongoDB store: each operation is one multi-document transaction with
 * as few statements as the layout allows. An append is a compare-and-set on
 * the session's revision (which also writes the session state), an upsert of
 * the event document and, when the delta has them, upserts of the user and
 * app buckets, then the commit. Concurrent writers of one session meet on the
 * session document: MongoDB lets exactly one of them write it.
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
  StoredEvent,
} from '@adk-state/core';
import { AdkStateError } from '@adk-state/core';
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

type SessionHeadDoc = Pick<SessionDoc, '_id' | 'lastUpdateTime' | 'revision' | 'state' | 'schemaVersion' | 'expiresAt'>;

export class MongoStore implements SessionStore {
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

  /** Runs `work` in one transaction (retried by the driver on transient errors). */
  async #transaction<T>(work: (session: ClientSession) => Promise<T>): Promise<T> {
    await this.ready();
    const session = this.client.startSession();
    try {
      return await session.withTransaction(work, { readPreference: 'primary' });
    } finally {
      await session.endSession();
    }
  }

  #expired(doc: { expiresAt?: unknown }, now: number): boolean {
    return doc.expiresAt instanceof Date && doc.expiresAt.getTime() <= now;
  }

  async createSession(input: CreateInput): Promise<CreateResult> {
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
      try {
        return await this.#transaction(async (session) => {
          await this.#sessions.insertOne(doc, { session });
          return this.#mergeBuckets(input, session);
        });
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        // An expired session the TTL monitor has not removed yet does not hold its key.
        if (attempt > 0 || !(await this.#removeExpired(doc._id, now))) return { status: 'exists' };
      }
    }
  }

  /** Deletes the session `id` if it has expired; true when it did. */
  async #removeExpired(id: SessionDoc['_id'], now: number): Promise<boolean> {
    const removed = await this.#sessions.deleteOne({ _id: id, expiresAt: { $lte: new Date(now) } });
    return removed.deletedCount === 1;
  }

  /**
   * Merges the creation's user and app deltas and returns both whole buckets,
   * in as few statements as the deltas allow: two find-and-modify upserts when
   * both have entries, otherwise the upserts the deltas need and one read of
   * both buckets through the session just inserted.
   */
  async #mergeBuckets(input: CreateInput, session: ClientSession): Promise<CreateResult> {
    const { appName, userId, sessionId: id } = input.key;
    const userKey = userBucketId(appName, userId);
    const appId = appBucketId(appName);
    const options = { session, upsert: true, returnDocument: 'after', projection: { state: 1 } } as const;
    if (input.userDelta.size > 0 && input.appDelta.size > 0) {
      const user = await this.#userStates.findOneAndUpdate({ _id: userKey }, bucketUpdate(input.userDelta), options);
      const app = await this.#appStates.findOneAndUpdate({ _id: appId }, bucketUpdate(input.appDelta), options);
      return {
        status: 'created',
        userState: fromStateFields(user?.state as StateFields | undefined),
        appState: fromStateFields(app?.state as StateFields | undefined),
      };
    }
    if (input.userDelta.size > 0)
      await this.#userStates.updateOne({ _id: userKey }, bucketUpdate(input.userDelta), { session, upsert: true });
    if (input.appDelta.size > 0)
      await this.#appStates.updateOne({ _id: appId }, bucketUpdate(input.appDelta), { session, upsert: true });
    const [doc] = await this.#sessions
      .aggregate(
        [
          { $match: { _id: sessionId(appName, userId, id) } },
          { $project: { _id: 1 } },
          this.#lookupBucket(this.names.userStates, userKey, 'userBucket'),
          this.#lookupBucket(this.names.appStates, appId, 'appBucket'),
        ],
        { session },
      )
      .toArray();
    return {
      status: 'created',
      userState: fromStateFields((doc?.userBucket as BucketDoc[] | undefined)?.[0]?.state),
      appState: fromStateFields((doc?.appBucket as BucketDoc[] | undefined)?.[0]?.state),
    };
  }

  async loadSession(key: SessionKey, filter: EventFilter): Promise<LoadResult | undefined> {
    const now = this.#config.now();
    return this.#transaction(async (session) => {
      const [doc] = await this.#sessions
        .aggregate(
          [
            { $match: { _id: sessionId(key.appName, key.userId, key.sessionId) } },
            this.#lookupBucket(this.names.userStates, userBucketId(key.appName, key.userId), 'userBucket'),
            this.#lookupBucket(this.names.appStates, appBucketId(key.appName), 'appBucket'),
          ],
          { session },
        )
        .toArray();
      if (!doc || this.#expired(doc, now)) return undefined;
      this.#checkVersion(this.names.sessions, doc);
      const events = await this.#readEvents(doc.incarnation as string, filter, session);
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
  async #readEvents(incarnation: string, filter: EventFilter, session: ClientSession): Promise<StoredEvent[]> {
    const { afterTimestamp, limit } = filter;
    if (limit === 0) return [];
    const query = { '_id.incarnation': incarnation };
    const projection = { timestamp: 1, json: 1 };
    if (afterTimestamp === undefined && limit === undefined) {
      const docs = await this.#events.find(query, { session, projection, sort: { seq: 1 } }).toArray();
      return docs.map(toStoredEvent);
    }
    const cursor = this.#events.find(query, {
      session,
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

  async appendEvent(input: AppendInput): Promise<AppendResult> {
    const { appName, userId, sessionId: id } = input.key;
    const key = sessionId(appName, userId, id);
    const now = this.#config.now();
    return this.#transaction(async (session): Promise<AppendResult> => {
      const before = await this.#sessions.findOneAndUpdate(
        { _id: key, revision: input.expectedRevision },
        { $inc: { revision: 1 }, $set: { lastUpdateTime: input.lastUpdateTime, ...stateSets(input.sessionDelta) } },
        { session, projection: { incarnation: 1, expiresAt: 1 }, returnDocument: 'before' },
      );
      if (!before || this.#expired(before, now)) {
        const current =
          before ??
          (await this.#sessions.findOne({ _id: key }, { session, projection: { revision: 1, expiresAt: 1 } }));
        await session.abortTransaction();
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
        { session, upsert: true },
      );
      if (input.userDelta.size > 0) {
        await this.#upsertBucket(this.#userStates, userBucketId(appName, userId), input.userDelta, session);
      }
      if (input.appDelta.size > 0) {
        await this.#upsertBucket(this.#appStates, appBucketId(appName), input.appDelta, session);
      }
      return { status: 'ok' };
    });
  }

  async #upsertBucket(collection: Collection<BucketDoc>, id: BucketDoc['_id'], delta: Bucket, session: ClientSession) {
    await collection.updateOne({ _id: id }, bucketUpdate(delta), { session, upsert: true });
  }

  async deleteSession(key: SessionKey): Promise<void> {
    await this.#transaction(async (session) => {
      const removed = await this.#sessions.findOneAndDelete(
        { _id: sessionId(key.appName, key.userId, key.sessionId) },
        { session, projection: { incarnation: 1 } },
      );
      if (!removed) {
        await session.abortTransaction();
        return;
      }
      await this.#events.deleteMany({ '_id.incarnation': removed.incarnation }, { session });
    });
  }

  async listSessions(query: ListQuery): Promise<ListResult> {
    const now = this.#config.now();
    const filter: Document = { '_id.app': encodeKeyPart(query.appName) };
    if (query.userId !== undefined) filter['_id.user'] = encodeKeyPart(query.userId);
    // Expired sessions the TTL monitor has not removed yet are not listed.
    if (this.#config.sessionTtlSeconds !== undefined) filter.expiresAt = { $not: { $lte: new Date(now) } };
    return this.#transaction(async (session) => {
      const [counted] = await this.#sessions
        .aggregate(
          [
            { $match: filter },
            { $group: { _id: null, n: { $sum: 1 } } },
            this.#lookupBucket(this.names.appStates, appBucketId(query.appName), 'appBucket'),
          ],
          { session },
        )
        .toArray();
      const totalItems = (counted?.n as number | undefined) ?? 0;
      const appState = fromStateFields((counted?.appBucket as BucketDoc[] | undefined)?.[0]?.state);
      const result: ListResult = { totalItems, sessions: [], userStates: new Map(), appState };
      if (query.limit === 0 || query.offset >= totalItems) return result;
      const docs = await this.#sessions
        .find(filter, {
          session,
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
        .find({ _id: { $in: [...owners.values()] } }, { session, projection: { state: 1 } })
        .toArray();
      for (const owner of owners.keys()) result.userStates.set(owner, new Map());
      for (const bucket of buckets) {
        const owner = decodeKeyPart((bucket._id as Required<BucketDoc['_id']>).user);
        result.userStates.set(owner, fromStateFields(bucket.state as StateFields));
      }
      return result;
    });
  }

  async readUserState(appName: string, userId: string): Promise<Bucket> {
    await this.ready();
    const found = await this.#userStates.findOne({ _id: userBucketId(appName, userId) }, { projection: { state: 1 } });
    return fromStateFields(found?.state as StateFields | undefined);
  }

  async readAppState(appName: string): Promise<Bucket> {
    await this.ready();
    const found = await this.#appStates.findOne({ _id: appBucketId(appName) }, { projection: { state: 1 } });
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
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 11000;
}
