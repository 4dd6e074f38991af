/**
 * The Firestore store: the persistence contract of `@adk-state/core` in
 * Firestore documents (see `layout.ts`). It translates and nothing else.
 *
 * Writes are read-write transactions (one commit each; see `#transaction`):
 *
 * - `createSession` reads the session and its buckets, refuses a session
 *   that exists, and creates it with a new incarnation; events left by an
 *   older session with this key (an interrupted delete, a TTL expiry) are
 *   removed first, in transactions of their own.
 * - `appendEvent` reads the session document and the event's, checks the
 *   revision, and writes the event, the session (with the ids of its last
 *   events, in `recent`) and the buckets together; the buckets are merged
 *   blind, so no append locks another session's.
 * - `deleteSession` deletes the session document in one transaction (the
 *   session is gone from then on), then its events in batches of chunks.
 *
 * Reads see one moment (`#readAtOneMoment`): a plain anchor read fixes the
 * moment (its read time), a read-only transaction reads everything at that
 * time, and `showsMoment` checks that nothing read was written later; if
 * something was, all is read again at a new moment, up to core's
 * `CONSISTENT_READ_ATTEMPTS` times, then `ConsistentReadContention`. A load
 * anchors on the session document, reads it with its buckets and events,
 * and takes its last n events by the ids in `recent` (read as they are now,
 * and at the moment only if one changed since); a listing anchors on the
 * app's bucket and reads the page, the total and the buckets at its time.
 *
 * Every call carries its deadline to the client's RPCs (see `calls.ts`),
 * stops between steps once it has passed (a transaction never starts another
 * attempt, nor sends its commit, after it), waits for all of its parallel
 * reads before it fails, and says `mayHaveApplied: false` for a write whose
 * commit was never sent. The options are checked in `options.ts`.
 *
 * The store never imports runtime values from `@google-cloud/firestore`, so
 * any copy of the client (for example the one inside `firebase-admin`) works.
 */
import { randomUUID } from 'node:crypto';
import { BackendError, isAdkStateError } from '@adk-state/core';
import {
  type AppendInput,
  type AppendResult,
  type Bucket,
  CONSISTENT_READ_ATTEMPTS,
  ConsistentReadContention,
  type CreateInput,
  type CreateResult,
  callAbandoned,
  compareSessionKeys,
  compareSessions,
  type EventFilter,
  type Expiry,
  type HeldSession,
  isUnreadableData,
  type ListQuery,
  type ListResult,
  type LoadResult,
  type SessionKey,
  type SessionRecord,
  type SessionStore,
  type SinceResult,
  type StoreCall,
  type StoredEvent,
  type StoredSessionKey,
  UnreadableDataError,
  unreadableText,
} from '@adk-state/core/store';
import type {
  DocumentReference,
  DocumentSnapshot,
  Firestore,
  Query,
  QueryDocumentSnapshot,
  Timestamp,
  Transaction,
} from '@google-cloud/firestore';
import {
  ALREADY_EXISTS,
  attachDeadlines,
  ClientSetupFailed,
  checkCall,
  FAILED_PRECONDITION,
  grpcCode,
  guardClientPool,
  InFlight,
  settleAll,
  withCall,
  withTransactionGrace,
} from './calls.js';
import { documentId, documentIdParts, idOrder, isText, mayBeCut, numberKey, readText, storeText } from './encoding.js';
import {
  decodeState,
  type EventDocument,
  encodeState,
  Layout,
  RECENT_EVENTS,
  SESSIONS,
  type SessionDocument,
  type SessionRefs,
  type StoredState,
  statePaths,
} from './layout.js';
import { assertDocumentFits } from './limits.js';
import { checkStoreOptions, type FirestoreStoreOptions } from './options.js';

/** Documents read and deleted per commit when removing events. */
const DELETE_CHUNK = 300;

/**
 * How many chunks of a deleted session's events may be refused (a document
 * changed since the query found it) before deleteSession leaves the rest for
 * the next createSession of the key.
 */
const MAX_REFUSED_CHUNKS = 5;
/** How many times createSession clears leftover events and tries again before giving up. */
const MAX_CREATE_ROUNDS = 5;

/** The largest `limit` Firestore takes in a query (a signed 32-bit integer). */
const MAX_QUERY_LIMIT = 2 ** 31 - 1;

/** How many of an app's sessions `listAppNames` reads for one whose `appName` reads. */
const APP_NAMERS = 10;

/** What listing reads of a session document (not its `recent` ids). */
const LISTED_FIELDS = [
  'appName',
  'userId',
  'id',
  'idOrder',
  'lastUpdateTime',
  'lastUpdateKey',
  'revision',
  'state',
  'bucketsWritten',
];

/** The outcome of one createSession transaction. */
type CreateAttempt = CreateResult | { status: 'leftovers' };

/** What the anchor read of a read at one moment found: the moment to read at, or the answer already. */
type Anchor<T> = { at: Timestamp } | { answer: T };

/** How many reads a view of a session with an older bucket gets (see `tornBuckets`) before it is the answer. */
const TORN_READS = 3;

/** What a read at one moment found, and every document it read, which must show that moment. */
interface AtMoment<T> {
  answer: T;
  read: DocumentSnapshot[];
  /** The documents show only part of one commit (see `tornBuckets`): read again, at a new moment. */
  torn?: boolean;
}

/** A session document read at one moment with its buckets and the events of a query. */
interface SessionRead {
  head: SessionDocument;
  /** The session document's read time: the moment. */
  readTime: Timestamp;
  user: DocumentSnapshot | undefined;
  app: DocumentSnapshot | undefined;
  events: QueryDocumentSnapshot[];
}

