/**
 * The Firestore store: the persistence contract of `@adk-state/core` in
 * Firestore documents (see `layout.ts`). It translates and nothing else:
 *
 * - `appendEvent` is one read-write transaction (one commit): it reads the
 *   session head and the event's document, checks the revision, and writes
 *   the event, the head and the touched buckets together.
 * - `loadSession` reads the head and buckets (one batched get) and the
 *   events (one query) in parallel, and checks by read and update times that
 *   both come from one moment; if not, it re-reads the head at the events'
 *   read time. So a reader never sees part of an append.
 * - `deleteSession` deletes the head in one transaction (the session is gone
 *   from then on), then its events in chunks. Events of a deleted session
 *   that are still there (an interrupted delete, a TTL expiry) belong to an
 *   older incarnation: `createSession` removes them before it creates.
 *
 * The store never imports runtime values from `@google-cloud/firestore`, so
 * any copy of the client (for example the one inside `firebase-admin`) works.
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
import type {
  DocumentReference,
  DocumentSnapshot,
  Firestore,
  Query,
  QueryDocumentSnapshot,
  Timestamp,
  Transaction,
} from '@google-cloud/firestore';
import { numberKey, orderKey } from './encoding.js';
import {
  decodeState,
  type EventDocument,
  encodeState,
  Layout,
  type SessionDocument,
  type SessionRefs,
  type StoredState,
  statePaths,
} from './layout.js';
import { assertDocumentFits } from './limits.js';

/** Options of {@link FirestoreStore}. */
export interface FirestoreStoreOptions {
  /** A `Firestore` instance from `@google-cloud/firestore` (or `firebase-admin/firestore`). Never closed by the store. */
  firestore: Firestore;
  /** The collection that holds one document per app. Any collection path (`adk_state`, `tenants/t1/adk_state`). Default `adk_state`. */
  rootCollection?: string;
  /**
   * When set, every create and append stamps the session document with
   * `now + sessionTtlMs` in {@link ttlField}, for a Firestore TTL policy.
   */
  sessionTtlMs?: number;
  /** The field that carries the expiry time. Default `expireAt`. */
  ttlField?: string;
  /** Attempts of a read-write transaction under contention. Default 10. */
  maxTransactionAttempts?: number;
  /** The clock for expiry times. Default `Date.now`. */
  now?: () => number;
}

export const DEFAULT_ROOT_COLLECTION = 'adk_state';
export const DEFAULT_TTL_FIELD = 'expireAt';

/** Documents read and deleted per commit when removing events. */
const DELETE_CHUNK = 300;

/** How many times getSession reads before it gives up on finding one moment (only under constant writes). */
const MAX_READ_ATTEMPTS = 8;

/** How many times createSession clears leftover events and tries again before giving up. */
const MAX_CREATE_ROUNDS = 5;

const RESERVED_FIELDS = new Set([
  'appName',
  'userId',
  'id',
  'idOrder',
  'lastUpdateTime',
  'lastUpdateKey',
  'revision',
  'eventCount',
  'incarnation',
  'state',
]);

/** The outcome of one createSession transaction. */
type CreateAttempt = CreateResult | { status: 'leftovers' };

export class FirestoreStore implements SessionStore {
  readonly firestore: Firestore;
  /** The collection that holds one document per app. */
  readonly rootCollection: string;
  readonly #layout: Layout;
  readonly #ttlMs: number | undefined;
  readonly #ttlField: string;
  readonly #maxAttempts: number;
  readonly #now: () => number;