export class FirestoreStore implements SessionStore {
  readonly backend = 'firestore';
  readonly firestore: Firestore;
  /** The collection that holds one document per app. */
  readonly rootCollection: string;
  readonly #layout: Layout;
  readonly #expiry: Expiry | undefined;
  readonly #ttlField: string;
  readonly #maxAttempts: number;
  readonly #now: () => number;
  readonly #closeWaitMs: number;
  readonly #inFlight = new InFlight();

  constructor(options: FirestoreStoreOptions) {
    const settings = checkStoreOptions(options);
    this.firestore = settings.firestore;
    this.rootCollection = settings.rootCollection;
    this.#layout = new Layout(settings.firestore, settings.rootCollection);
    this.#expiry = settings.expiry;
    this.#ttlField = settings.ttlField;
    this.#maxAttempts = settings.maxTransactionAttempts;
    this.#now = settings.now;
    this.#closeWaitMs = settings.closeWaitMs;
    attachDeadlines(settings.firestore);
    guardClientPool(settings.firestore);
  }

  /**
   * Waits, up to `closeWaitMs`, for the store's calls that are still running
   * in the client, so that `firestore.terminate()` after it finds none of them
   * retrying; never terminates the client. Calls still running when the wait
   * ends are named in a process warning. (Terminating the client while they
   * run does not end the process either: see `guardClientPool`.)
   */
  async close(): Promise<void> {
    const running = await this.#inFlight.settle(this.#closeWaitMs);
    if (running > 0) {
      process.emitWarning(
        `adk-state: ${running} Firestore call(s) of the store were still running in the client ${this.#closeWaitMs} ms after close() began (their calls have failed already); terminating the client ends them unfinished`,
        { type: 'AdkStateWarning', code: 'ADK_STATE_CALLS_RUNNING' },
      );
    }
  }

  /**
   * Runs one store call in `call`'s scope (see `withCall`), held until it
   * settles for {@link close}. A client that could not be set up for it (see
   * `guardClientPool`) fails it as a `BackendError` that says nothing was
   * written, of kind `'authentication'` when its credentials were the cause.
   */
  #run<T>(operation: string, call: StoreCall | undefined, work: () => Promise<T>): Promise<T> {
    return this.#inFlight.track(
      withCall(call, work).catch((error: unknown) => {
        const setUp = setUpFailureIn(error);
        // A failure after a write was made says so already, whatever caused it.
        if (!setUp || (error instanceof BackendError && error.mayHaveApplied)) throw error;
        throw new BackendError(operation, setUp.credentials ? (setUp.cause ?? setUp) : setUp, {
          kind: setUp.credentials ? 'authentication' : 'outage',
          mayHaveApplied: false,
        });
      }),
    );
  }

  createSession(input: CreateInput, call?: StoreCall): Promise<CreateResult> {
    return this.#run('createSession', call, () => this.#createSession(input, call));
  }

  loadSession(key: SessionKey, filter: EventFilter, call?: StoreCall): Promise<LoadResult | undefined> {
    return this.#run('getSession', call, () => this.#loadSession(key, filter, call));
  }

  /** The event documents written since the held revision, read with the session at one moment. */
  loadSessionSince(key: SessionKey, held: HeldSession, call?: StoreCall): Promise<SinceResult | undefined> {
    return this.#run('getSession', call, () => this.#loadSessionSince(key, held, call));
  }

  appendEvent(input: AppendInput, call?: StoreCall): Promise<AppendResult> {
    return this.#run('appendEvent', call, () => this.#appendEvent(input, call));
  }

  deleteSession(key: SessionKey, call?: StoreCall): Promise<void> {
    return this.#run('deleteSession', call, () => this.#deleteSession(key, call));
  }

  listSessions(query: ListQuery, call?: StoreCall): Promise<ListResult> {
    return this.#run('listSessions', call, () => this.#listSessions(query, call));
  }

  readUserState(appName: string, userId: string, call?: StoreCall): Promise<Bucket> {
    return this.#run('getUserState', call, async () =>
      decodeState((await this.#layout.user(appName, userId).get()).get('state')),
    );
  }

  readAppState(appName: string, call?: StoreCall): Promise<Bucket> {
    return this.#run('getAppState', call, async () =>
      decodeState((await this.#layout.app(appName).get()).get('state')),
    );
  }

  /**
   * Apps with at least one session: an app document's id is not reversible, so
   * a session of each names it (the first of its first sessions whose
   * `appName` reads, then the app document's own; an app none of them names is
   * left out, with a process warning).
   */
  listAppNames(call?: StoreCall): Promise<string[]> {
    return this.#run('listAppNames', call, async () => {
      const names: string[] = [];
      for (const app of await this.#layout.root.listDocuments()) {
        const first = await app.collection(SESSIONS).limit(APP_NAMERS).get();
        if (first.empty) continue;
        const named = first.docs.map((head) => head.get('appName')).find(isText) ?? (await app.get()).get('appName');
        if (isText(named)) names.push(readText(named));
        else
          process.emitWarning(
            `adk-state: the sessions of app document ${JSON.stringify(app.id)} name no readable app (their appName fields were changed outside adk-state); the app is left out of listAppNames until one is repaired`,
            { type: 'AdkStateWarning', code: 'ADK_STATE_UNNAMED_APP' },
          );
      }
      return names;
    });
  }

  /**
   * Every session of the app (of one user, when given), from the `userId` and
   * `id` fields of every session document of the app, whatever its listing
   * fields hold (one read per session document, and the user's are told
   * apart after reading: a document whose `userKey` was removed is found
   * too). Where `userId` or `id` does not read, the document id names them,
   * as in a listing; a document neither names (a hashed id) is left out,
   * with a process warning.
   */
  listSessionKeys(appName: string, userId: string | undefined, call?: StoreCall): Promise<StoredSessionKey[]> {
    return this.#run('listSessionKeys', call, async () => {
      const keys: StoredSessionKey[] = [];
      const heads = await this.#layout.sessions(appName).select('userId', 'id').get();
      for (const head of heads.docs) {
        const names = sessionNames({ userId: head.get('userId'), id: head.get('id') }, head.id);
        if (names === undefined) {
          process.emitWarning(
            `adk-state: a session document ${JSON.stringify(head.id)} of app ${JSON.stringify(appName)} names no readable user and session id; listSessionKeys leaves it out`,
            { type: 'AdkStateWarning', code: 'ADK_STATE_UNNAMED_SESSION' },
          );
          continue;
        }
        if (userId === undefined || names.userId === userId) keys.push({ userId: names.userId, sessionId: names.id });
      }
      return keys.sort(compareSessionKeys);
    });
  }

  async #createSession(input: CreateInput, call: StoreCall | undefined): Promise<CreateResult> {
    const refs = this.#layout.session(input.key);
    const incarnation = randomUUID();
    const head: SessionDocument = {
      appName: storeText(input.key.appName),
      userId: storeText(input.key.userId),
      userKey: documentId(input.key.userId),
      id: storeText(input.key.sessionId),
      idOrder: idOrder(input.key.sessionId),
      lastUpdateTime: input.createTime,
      lastUpdateKey: numberKey(input.createTime),
      revision: input.revision,
      eventCount: 0,
      incarnation,
      state: encodeState(input.state),
      recent: [],
    };
    const userDelta = encodeState(input.userDelta);
    const appDelta = encodeState(input.appDelta);
    head.bucketsWritten = bucketsWritten(input.userDelta.size > 0, input.appDelta.size > 0, input.revision);
    const fields = { ...head, ...this.#expiryFields('create') };
    assertDocumentFits('state', refs.session.path, fields);
    const written = `${incarnation}.${input.revision}`;
    const userIdentity = { appName: head.appName, userId: head.userId };
    const appIdentity = { appName: head.appName };
    for (let round = 1; ; round++) {
      let attempt: CreateAttempt;
      try {
        attempt = await this.#transaction('createSession', call, async (tx): Promise<CreateAttempt> => {
          const [session, user, app] = await tx.getAll(refs.session, refs.user, refs.app);
          if (session?.exists) {
            // A commit of this very call that went through before the client retried it.
            if (session.get('incarnation') === incarnation) {
              return {
                status: 'created',
                userState: decodeState(user?.get('state')),
                appState: decodeState(app?.get('state')),
              };
            }
            return { status: 'exists' };
          }
          const leftovers = await tx.get(refs.events.select().limit(1));
          if (!leftovers.empty) return { status: 'leftovers' };
          tx.create(refs.session, fields);
          const userState = this.#mergeBucket(tx, refs.user, user, userDelta, userIdentity, written);
          const appState = this.#mergeBucket(tx, refs.app, app, appDelta, appIdentity, written);
          return { status: 'created', userState, appState };
        });
      } catch (error) {
        // Another writer created the session between this transaction's read and its commit; nothing was written.
        if (grpcCode(error) === ALREADY_EXISTS) return { status: 'exists' };
        throw error;
      }
      if (attempt.status !== 'leftovers') return attempt;
      if (round >= MAX_CREATE_ROUNDS) {
        throw new BackendError(
          'createSession',
          new Error(`events of a deleted session keep reappearing under this key; try again later`),
          { mayHaveApplied: false },
        );
      }
      await this.#deleteLeftovers(refs, call);
    }
  }

  async #loadSession(
    key: SessionKey,
    filter: EventFilter,
    call: StoreCall | undefined,
  ): Promise<LoadResult | undefined> {
    const refs = this.#layout.session(key);
    if (filter.limit !== undefined && filter.limit > 0) {
      // The last n events by their ids, kept in the session document: no query, whatever the history's length.
      const read = await this.#readSession(refs, undefined, call);
      if (!read) return undefined;
      checkCall(call);
      const recent = await this.#recentEvents(refs, read.head, filter.limit, read.readTime, call);
      if (recent) return loaded(read, selectStored(recent, filter, read.head.eventCount));
      checkCall(call);
    }
    const read = await this.#readSession(refs, eventQuery(refs, filter), call);
    if (!read) return undefined;
    const stored = read.events.map((doc) => doc.data() as EventDocument);
    return loaded(read, selectStored(stored, filter, read.head.eventCount));
  }

  /**
   * Reads the session, its buckets and the event documents of this life
   * written after `held.revision`, at one moment: new events, and any event
   * written again in place since. Those must be exactly the positions after
   * the held ones; otherwise (another life, a rewrite) the whole log is read.
   */
  async #loadSessionSince(
    key: SessionKey,
    held: HeldSession,
    call: StoreCall | undefined,
  ): Promise<SinceResult | undefined> {
    const refs = this.#layout.session(key);
    const read = await this.#readSession(refs, refs.events.where('revision', '>', held.revision), call);
    if (!read) return undefined;
    const { head } = read;
    const written = read.events
      .map((doc) => doc.data() as EventDocument)
      .filter((event) => event.incarnation === head.incarnation)
      .sort((a, b) => a.seq - b.seq);
    const follows =
      head.incarnation === held.logMark &&
      head.revision >= held.revision &&
      written.length === head.eventCount - held.events &&
      written.every((event, index) => event.seq === held.events + 1 + index);
    if (!follows) {
      checkCall(call);
      const whole = await this.#loadSession(key, {}, call);
      return whole && { ...whole, restart: true };
    }
    return { ...loaded(read, written.map(toStored)), restart: false };
  }

  async #appendEvent(input: AppendInput, call: StoreCall | undefined): Promise<AppendResult> {
    const refs = this.#layout.session(input.key);
    const eventRef = this.#layout.event(refs, input.event.id);
    const sessionDelta = encodeState(input.sessionDelta);
    const userDelta = encodeState(input.userDelta);
    const appDelta = encodeState(input.appDelta);
    const newRevision = input.expectedRevision + 1;
    const eventId = storeText(input.event.id);
    const json = storeText(input.event.json);
    // The event's document at position `seq` of the life `incarnation`. Measured before anything is read, with
    // the largest position and an incarnation of the same length, so a document too large is refused at once.
    const eventDocument = (seq: number, incarnation: string): EventDocument => ({
      id: eventId,
      timestamp: input.event.timestamp,
      timestampKey: numberKey(input.event.timestamp),
      seq,
      revision: newRevision,
      incarnation,
      json,
    });
    assertDocumentFits('event', eventRef.path, { ...eventDocument(Number.MAX_SAFE_INTEGER, randomUUID()) });
    const userIdentity = { appName: storeText(input.key.appName), userId: storeText(input.key.userId) };
    const appIdentity = { appName: userIdentity.appName };
    const writesUser = input.userDelta.size > 0;
    const writesApp = input.appDelta.size > 0;
    const bucketRefs: DocumentReference[] = [];
    if (writesUser) bucketRefs.push(refs.user);
    if (writesApp) bucketRefs.push(refs.app);
    return this.#transaction('appendEvent', call, async (tx): Promise<AppendResult> => {
      // The buckets are written blind (merged field by field), so the transaction does not read
      // them: it would lock every app's and user's document against all other sessions' appends.
      // They are read beside it only to refuse a bucket that would outgrow its document.
      const bucketRead = bucketRefs.length > 0 ? this.firestore.getAll(...bucketRefs) : Promise.resolve([]);
      // Not settled together with the transaction's read: when the first read of a transaction fails,
      // @google-cloud/firestore (8.x, 9.x) leaves a rejected promise that only its rollback handles, and
      // the rollback must come at once. The bucket read's own failure is handled here, and seen below.
      // Held for close() too: it may run on after the call has failed.
      this.#inFlight.track(bucketRead).catch(() => undefined);
      const [session, existing] = await tx.getAll(refs.session, eventRef);
      const buckets = await bucketRead;
      if (!session?.exists) return { status: 'missing' };
      const head = session.data() as SessionDocument;
      const stored = existing?.exists ? (existing.data() as EventDocument) : undefined;
      const current = stored?.incarnation === head.incarnation ? stored : undefined;
      if (head.revision !== input.expectedRevision) {
        // A retried commit that had in fact gone through finds its own write: this event, written at the
        // revision this append writes, also when another writer's appends came after it.
        const ownWrite =
          head.revision >= newRevision &&
          current?.revision === newRevision &&
          readText(current.json) === input.event.json;
        return ownWrite ? { status: 'ok' } : { status: 'stale', revision: head.revision };
      }
      if (!Number.isSafeInteger(head.eventCount) || (current && !Number.isSafeInteger(current.seq))) {
        throw new UnreadableDataError(
          `the stored event count of session ${JSON.stringify(input.key.sessionId)}, or the position of event ${JSON.stringify(input.event.id)}, is not a whole number`,
        );
      }
      const seq = current ? current.seq : head.eventCount + 1;
      const recent = current ? undefined : [...(head.recent ?? []), eventRef.id].slice(-RECENT_EVENTS);
      const headUpdate = {
        ...(recent ? { recent } : {}),
        revision: newRevision,
        lastUpdateTime: input.lastUpdateTime,
        lastUpdateKey: numberKey(input.lastUpdateTime),
        eventCount: Math.max(head.eventCount, seq),
        // Sessions written before the field existed get it with their next append, and so does one whose
        // listing fields were removed outside adk-state (with `lastUpdateKey` above).
        userKey: documentId(input.key.userId),
        idOrder: idOrder(input.key.sessionId),
        bucketsWritten: bucketsWritten(writesUser, writesApp, newRevision),
        ...this.#expiryFields('append'),
      };
      const merged = { ...head, ...headUpdate, state: { ...head.state, ...sessionDelta } };
      assertDocumentFits('state', refs.session.path, merged);
      tx.set(eventRef, eventDocument(seq, head.incarnation));
      tx.update(refs.session, { ...headUpdate, ...statePaths(sessionDelta) });
      let next = 0;
      const written = `${head.incarnation}.${newRevision}`;
      if (writesUser) {
        this.#mergeBucket(tx, refs.user, buckets[next++], userDelta, userIdentity, written);
      }
      if (writesApp) {
        this.#mergeBucket(tx, refs.app, buckets[next++], appDelta, appIdentity, written);
      }
      return { status: 'ok' };
    });
  }

  async #deleteSession(key: SessionKey, call: StoreCall | undefined): Promise<void> {
    const refs = this.#layout.session(key);
    const incarnation = await this.#transaction('deleteSession', call, async (tx) => {
      const session = await tx.get(refs.session);
      if (!session.exists) return undefined;
      tx.delete(refs.session);
      return (session.data() as SessionDocument).incarnation;
    });
    if (incarnation === undefined) return;
    try {
      await this.#deleteEvents(refs, incarnation, call);
    } catch (error) {
      // The session is deleted already: whatever fails now, the call did write.
      throw isAdkStateError(error) ? error : new BackendError('deleteSession', error, { mayHaveApplied: true });
    }
  }

  /**
   * The events of a session whose document is gone, chunk by chunk. Once the
   * call's deadline has passed, the rest stays for the next createSession of
   * this key to remove.
   */
  async #deleteEvents(refs: SessionRefs, incarnation: string, call: StoreCall | undefined): Promise<void> {
    const ofThisSession = refs.events.where('incarnation', '==', incarnation).select().limit(DELETE_CHUNK);
    for (let refused = 0; refused < MAX_REFUSED_CHUNKS; ) {
      if (callAbandoned(call)) return;
      const chunk = await ofThisSession.get();
      if (chunk.empty) return;
      // Each delete only while the document is as the query found it: the key may have been created
      // again meanwhile, and its new events, documents named by their event ids, can be these very
      // documents. Then the whole chunk is refused, and the next query leaves the new ones out.
      const batch = this.firestore.batch();
      for (const doc of chunk.docs) batch.delete(doc.ref, { lastUpdateTime: doc.updateTime });
      try {
        await batch.commit();
      } catch (error) {
        if (grpcCode(error) !== FAILED_PRECONDITION || error instanceof ClientSetupFailed) throw error;
        refused++;
        continue;
      }
      if (chunk.size < DELETE_CHUNK) return;
    }
  }

  async #listSessions(query: ListQuery, call: StoreCall | undefined): Promise<ListResult> {
    const sessions = this.#layout.sessions(query.appName);
    // By the user's encoded id, never the raw one: a long user id is too large for a query value.
    const matching = query.userId === undefined ? sessions : sessions.where('userKey', '==', documentId(query.userId));
    const ordered = matching
      .select(...LISTED_FIELDS)
      .orderBy('lastUpdateKey', query.order)
      .orderBy('idOrder', 'asc');
    const appRef = this.#layout.app(query.appName);
    // How many sessions from the start the window needs; may be beyond what a query takes.
    const needed = query.limit === undefined ? undefined : query.offset + query.limit;
    // Every read is made at one moment, the read time of a plain read of the app's bucket: a plain
    // query reports a read time later than the moment it scanned (on an emulator), so the sessions
    // and the buckets read beside them could show two halves of one append.
    return this.#readAtOneMoment(
      'the sessions',
      call,
      async () => ({ at: ((await this.firestore.getAll(appRef))[0] as DocumentSnapshot).readTime }),
      (at) => this.#listAt(at, query, { matching, ordered, appRef, needed }, call),
    );
  }

  /** One listing, every read at the time `at`; `read` holds every document it read, for `showsMoment`. */
  async #listAt(
    at: Timestamp,
    query: ListQuery,
    reads: { matching: Query; ordered: Query; appRef: DocumentReference; needed: number | undefined },
    call: StoreCall | undefined,
  ): Promise<AtMoment<ListResult>> {
    const { matching, ordered, appRef, needed } = reads;
    const read: DocumentSnapshot[] = [];
    // Each head's document: its id names a head whose own fields do not (see `listedRecord`), its update
    // time is what its buckets are compared with (see `tornBuckets`).
    const documents = new Map<SessionDocument, DocumentSnapshot>();
    const heads = (docs: DocumentSnapshot[]) => {
      read.push(...docs);
      return docs.map((doc) => {
        const head = doc.data() as SessionDocument;
        documents.set(head, doc);
        return head;
      });
    };
    // Every head of the listing, and those the ordered query returns: a head whose `lastUpdateKey` or
    // `idOrder` was removed outside adk-state is in the first count only (an order leaves it out). A
    // listing of every session has the second in its length.
    const count = (tx: Transaction, of: Query) => tx.get(of.count()).then((counted) => counted.data().count);
    let window: SessionDocument[] = [];
    let total: number;
    let orderable: number;
    // The limit of the query that read `window`, when it may have left sessions out.
    let cut: number | undefined;
    if (needed === undefined) {
      [window, total] = await this.#readAt(at, (tx) =>
        settleAll<[SessionDocument[], number]>([
          tx.get(ordered).then((snapshot) => heads(snapshot.docs)),
          count(tx, matching),
        ]),
      );
      orderable = window.length;
    } else if (needed > 0 && needed <= MAX_QUERY_LIMIT) {
      [window, total, orderable] = await this.#readAt(at, (tx) =>
        settleAll<[SessionDocument[], number, number]>([
          tx.get(ordered.limit(needed)).then((snapshot) => heads(snapshot.docs)),
          count(tx, matching),
          count(tx, ordered),
        ]),
      );
      cut = needed;
    } else {
      // No session asked for (limit 0), or a window past what a query takes: the total decides.
      [total, orderable] = await this.#readAt(at, (tx) =>
        settleAll<[number, number]>([count(tx, matching), count(tx, ordered)]),
      );
      if (needed > 0 && query.offset < total) {
        checkCall(call);
        const limit = Math.min(total, MAX_QUERY_LIMIT);
        cut = limit < total ? limit : undefined;
        window = await this.#readAt(at, async (tx) => heads((await tx.get(ordered.limit(limit))).docs));
      }
    }
    // A session id longer than the order key keeps only its prefix; ties at the window's end are read whole.
    const last = window[window.length - 1];
    if (last && cut !== undefined && window.length >= cut && mayBeCut(last.idOrder)) {
      checkCall(call);
      const tied = await this.#readAt(at, async (tx) =>
        heads(
          (
            await tx.get(
              matching
                .select(...LISTED_FIELDS)
                .where('lastUpdateKey', '==', last.lastUpdateKey)
                .where('idOrder', '==', last.idOrder),
            )
          ).docs,
        ),
      );
      window = [
        ...window.filter((head) => head.lastUpdateKey !== last.lastUpdateKey || head.idOrder !== last.idOrder),
        ...tied,
      ];
    }
    if (total > orderable && needed !== 0) {
      // Heads the order left out: found by a scan of the listing's ordering fields (only when the counts
      // differ), then read, and placed by their own fields among the others below.
      checkCall(call);
      window = [...window, ...(await this.#readAt(at, (tx) => this.#unordered(tx, matching).then(heads)))];
    }
    const listed = window.flatMap((head) => {
      const doc = documents.get(head) as DocumentSnapshot;
      return listedRecord(head, doc.id, query.appName).map((record) => ({ record, head, doc }));
    });
    const bySession = compareSessions(query.order);
    listed.sort((a, b) => bySession(a.record, b.record));
    const shown = listed.slice(query.offset, query.limit === undefined ? undefined : query.offset + query.limit);
    const page = shown.map(({ record }) => record);
    const owners = [...new Set(page.map((record) => record.userId))];
    checkCall(call);
    const buckets = await this.#readAt(at, (tx) =>
      tx.getAll(appRef, ...owners.map((userId) => this.#layout.user(query.appName, userId))),
    );
    read.push(...buckets);
    const [app, ...users] = buckets;
    const userStates = new Map<string, Bucket>();
    const userBuckets = new Map<string, DocumentSnapshot | undefined>();
    owners.forEach((userId, index) => {
      userBuckets.set(userId, users[index]);
      userStates.set(userId, decodeState(users[index]?.get('state')));
    });
    const torn = shown.some(({ record, head, doc }) => tornBuckets(head, doc, userBuckets.get(record.userId), app));
    return {
      answer: { totalItems: total, sessions: page, userStates, appState: decodeState(app?.get('state')) },
      read,
      torn,
    };
  }

  /** The heads of `matching` without `lastUpdateKey` or `idOrder`, with the fields a listing reads. */
  async #unordered(tx: Transaction, matching: Query): Promise<DocumentSnapshot[]> {
    const fields = (await tx.get(matching.select('lastUpdateKey', 'idOrder'))).docs;
    const refs = fields
      .filter((doc) => doc.get('lastUpdateKey') === undefined || doc.get('idOrder') === undefined)
      .map((doc) => doc.ref);
    return refs.length === 0 ? [] : tx.getAll(...refs, { fieldMask: LISTED_FIELDS });
  }

  /**
   * Merges a delta into a bucket document inside `tx` (when there is one);
   * returns the merged bucket. `written` names the commit (the session's
   * life and new revision): it changes the document even when the delta
   * leaves every value as it was, so that its update time is the commit's
   * (Firestore keeps the old one for a write that changes nothing).
   */
  #mergeBucket(
    tx: Transaction,
    ref: DocumentReference,
    current: DocumentSnapshot | undefined,
    delta: StoredState,
    identity: Record<string, unknown>,
    written: string,
  ): Bucket {
    const state: StoredState = { ...(current?.get('state') as StoredState | undefined), ...delta };
    if (Object.keys(delta).length > 0) {
      assertDocumentFits('state', ref.path, { ...identity, written, state });
      tx.set(ref, { ...identity, written, state: delta }, { merge: true });
    }
    return decodeState(state);
  }

  /** The expiry time a write stamps: on create, with either clock; on append, on the idle clock only. */
  #expiryFields(write: 'create' | 'append'): Record<string, Date> {
    const expiry = this.#expiry;
    if (expiry === undefined || (write === 'append' && expiry.clock === 'create')) return {};
    return { [this.#ttlField]: new Date(this.#now() + expiry.seconds * 1_000) };
  }

  /**
   * A read-write transaction that stops once the call's deadline has passed:
   * no attempt starts after it, and no commit is sent after it. Its reads
   * get a grace past the deadline (see `withTransactionGrace`), so that an
   * abandoned transaction is rolled back rather than left holding its locks
   * whenever the server answers within it. A failure
   * before any attempt got as far as its commit is a {@link BackendError}
   * that says nothing was written; after that, the outcome is unknown and
   * the error is passed on as it is (core then says it may have applied).
   */
  async #transaction<T>(
    operation: string,
    call: StoreCall | undefined,
    run: (tx: Transaction) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let committed = false;
      try {
        return await this.firestore.runTransaction(
          async (tx) => {
            checkCall(call);
            const result = await withTransactionGrace(() => run(tx));
            checkCall(call);
            // The client sends the commit as soon as this returns.
            committed = true;
            return result;
          },
          { maxAttempts: this.#maxAttempts },
        );
      } catch (error) {
        // Stored data that cannot be read fails the same way on every attempt: the service says so.
        if (committed || isAdkStateError(error) || isUnreadableData(error)) throw error;
        // Under contention the server may end a transaction before its commit (the emulator answers
        // INVALID_ARGUMENT "Transaction is invalid or closed", which the client does not retry):
        // nothing was written, so it starts again, as an aborted one would.
        if (attempt < this.#maxAttempts && isClosedTransaction(error)) continue;
        throw new BackendError(operation, error, { mayHaveApplied: false });
      }
    }
  }

  /**
   * The last `n` events of a session (fewer if it has fewer) by the ids its
   * document keeps, as they were at `at`, the document's read time; undefined
   * when the ids do not cover them (a session written before `recent` existed)
   * or the documents do not match (left over from a deleted session), and the
   * caller then reads with a query. The events are read as they are now,
   * which is the state at `at` unless one of them changed since (every such
   * change also changes the session); only then are they read again at `at`.
   */
  async #recentEvents(
    refs: SessionRefs,
    head: SessionDocument,
    n: number,
    at: Timestamp,
    call: StoreCall | undefined,
  ): Promise<EventDocument[] | undefined> {
    const recent = head.recent;
    const count = Math.min(n, head.eventCount);
    if (!Array.isArray(recent) || recent.length < count) return undefined;
    if (count === 0) return [];
    const wanted = recent.slice(recent.length - count).map((id) => refs.events.doc(id));
    const docs = await this.#readAtOneMoment<DocumentSnapshot[]>(
      'the last events',
      call,
      async () => {
        const now = await this.firestore.getAll(...wanted);
        return now.every((doc) => doc.exists) && showsMoment(now, at) ? { answer: now } : { at };
      },
      // The moment is the session's, read before: there is no other to read at, so this read is the answer.
      async () => ({ answer: await this.#readAt(at, (tx) => tx.getAll(...wanted)), read: [] }),
    );
    const first = head.eventCount - count + 1;
    const events = docs.map((doc) => (doc.exists ? (doc.data() as EventDocument) : undefined));
    const matches = events.every(
      (event, index) => event?.incarnation === head.incarnation && event.seq === first + index,
    );
    return matches ? (events as EventDocument[]) : undefined;
  }

  /**
   * The session document, its buckets and, when a query is given, its
   * results, all as they were at one moment (undefined when there is no
   * session then): the moment is the read time of a plain read of the
   * session document. Plain reads alone are not enough on an emulator: a
   * batched get may show a commit document by document, and a query reports
   * a read time later than the moment it scanned, so an append that lands
   * during the scan would be in the documents but not in the events.
   */
  #readSession(
    refs: SessionRefs,
    query: Query | undefined,
    call: StoreCall | undefined,
  ): Promise<SessionRead | undefined> {
    return this.#readAtOneMoment<SessionRead | undefined>(
      'a session and its events',
      call,
      async () => {
        const [head] = await this.firestore.getAll(refs.session);
        return head?.exists ? { at: head.readTime } : { answer: undefined };
      },
      async (at) => {
        const [docs, events] = await this.#readAt(at, (tx) =>
          settleAll<[DocumentSnapshot[], QueryDocumentSnapshot[]]>([
            tx.getAll(refs.session, refs.user, refs.app),
            query ? tx.get(query).then((read) => read.docs) : Promise.resolve([]),
          ]),
        );
        const [session, user, app] = docs;
        const answer = session?.exists
          ? { head: session.data() as SessionDocument, readTime: session.readTime, user, app, events }
          : undefined;
        const torn = answer !== undefined && tornBuckets(answer.head, session as DocumentSnapshot, user, app);
        return { answer, read: [...docs, ...events], torn };
      },
    );
  }

  /**
   * Reads at one moment, as every read of more than one document does:
   * `anchor` is a plain read whose read time is the moment (or which is the
   * answer already), and `read` reads at that time (see `#readAt`). Its
   * documents must show the moment (`showsMoment`): a server that ignores
   * the read time shows later writes, and then everything is read again at
   * a new moment, up to core's `CONSISTENT_READ_ATTEMPTS` times in all
   * before {@link ConsistentReadContention}. Each step begins only while the
   * call has time left. A read that shows its moment but only part of a
   * commit (`torn`) is read again too, at most {@link TORN_READS} times in
   * all and only while the call has time left; then, or when a later
   * attempt fails, that read is the answer.
   */
  async #readAtOneMoment<T>(
    what: string,
    call: StoreCall | undefined,
    anchor: () => Promise<Anchor<T>>,
    read: (at: Timestamp) => Promise<AtMoment<T>>,
  ): Promise<T> {
    let tornReads = 0;
    /** The last read that showed its moment but was torn: a better answer than none. */
    let kept: { answer: T } | undefined;
    for (let attempt = 1; ; attempt++) {
      let at: Timestamp;
      let step: AtMoment<T>;
      try {
        if (attempt > 1) checkCall(call);
        const found = await anchor();
        if ('answer' in found) return found.answer;
        checkCall(call);
        at = found.at;
        step = await read(at);
      } catch (error) {
        // A later attempt that fails (the call's time run out among others) leaves the kept read the answer.
        if (kept) return kept.answer;
        throw error;
      }
      const { answer, read: docs, torn } = step;
      if (showsMoment(docs, at)) {
        // A bucket changed outside adk-state looks torn at every moment, so a torn read is read again only
        // a few times, and only while the call has time left: then it is the answer.
        if (!torn || ++tornReads >= TORN_READS || attempt >= CONSISTENT_READ_ATTEMPTS || callAbandoned(call)) {
          return answer;
        }
        kept = { answer };
      } else if (attempt >= CONSISTENT_READ_ATTEMPTS) {
        if (kept) return kept.answer;
        throw new ConsistentReadContention(what, attempt);
      }
    }
  }

  /** Reads in a read-only transaction at the fixed time `at` (no transaction is begun: nothing to roll back). */
  #readAt<T>(at: Timestamp, read: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.firestore.runTransaction(read, { readOnly: true, readTime: at });
  }

  /** Removes events left by an earlier session with this key, while (and only while) no session has it. */
  async #deleteLeftovers(refs: SessionRefs, call: StoreCall | undefined): Promise<void> {
    for (;;) {
      const done = await this.#transaction('createSession', call, async (tx) => {
        if ((await tx.get(refs.session)).exists) return true;
        const chunk = await tx.get(refs.events.select().limit(DELETE_CHUNK));
        for (const doc of chunk.docs) tx.delete(doc.ref);
        return chunk.size < DELETE_CHUNK;
      });
      if (done) return;
    }
  }
}