  constructor(options: FirestoreStoreOptions) {
    if (typeof options !== 'object' || options === null || typeof options.firestore?.collection !== 'function') {
      throw new TypeError('FirestoreStore needs { firestore }: a Firestore instance from @google-cloud/firestore.');
    }
    const { sessionTtlMs, ttlField = DEFAULT_TTL_FIELD, maxTransactionAttempts = 10 } = options;
    if (sessionTtlMs !== undefined && !(Number.isFinite(sessionTtlMs) && sessionTtlMs > 0)) {
      throw new TypeError(`sessionTtlMs must be a positive number of milliseconds, got ${String(sessionTtlMs)}.`);
    }
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(ttlField) || RESERVED_FIELDS.has(ttlField) || ttlField.startsWith('__')) {
      throw new TypeError(`ttlField must be a plain field name that the store does not use itself, got ${ttlField}.`);
    }
    if (!Number.isInteger(maxTransactionAttempts) || maxTransactionAttempts < 1) {
      throw new TypeError(`maxTransactionAttempts must be a positive integer, got ${String(maxTransactionAttempts)}.`);
    }
    this.firestore = options.firestore;
    this.rootCollection = options.rootCollection ?? DEFAULT_ROOT_COLLECTION;
    this.#layout = new Layout(options.firestore, this.rootCollection);
    this.#ttlMs = sessionTtlMs;
    this.#ttlField = ttlField;
    this.#maxAttempts = maxTransactionAttempts;
    this.#now = options.now ?? Date.now;
  }

  async createSession(input: CreateInput): Promise<CreateResult> {
    const refs = this.#layout.session(input.key);
    const head: SessionDocument = {
      appName: input.key.appName,
      userId: input.key.userId,
      id: input.key.sessionId,
      idOrder: orderKey(input.key.sessionId),
      lastUpdateTime: input.createTime,
      lastUpdateKey: numberKey(input.createTime),
      revision: input.revision,
      eventCount: 0,
      incarnation: randomUUID(),
      state: encodeState(input.state),
    };
    const fields = { ...head, ...this.#expiry() };
    assertDocumentFits('state', refs.session.path, fields);
    const userDelta = encodeState(input.userDelta);
    const appDelta = encodeState(input.appDelta);
    for (let round = 1; ; round++) {
      const attempt = await this.#transaction(async (tx): Promise<CreateAttempt> => {
        const [session, user, app] = await tx.getAll(refs.session, refs.user, refs.app);
        if (session?.exists) return { status: 'exists' };
        const leftovers = await tx.get(refs.events.select().limit(1));
        if (!leftovers.empty) return { status: 'leftovers' };
        tx.create(refs.session, fields);
        const userState = this.#mergeBucket(tx, refs.user, user, userDelta, {
          appName: input.key.appName,
          userId: input.key.userId,
        });
        const appState = this.#mergeBucket(tx, refs.app, app, appDelta, { appName: input.key.appName });
        return { status: 'created', userState, appState };
      });
      if (attempt.status !== 'leftovers') return attempt;
      if (round >= MAX_CREATE_ROUNDS) {
        throw new Error(`events of a deleted session ${input.key.sessionId} keep reappearing; try again later`);
      }
      await this.#deleteLeftovers(refs);
    }
  }

  async loadSession(key: SessionKey, filter: EventFilter): Promise<LoadResult | undefined> {
    const refs = this.#layout.session(key);
    const query = eventQuery(refs, filter);
    const read = await this.#readTogether([refs.session, refs.user, refs.app], query);
    const [session, user, app] = read.docs as [DocumentSnapshot, DocumentSnapshot, DocumentSnapshot];
    if (!session.exists) return undefined;
    const head = session.data() as SessionDocument;
    const stored = read.events.map((doc) => doc.data() as EventDocument);
    return {
      session: toRecord(head),
      userState: decodeState(user.get('state')),
      appState: decodeState(app.get('state')),
      events: selectStored(stored, filter, head.eventCount),
    };
  }

  async appendEvent(input: AppendInput): Promise<AppendResult> {
    const refs = this.#layout.session(input.key);
    const eventRef = this.#layout.event(refs, input.event.id);
    const sessionDelta = encodeState(input.sessionDelta);
    const userDelta = encodeState(input.userDelta);
    const appDelta = encodeState(input.appDelta);
    const newRevision = input.expectedRevision + 1;
    const sizeProbe: EventDocument = {
      id: input.event.id,
      timestamp: input.event.timestamp,
      timestampKey: numberKey(input.event.timestamp),
      seq: Number.MAX_SAFE_INTEGER,
      revision: newRevision,
      incarnation: randomUUID(),
      json: input.event.json,
    };
    assertDocumentFits('event', eventRef.path, { ...sizeProbe });
    return this.#transaction(async (tx): Promise<AppendResult> => {
      const wanted = [refs.session, eventRef];
      if (Object.keys(userDelta).length > 0) wanted.push(refs.user);
      if (Object.keys(appDelta).length > 0) wanted.push(refs.app);
      const [session, existing, ...buckets] = await tx.getAll(...wanted);
      if (!session?.exists) return { status: 'missing' };
      const head = session.data() as SessionDocument;
      const stored = existing?.exists ? (existing.data() as EventDocument) : undefined;
      const current = stored?.incarnation === head.incarnation ? stored : undefined;
      if (head.revision !== input.expectedRevision) {
        // A retried commit that had in fact gone through finds its own write.
        const ownWrite =
          head.revision === newRevision && current?.revision === newRevision && current.json === input.event.json;
        return ownWrite ? { status: 'ok' } : { status: 'stale', revision: head.revision };
      }
      const seq = current ? current.seq : head.eventCount + 1;
      const event: EventDocument = {
        id: input.event.id,
        timestamp: input.event.timestamp,
        timestampKey: numberKey(input.event.timestamp),
        seq,
        revision: newRevision,
        incarnation: head.incarnation,
        json: input.event.json,
      };
      const headUpdate = {
        revision: newRevision,
        lastUpdateTime: input.lastUpdateTime,
        lastUpdateKey: numberKey(input.lastUpdateTime),
        eventCount: Math.max(head.eventCount, seq),
        ...this.#expiry(),
      };
      const merged = { ...head, ...headUpdate, state: { ...head.state, ...sessionDelta } };
      assertDocumentFits('state', refs.session.path, merged);
      tx.set(eventRef, event);
      tx.update(refs.session, { ...headUpdate, ...statePaths(sessionDelta) });
      let next = 0;
      if (Object.keys(userDelta).length > 0) {
        this.#mergeBucket(tx, refs.user, buckets[next++], userDelta, {
          appName: input.key.appName,
          userId: input.key.userId,
        });
      }
      if (Object.keys(appDelta).length > 0) {
        this.#mergeBucket(tx, refs.app, buckets[next++], appDelta, { appName: input.key.appName });
      }
      return { status: 'ok' };
    });
  }

  async deleteSession(key: SessionKey): Promise<void> {
    const refs = this.#layout.session(key);
    const incarnation = await this.#transaction(async (tx) => {
      const session = await tx.get(refs.session);
      if (!session.exists) return undefined;
      tx.delete(refs.session);
      return (session.data() as SessionDocument).incarnation;
    });
    if (incarnation === undefined) return;
    // The session is gone for every reader and writer; now its events go, chunk by chunk.
    const ofThisSession = refs.events.where('incarnation', '==', incarnation).select().limit(DELETE_CHUNK);
    for (;;) {
      const chunk = await ofThisSession.get();
      if (chunk.empty) return;
      const batch = this.firestore.batch();
      for (const doc of chunk.docs) batch.delete(doc.ref);
      await batch.commit();
      if (chunk.size < DELETE_CHUNK) return;
    }
  }

  async listSessions(query: ListQuery): Promise<ListResult> {
    const sessions = this.#layout.sessions(query.appName);
    const matching = query.userId === undefined ? sessions : sessions.where('userId', '==', query.userId);
    const ordered = matching.orderBy('lastUpdateKey', query.order).orderBy('idOrder', 'asc');
    const appRef = this.#layout.app(query.appName);
    return this.firestore.runTransaction(
      async (tx) => {
        let heads: SessionDocument[] = [];
        if (query.limit !== 0) {
          const read = query.limit === undefined ? ordered : ordered.limit(query.offset + query.limit);
          heads = (await tx.get(read)).docs.map((doc) => doc.data() as SessionDocument);
        }
        const window = heads.slice(query.offset, query.limit === undefined ? undefined : query.offset + query.limit);
        const owners = [...new Set(window.map((head) => head.userId))];
        const [total, [app, ...users]] = await Promise.all([
          query.limit === undefined ? heads.length : tx.get(matching.count()).then((count) => count.data().count),
          tx.getAll(appRef, ...owners.map((userId) => this.#layout.user(query.appName, userId))),
        ]);
        const userStates = new Map<string, Bucket>();
        owners.forEach((userId, index) => {
          userStates.set(userId, decodeState(users[index]?.get('state')));
        });
        return {
          totalItems: total,
          sessions: window.map(toRecord),
          userStates,
          appState: decodeState(app?.get('state')),
        };
      },
      { readOnly: true },
    );
  }

  async readUserState(appName: string, userId: string): Promise<Bucket> {
    return decodeState((await this.#layout.user(appName, userId).get()).get('state'));
  }

  async readAppState(appName: string): Promise<Bucket> {
    return decodeState((await this.#layout.app(appName).get()).get('state'));
  }

  /** Merges a delta into a bucket document inside `tx` (when there is one); returns the merged bucket. */
  #mergeBucket(
    tx: Transaction,
    ref: DocumentReference,
    current: DocumentSnapshot | undefined,
    delta: StoredState,
    identity: Record<string, string>,
  ): Bucket {
    const state: StoredState = { ...(current?.get('state') as StoredState | undefined), ...delta };
    if (Object.keys(delta).length > 0) {
      assertDocumentFits('state', ref.path, { ...identity, state });
      tx.set(ref, { ...identity, state: delta }, { merge: true });
    }
    return decodeState(state);
  }

  #expiry(): Record<string, Date> {
    return this.#ttlMs === undefined ? {} : { [this.#ttlField]: new Date(this.#now() + this.#ttlMs) };
  }

  #transaction<T>(run: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.firestore.runTransaction(run, { maxAttempts: this.#maxAttempts });
  }

  /**
   * Reads documents (one batched get) and a query in parallel, and makes
   * sure both show one moment: the query's read time `at`. The documents do
   * when they were read at or after `at` and none of them changed at or
   * after `at` (every write to a session changes its head). Otherwise they
   * are read again at `at` (a read-only read at a fixed time); a server that
   * ignores the read time is caught by the same test, and the pair is read
   * again. The strict "before" makes the test sound even on servers whose
   * times have millisecond resolution and that handle requests one by one.
   */
  async #readTogether(
    refs: DocumentReference[],
    query: Query | undefined,
  ): Promise<{ docs: DocumentSnapshot[]; events: QueryDocumentSnapshot[] }> {
    if (!query) return { docs: await this.firestore.getAll(...refs), events: [] };
    for (let attempt = 1; ; attempt++) {
      const [events, docs] = await Promise.all([query.get(), this.firestore.getAll(...refs)]);
      const at = events.readTime;
      if (showsMoment(docs, at, (read) => compareTimes(at, read) <= 0)) return { docs, events: events.docs };
      const pinned = await this.firestore.runTransaction((tx) => tx.getAll(...refs), { readOnly: true, readTime: at });
      if (showsMoment(pinned, at, (read) => compareTimes(at, read) === 0)) return { docs: pinned, events: events.docs };
      if (attempt >= MAX_READ_ATTEMPTS) {
        throw new Error(`could not read a session and its events at one moment in ${attempt} attempts; try again`);
      }
    }
  }

  /** Removes events left by an earlier session with this key, while (and only while) no session has it. */
  async #deleteLeftovers(refs: SessionRefs): Promise<void> {
    for (;;) {
      const done = await this.#transaction(async (tx) => {
        if ((await tx.get(refs.session)).exists) return true;
        const chunk = await tx.get(refs.events.select().limit(DELETE_CHUNK));
        for (const doc of chunk.docs) tx.delete(doc.ref);
        return chunk.size < DELETE_CHUNK;
      });
      if (done) return;
    }
  }
}