/** The {@link ClientSetupFailed} that `error` is, or that it was caused by (the store's own errors wrap it). */
function setUpFailureIn(error: unknown): ClientSetupFailed | undefined {
  for (let at = error, depth = 0; at instanceof Error && depth < 4; at = at.cause, depth++) {
    if (at instanceof ClientSetupFailed) return at;
  }
  return undefined;
}

function compareTimes(a: Timestamp, b: Timestamp | undefined): number {
  if (!b) return Number.NaN;
  return a.seconds === b.seconds ? a.nanoseconds - b.nanoseconds : a.seconds - b.seconds;
}

/**
 * True when documents read at `at` show the state at `at`: none was written
 * at or after it. A server that honours the read time passes always; one
 * that ignores it (and reports its own read time) shows later writes, and
 * they are caught here.
 */
function showsMoment(docs: DocumentSnapshot[], at: Timestamp): boolean {
  return docs.every((doc) => !doc.exists || compareTimes(at, doc.updateTime) > 0);
}

/** The {@link SessionDocument.bucketsWritten} of a write that writes `revision`, and the user and/or app bucket. */
function bucketsWritten(writesUser: boolean, writesApp: boolean, revision: number): string {
  return `${writesUser ? 'u' : ''}${writesApp ? 'a' : ''}@${revision}`;
}

/**
 * Whether a read at one moment shows the session's last write but not a
 * bucket that write wrote in the same commit (the bucket missing, or last
 * changed before the session): part of one commit. Firestore commits are
 * atomic to every read; Google's emulator has shown a read at a fixed time
 * one commit's session document without its user document.
 */
function tornBuckets(
  head: SessionDocument,
  session: DocumentSnapshot,
  user: DocumentSnapshot | undefined,
  app: DocumentSnapshot | undefined,
): boolean {
  const marker = head.bucketsWritten;
  if (typeof marker !== 'string' || session.updateTime === undefined) return false;
  const at = marker.lastIndexOf('@');
  // Written with another revision than the one the session is at: a writer since did not say.
  if (at < 0 || Number(marker.slice(at + 1)) !== head.revision) return false;
  const wrote = marker.slice(0, at);
  const older = (bucket: DocumentSnapshot | undefined) =>
    bucket?.exists !== true ||
    bucket.updateTime === undefined ||
    compareTimes(bucket.updateTime, session.updateTime as Timestamp) < 0;
  return (wrote.includes('u') && older(user)) || (wrote.includes('a') && older(app));
}

/** The events query a filter needs (undefined when it can return nothing). */
function eventQuery(refs: SessionRefs, filter: EventFilter): Query | undefined {
  if (filter.limit === 0) return undefined;
  if (filter.limit !== undefined)
    return refs.events.orderBy('seq').limitToLast(Math.min(filter.limit, MAX_QUERY_LIMIT));
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
  return events.slice(start).map(toStored);
}