function compareTimes(a: Timestamp, b: Timestamp | undefined): number {
  if (!b) return Number.NaN;
  return a.seconds === b.seconds ? a.nanoseconds - b.nanoseconds : a.seconds - b.seconds;
}

/**
 * True when documents read as `readOk` says show the state at `at`: the
 * session head is missing (the session does not exist: nothing to pair), or
 * no document was written at or after `at`.
 */
function showsMoment(docs: DocumentSnapshot[], at: Timestamp, readOk: (readTime: Timestamp) => boolean): boolean {
  if (!docs[0]?.exists) return true;
  return docs.every((doc) => readOk(doc.readTime) && (!doc.exists || compareTimes(at, doc.updateTime) > 0));
}

/** The events query a filter needs (undefined when it can return nothing). */
function eventQuery(refs: SessionRefs, filter: EventFilter): Query | undefined {
  if (filter.limit === 0) return undefined;
  if (filter.limit !== undefined) return refs.events.orderBy('seq').limitToLast(filter.limit);
  // Every event of the tail has a later timestamp; the tail is cut out of these by position.
  if (filter.afterTimestamp !== undefined)
    return refs.events.where('timestampKey', '>', numberKey(filter.afterTimestamp));
  return refs.events.orderBy('seq');
}

/**
 * The filter's events out of what {@link eventQuery} read, in append order:
 * the events after the last one whose timestamp is `<= afterTimestamp`.
 * Positions run from 1 to `eventCount` without gaps, so an event missing
 * from a `timestamp >` read is exactly one at or before `afterTimestamp`.
 */
function selectStored(read: EventDocument[], filter: EventFilter, eventCount: number): StoredEvent[] {
  const events = [...read].sort((a, b) => a.seq - b.seq);
  let start = 0;
  if (filter.afterTimestamp !== undefined) {
    const after = filter.afterTimestamp;
    if (filter.limit !== undefined) {
      let index = events.length - 1;
      while (index >= 0 && (events[index] as EventDocument).timestamp > after) index--;
      start = index + 1;
    } else {
      let index = events.length - 1;
      let expected = eventCount;
      while (index >= 0 && (events[index] as EventDocument).seq === expected) {
        index--;
        expected--;
      }
      start = index + 1;
    }
  }
  return events.slice(start).map((event) => ({ id: event.id, timestamp: event.timestamp, json: event.json }));
}

function toRecord(head: SessionDocument): SessionRecord {
  return {
    id: head.id,
    appName: head.appName,
    userId: head.userId,
    lastUpdateTime: head.lastUpdateTime,
    revision: head.revision,
    state: decodeState(head.state),
  };
}