/** A load's answer: the session and its buckets as read, and the events chosen of them. */
function loaded(read: SessionRead, events: StoredEvent[]): LoadResult {
  return {
    session: toRecord(read.head),
    userState: decodeState(read.user?.get('state')),
    appState: decodeState(read.app?.get('state')),
    events,
    logMark: read.head.incarnation,
  };
}

/** An event document as stored; a time of the wrong type is left for core's decode to refuse. */
function toStored(event: EventDocument): StoredEvent {
  return { id: readText(event.id), timestamp: event.timestamp, json: readText(event.json) };
}

/**
 * A listed head as a record. One whose identity fields (`appName`, `userId`,
 * `id`) were changed outside adk-state so that they do not read is still
 * listed, under the key its place says: the listing's app, and the user and
 * id its plain document id spells. Its state then holds an entry that fails
 * reads as unreadable data, so core lists it with what can be read and warns,
 * and `getSession` of it fails as it does for any damaged head. A head whose
 * document id is hashed (ids over 400 escaped characters) and whose ids do
 * not read cannot be named: it is left out, with a process warning.
 */
function listedRecord(head: SessionDocument, documentId: string, appName: string): SessionRecord[] {
  try {
    return [toRecord(head)];
  } catch (error) {
    if (!isUnreadableData(error)) throw error;
    const names = sessionNames(head, documentId);
    if (names === undefined) {
      process.emitWarning(
        `adk-state: a session document ${JSON.stringify(documentId)} of app ${JSON.stringify(appName)} names no readable user and session id (${error.message}); it is left out of listings until repaired or removed`,
        { type: 'AdkStateWarning', code: 'ADK_STATE_UNNAMED_SESSION' },
      );
      return [];
    }
    const { userId, id } = names;
    const state = decodeState(head.state);
    state.set('', unreadableText(`the stored session's identity fields do not read: ${error.message}`));
    return [{ id, appName, userId, lastUpdateTime: head.lastUpdateTime, revision: head.revision, state }];
  }
}

/**
 * The user and session id of a session document: its `userId` and `id`
 * fields, or where one does not read (changed outside adk-state), the part
 * of the document id that encodes it; `undefined` when neither names it (a
 * hashed document id).
 */
function sessionNames(
  head: { userId?: unknown; id?: unknown },
  documentId: string,
): { userId: string; id: string } | undefined {
  const parts = documentIdParts(documentId);
  const userId = readableText(head.userId) ?? parts?.[0];
  const id = readableText(head.id) ?? parts?.[1];
  if (userId === undefined || id === undefined || (parts !== undefined && parts.length !== 2)) return undefined;
  return { userId, id };
}

/** The string a stored text field holds, or `undefined` when it holds none. */
function readableText(value: unknown): string | undefined {
  return isText(value) ? readText(value) : undefined;
}

function toRecord(head: SessionDocument): SessionRecord {
  return {
    id: readText(head.id),
    appName: readText(head.appName),
    userId: readText(head.userId),
    lastUpdateTime: head.lastUpdateTime,
    revision: head.revision,
    state: decodeState(head.state),
  };
}

/** The server ended the transaction before its commit (gRPC INVALID_ARGUMENT, "Transaction is invalid or closed"). */
function isClosedTransaction(error: unknown): boolean {
  return (
    error instanceof Error &&
    (error as { code?: unknown }).code === 3 &&
    /transaction is invalid or closed/i.test(error.message)
  );
}
