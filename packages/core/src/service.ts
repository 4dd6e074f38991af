/**
 * The ADK session service built on any {@link SessionStore}. All of the
 * contract that is not storage lives here, once: request checks, the scope
 * split, `temp:` handling, value validation, revision-based stale detection
 * and the in-place update of the caller's session object.
 */
import { randomInt, randomUUID } from 'node:crypto';
import {
  type AppendEventRequest,
  BaseSessionService,
  type CreateSessionRequest,
  type DeleteSessionRequest,
  type Event,
  type GetSessionRequest,
  type ListSessionsRequest,
  type ListSessionsResponse,
  type Session,
} from '@google/adk';
import { Deadline, DeadlineExceeded } from './deadline.js';
import {
  AdkStateError,
  AlreadyExistsError,
  BackendError,
  InvalidArgumentError,
  isUnreadableData,
  SessionNotFoundError,
  StaleSessionError,
  UnreadableDataError,
} from './errors.js';
import {
  assertStorableEvent,
  copyEvent,
  decodeEvent,
  encodeEvent,
  freezeEvent,
  type StoredEvent,
  takeTempEntries,
} from './events.js';
import { pageInfo, toListQuery } from './listing.js';
import { type CachedLog, LogCache, logBytes } from './log-cache.js';
import { assertPositiveNumber } from './options.js';
import { adoptIndex, firstPositions, placeEvent } from './placement.js';
import { assertNonEmptyString, isPossibleKey, type SessionKey, toEventFilter } from './requests.js';
import {
  type Bucket,
  bucketToObject,
  combineState,
  dropWrite,
  type ScopedWrites,
  scopeOf,
  splitState,
  withoutTemp,
} from './scopes.js';
import type {
  AppendResult,
  HeldSession,
  ImportInput,
  LoadResult,
  SessionHead,
  SessionRecord,
  SessionStore,
  StoreCall,
  StoredSessionKey,
} from './store.js';
import { type CallTarget, type StoreUsage, Telemetry, type TelemetryOptions } from './telemetry.js';
import { ToldOnce } from './told.js';
import { defineEntry } from './values.js';

/** Options of every adk-state session service. */
export interface StateSessionServiceOptions {
  /**
   * What `appendEvent` does when the stored session changed since the caller's
   * session object was loaded: `'throw'` (default) raises
   * {@link StaleSessionError}; `'reload'` reloads the caller's session from
   * storage, in place, and then applies the event.
   */
  onStale?: 'throw' | 'reload';
  /** Generates session ids when none is given. Default: UUID v4. */
  generateId?: () => string;
  /** The clock for creation times, in milliseconds. Default: `Date.now`. */
  now?: () => number;
  /**
   * The deadline of every call, in milliseconds (default 30,000; `Infinity`
   * for none). A call that has not settled by then rejects at once with a
   * {@link BackendError} whose `timedOut` is true; the store is told through
   * the call's abort signal so that it can stop the abandoned work.
   */
  timeoutMs?: number;
  /**
   * With `onStale: 'reload'`: how many times one append reloads the session
   * when other writers keep changing it, before it gives up with a
   * {@link StaleSessionError} whose `contention` is true. Default 32.
   */
  maxReloads?: number;
  /**
   * OpenTelemetry spans for store calls, through `@opentelemetry/api` when it
   * is installed (default on; a no-op without an SDK). `false` turns them
   * off; `{ recordIds: true }` adds user and session ids to the spans.
   */
  telemetry?: boolean | TelemetryOptions;
  /**
   * With a store that reads incrementally (`loadSessionSince`): the most
   * bytes of recently read session logs this service keeps, so that a
   * `getSession` without a filter of a session read before (what the
   * `Runner` does at every turn) asks the store only for the events that
   * follow. Default 32 MiB; 0 turns the cache off. The state, the buckets
   * and the head are read every time, and the store says when the held log
   * is no longer a prefix of the stored one (another life of the id, a
   * re-appended event), so reads are what they would be without it.
   */
  logCacheBytes?: number;
  /**
   * With the log cache on: whole reads hand out the cached events themselves,
   * deep-frozen, instead of a deep copy of each. A whole `getSession` then
   * costs what it reads anew, not a copy of the whole history (the
   * `Runner` reads the whole session at the start of every turn).
   * The price: the events of a whole read are shared with every other whole
   * read of the session through this service, and changing one in place
   * throws a `TypeError` (ADK's Runner, its compactors and its request
   * building never do; they copy or replace). The array, the state and the
   * session object stay each read's own. Default false: every read copies.
   */
  shareReadEvents?: boolean;
}

/** The default of {@link StateSessionServiceOptions.timeoutMs}. */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** The longest finite deadline, the most a timer can wait (2^31 - 1 ms, about 24.8 days). */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** The default of {@link StateSessionServiceOptions.logCacheBytes}: 32 MiB. */
export const DEFAULT_LOG_CACHE_BYTES = 32 * 1024 * 1024;

/** The default of {@link StateSessionServiceOptions.maxReloads}. */
export const DEFAULT_MAX_RELOADS = 32;

/**
 * New sessions start at a random revision below this (2^30), leaving room
 * for a billion appends before a store's number types get near 2^31.
 */
const FIRST_REVISION_LIMIT = 2 ** 30;

/** How many damaged listed sessions a service remembers having warned about before it starts afresh. */
const WARNED_LIMIT = 1000;

/**
 * A drop-in `sessionService` for the `@google/adk` Runner over any store.
 * Adapters export a subclass that only picks the store.
 */
export class StateSessionService extends BaseSessionService {
  readonly store: SessionStore;
  readonly #onStale: 'throw' | 'reload';
  readonly #generateId: () => string;
  readonly #now: () => number;
  readonly #timeoutMs: number;
  readonly #maxReloads: number;
  readonly #telemetry: Telemetry;
  /** Recently read logs; undefined when off or when the store cannot read incrementally. */
  readonly #logCache: LogCache | undefined;
  /** {@link StateSessionServiceOptions.shareReadEvents}. */
  readonly #shareReadEvents: boolean;
  /** The stored revision each session object handed out or updated by this service was built from. */
  readonly #revisions = new WeakMap<Session, number>();
  /**
   * Per session object, the state as this service has stored it through that
   * object, kept only so that ADK's write-order marks can be read against it:
   * see {@link StateSessionService.#supersededKeys}.
   */
  readonly #storedWrites = new WeakMap<Session, Record<string, unknown>>();
  /** Listed sessions this service has warned about (see `#listed`). */
  readonly #warnedUnreadable = new ToldOnce(WARNED_LIMIT);

  constructor(store: SessionStore, options: StateSessionServiceOptions = {}) {
    super();
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('options', 'must be an object of service options');
    }
    if (typeof store !== 'object' || store === null) {
      throw new InvalidArgumentError('store', 'must be a SessionStore');
    }
    const { onStale = 'throw', generateId = randomUUID, now = Date.now } = options;
    const { timeoutMs = DEFAULT_TIMEOUT_MS, maxReloads = DEFAULT_MAX_RELOADS } = options;
    const { logCacheBytes = DEFAULT_LOG_CACHE_BYTES, shareReadEvents = false } = options;
    if (onStale !== 'throw' && onStale !== 'reload') {
      throw new InvalidArgumentError('onStale', `must be 'throw' or 'reload', got ${String(onStale)}`);
    }
    if (typeof generateId !== 'function') throw new InvalidArgumentError('generateId', 'must be a function');
    if (typeof now !== 'function') throw new InvalidArgumentError('now', 'must be a function');
    assertPositiveNumber('timeoutMs', timeoutMs, { max: MAX_TIMEOUT_MS, allowInfinity: true });
    assertPositiveNumber('maxReloads', maxReloads, { integer: true, allowZero: true, max: 1_000_000 });
    assertPositiveNumber('logCacheBytes', logCacheBytes, { integer: true, allowZero: true, max: 2 ** 40 });
    if (typeof shareReadEvents !== 'boolean') {
      throw new InvalidArgumentError('shareReadEvents', `must be a boolean, got ${typeof shareReadEvents}`);
    }
    this.store = store;
    this.#onStale = onStale;
    this.#generateId = generateId;
    this.#now = now;
    this.#timeoutMs = timeoutMs;
    this.#maxReloads = maxReloads;
    this.#logCache =
      logCacheBytes > 0 && typeof store.loadSessionSince === 'function' ? new LogCache(logCacheBytes) : undefined;
    this.#shareReadEvents = shareReadEvents;
    const { telemetry } = options;
    if (
      telemetry !== undefined &&
      typeof telemetry !== 'boolean' &&
      (typeof telemetry !== 'object' || telemetry === null)
    ) {
      throw new InvalidArgumentError('telemetry', 'must be a boolean or { recordIds?: boolean }');
    }
    this.#telemetry = new Telemetry(store.backend ?? store.constructor.name, telemetry);
  }

  override async createSession(request: CreateSessionRequest): Promise<Session> {
    if (typeof request !== 'object' || request === null) {
      throw new InvalidArgumentError('request', 'createSession needs { appName, userId, sessionId?, state? }');
    }
    const { appName, userId, sessionId, state } = request;
    assertNonEmptyString('appName', appName);
    assertNonEmptyString('userId', userId);
    if (sessionId !== undefined && typeof sessionId !== 'string') {
      throw new InvalidArgumentError('sessionId', 'must be a string when given');
    }
    if (state !== undefined) assertStateMap('state', state);
    const writes = splitState(state);
    const id = sessionId || fromOption('generateId', this.#generateId, isSessionId, 'a non-empty string');
    const createTime = fromOption('now', this.#now, Number.isFinite, 'a finite number of milliseconds');
    const revision = randomInt(1, FIRST_REVISION_LIMIT);
    const target = { appName, userId, sessionId: id };
    const result = await this.#call('createSession', WRITE, target, (call) =>
      this.store.createSession(
        {
          key: { appName, userId, sessionId: id },
          state: writes.session,
          userDelta: writes.user,
          appDelta: writes.app,
          createTime,
          revision,
        },
        call,
      ),
    );
    if (result.status === 'exists') throw new AlreadyExistsError(id);
    const session: Session = {
      id,
      appName,
      userId,
      // Created already: a bucket that cannot be read fails the call, saying so.
      state: decodeStored('createSession', true, () => combineState(writes.session, result.userState, result.appState)),
      events: [],
      lastUpdateTime: createTime,
    };
    this.#revisions.set(session, revision);
    return session;
  }

  /**
   * The stored session of the key, or a new one created from the request
   * when there is none. Two callers racing for one missing key both get the
   * one session that won: the loser's create finds it stored and reads it.
   */
  override async getOrCreateSession(request: CreateSessionRequest): Promise<Session> {
    if (typeof request !== 'object' || request === null || !request.sessionId) return this.createSession(request);
    const key = { appName: request.appName, userId: request.userId, sessionId: request.sessionId };
    const stored = await this.getSession(key);
    if (stored) return stored;
    try {
      return await this.createSession(request);
    } catch (error) {
      if (!(error instanceof AlreadyExistsError)) throw error;
      // Created by another caller between the read and the create: that one is the session.
      const created = await this.getSession(key);
      if (created) return created;
      throw error;
    }
  }

  override async getSession(request: GetSessionRequest): Promise<Session | undefined> {
    if (typeof request !== 'object' || request === null) return undefined;
    const key = { appName: request.appName, userId: request.userId, sessionId: request.sessionId };
    const filter = toEventFilter(request.config);
    if (!isPossibleKey(key)) return undefined;
    const whole = filter.limit === undefined && filter.afterTimestamp === undefined;
    const loaded = await this.#call('getSession', READ, key, (call) =>
      whole && this.#logCache ? this.#loadWhole(this.#logCache, key, call) : this.store.loadSession(key, filter, call),
    );
    if (!loaded) return undefined;
    return decodeStored('getSession', false, () => this.#toSession(loaded));
  }

  /**
   * The whole session, through the cache of recently read logs: a log held
   * is brought up to date with the events that follow it (or replaced, when
   * the store says it is no longer a prefix of the stored one). The events
   * come back decoded, as the cache's masters: the caller copies them.
   */
  async #loadWhole(cache: LogCache, key: SessionKey, call: StoreCall): Promise<HeldLoad | LoadResult | undefined> {
    const cacheKey = logCacheKey(key);
    const held = cache.get(cacheKey);
    if (!held) {
      const loaded = await this.store.loadSession(key, {}, call);
      if (loaded?.logMark === undefined) return loaded;
      const { session, userState, appState } = loaded;
      // Checked before its revision is kept: a later read would send it back to the store.
      assertReadableHead(session);
      const decoded = this.#decodeHeld(loaded.events);
      const positions = firstPositions(decoded);
      const entry = cachedLog(
        {
          revision: session.revision,
          logMark: loaded.logMark,
          events: decoded,
          positions,
          bytes: logBytes(loaded.events),
        },
        loaded.events[loaded.events.length - 1],
      );
      keepNewer(cache, cacheKey, undefined, entry);
      return { session, userState, appState, decoded, length: decoded.length, positions };
    }
    const heldLength = held.events.length;
    const since = await (this.store.loadSessionSince as NonNullable<SessionStore['loadSessionSince']>).call(
      this.store,
      key,
      {
        revision: held.revision,
        logMark: held.logMark,
        events: heldLength,
        ...heldLast(held, heldLength),
      },
      call,
    );
    if (!since) {
      if (cache.get(cacheKey) === held) cache.delete(cacheKey);
      return undefined;
    }
    assertReadableHead(since.session);
    const added = this.#decodeHeld(since.events);
    const decoded = since.restart ? added : grownLog(held.events, heldLength, added);
    // The same log grown: its map grows too (copies read earlier trust only their own length of it).
    const positions = since.restart ? firstPositions(added) : firstPositions(added, held.positions, heldLength);
    if (since.logMark === undefined) cache.delete(cacheKey);
    else {
      const bytes = since.restart ? logBytes(since.events) : held.bytes + logBytes(since.events) - logBytes([]);
      const newest = since.events[since.events.length - 1];
      const entry = cachedLog(
        { revision: since.session.revision, logMark: since.logMark, events: decoded, positions, bytes },
        newest === undefined && !since.restart ? held.last : newest,
      );
      keepNewer(cache, cacheKey, held, entry);
    }
    const { session, userState, appState } = since;
    return { session, userState, appState, decoded, length: decoded.length, positions };
  }

  /** Events decoded to be held by the cache: frozen through and through when reads share them. */
  #decodeHeld(events: readonly StoredEvent[]): Event[] {
    return this.#shareReadEvents ? events.map((event) => freezeEvent(decodeEvent(event))) : events.map(decodeEvent);
  }

  override async listSessions(request: ListSessionsRequest): Promise<ListSessionsResponse> {
    const query = toListQuery(request);
    const result = await this.#call('listSessions', READ, query, (call) => this.store.listSessions(query, call));
    const sessions = result.sessions.map((record) =>
      this.#listed(record, result.userStates.get(record.userId), result.appState),
    );
    return { sessions, ...pageInfo(request, result.totalItems) };
  }

  /**
   * A listed session. One whose stored record cannot be decoded (changed or
   * damaged outside adk-state) is listed with what can be read of it, so that
   * it does not hide the others: the scopes whose values decode, its
   * `lastUpdateTime` if that is a number (else 0). No revision is kept for
   * it, so an append through it reads the stored head first, and a
   * `getSession` of it fails with kind `'unreadable-data'`. A warning says so,
   * once per session for this service.
   */
  #listed(record: SessionRecord, user: Bucket | undefined, app: Bucket): Session {
    try {
      return this.#fromRecord(record, user, app);
    } catch (error) {
      if (!isUnreadableData(error)) throw error;
      const readable = (session: Bucket, userBucket?: Bucket, appBucket?: Bucket) => {
        try {
          return combineState(session, userBucket, appBucket);
        } catch (failure) {
          if (isUnreadableData(failure)) return undefined;
          throw failure;
        }
      };
      const none: Bucket = new Map();
      const state = {
        ...readable(record.state),
        ...readable(none, undefined, app),
        ...readable(none, user),
      };
      this.#warnUnreadableListed(record, error);
      return {
        id: record.id,
        appName: record.appName,
        userId: record.userId,
        state,
        events: [],
        lastUpdateTime: Number.isFinite(record.lastUpdateTime) ? record.lastUpdateTime : 0,
      };
    }
  }

  #warnUnreadableListed(record: SessionRecord, error: UnreadableDataError): void {
    const id = JSON.stringify([record.appName, record.userId, record.id]);
    if (!this.#warnedUnreadable.first(id)) return;
    process.emitWarning(
      `adk-state: session ${JSON.stringify(record.id)} of user ${JSON.stringify(record.userId)} in app ${JSON.stringify(record.appName)} is listed with only what can be read of it (${error.message}); getSession of it fails until the record is repaired or the session deleted`,
      { type: 'AdkStateWarning', code: 'ADK_STATE_UNREADABLE_LISTED' },
    );
  }

  override async deleteSession(request: DeleteSessionRequest): Promise<void> {
    const key = toKey(request);
    this.#logCache?.delete(logCacheKey(key));
    await this.#call('deleteSession', WRITE, key, (call) => this.store.deleteSession(key, call));
  }

  override async appendEvent(request: AppendEventRequest): Promise<Event> {
    if (typeof request !== 'object' || request === null) {
      throw new InvalidArgumentError('request', 'appendEvent needs { session, event }');
    }
    const { session } = request;
    let { event } = request;
    if (event?.partial === true) return event;
    assertStorableEvent(event);
    const key = toKey({ appName: session?.appName, userId: session?.userId, sessionId: session?.id });
    assertWritableSession(session);
    // Validate everything before touching the caller's objects or storage.
    let delta: unknown = event.actions?.stateDelta;
    if (delta !== undefined && delta !== null) assertStateMap('event.actions.stateDelta', delta);
    const writes = splitState(delta as Record<string, unknown> | undefined);
    const temp = writes.temp;
    // An event the append cannot write to (frozen by a read that shares them, or sealed or frozen by
    // the caller) is placed as a copy: the stored form read back, so that it is what a reload shows.
    if (isFixedEvent(event, delta, temp)) {
      // Without its temp: keys: they are never stored, so never checked (the caller's values are kept in `temp`).
      event = decodeEvent(encodeEvent(withoutTemp(event)));
      delta = event.actions?.stateDelta;
    }
    takeTempEntries(event, temp);
    let stored: StoredEvent;
    try {
      stored = encodeEvent(event);
    } catch (error) {
      giveBackTemp(delta, temp);
      throw error;
    }
    const deadline = new Deadline(this.#timeoutMs);
    let expectedRevision: number;
    try {
      for (const stateKey of this.#supersededKeys(session, event, writes)) dropWrite(writes, stateKey);
      expectedRevision = await this.#store(session, key, event, stored, writes, deadline);
    } catch (error) {
      // The record of stored writes may now hold this event's: start it afresh.
      this.#storedWrites.delete(session);
      giveBackTemp(delta, temp);
      throw error;
    } finally {
      deadline.dispose();
    }
    for (const [tempKey, value] of temp) defineEntry(session.state, tempKey, value);

    // The same @google/adk module applies the delta to the caller's state with
    // ADK's write-order rules: the service's updateSessionState, which ADK's
    // appendEvent calls, called here directly (the temp: keys are out of the
    // delta already). The event is placed here through an index: ADK's
    // appendEvent searches the events array for the id, O(events) per append.
    let appended = event;
    const update = (this as unknown as StateUpdater).updateSessionState;
    if (typeof update === 'function') update.call(this, { session: { state: session.state, events: [] }, event });
    else appended = await super.appendEvent({ session: { ...session, state: session.state, events: [] }, event });
    placeEvent(session.events, appended);
    session.lastUpdateTime = event.timestamp;
    this.#revisions.set(session, expectedRevision + 1);
    return appended;
  }

  /**
   * The keys of the event's delta that a write already stored through this
   * session object supersedes by ADK's write-order rules: a key written
   * through ADK's `State` (a tool's or callback's `context.state`) carries
   * the moment of that write, and ADK does not let an event whose write of a
   * key is older than the one the state holds put the older value back (say,
   * two parallel branches whose events are appended in the other order).
   * ADK applies that rule to the caller's `session.state`; storing such a
   * write anyway would let a reload show the older value. The rule is read
   * by letting ADK apply the delta to a record of what was stored through
   * this object (ADK keeps the marks private); a key it leaves alone is not
   * stored. Deltas without marks (built by hand) are never superseded, but
   * their writes are recorded, as ADK records them on the session's state.
   * Costs one step per key of the delta, whatever the size of the state.
   */
  #supersededKeys(session: Session, event: Event, writes: ScopedWrites): readonly string[] {
    const delta = event.actions?.stateDelta as Record<string, unknown> | undefined;
    if (!delta || writes.session.size + writes.user.size + writes.app.size === 0) return [];
    let record = this.#storedWrites.get(session);
    if (!record) {
      record = Object.create(null) as Record<string, unknown>;
      this.#storedWrites.set(session, record);
    }
    applyWithWriteOrder(this, record, event);
    let superseded: string[] | undefined;
    for (const stateKey of Object.keys(delta)) {
      if (Object.is(record[stateKey], delta[stateKey])) continue;
      if (!superseded) superseded = [];
      superseded.push(stateKey);
    }
    return superseded ?? NONE;
  }

  /** Stores the event under the revision check; returns the revision it was built on. */
  async #store(
    session: Session,
    key: SessionKey,
    event: Event,
    stored: StoredEvent,
    writes: ScopedWrites,
    deadline: Deadline,
  ): Promise<number> {
    let expectedRevision = this.#revisions.get(session) ?? (await this.#revisionOfUnmarked(session, key, deadline));
    for (let reloads = 0; ; reloads++) {
      const input = {
        key,
        expectedRevision,
        event: stored,
        sessionDelta: writes.session,
        userDelta: writes.user,
        appDelta: writes.app,
        lastUpdateTime: event.timestamp,
      };
      const result = await this.#call(
        'appendEvent',
        WRITE,
        key,
        (call) => this.store.appendEvent(input, call),
        deadline,
      );
      if (result.status === 'ok') return expectedRevision;
      if (result.status === 'missing') throw new SessionNotFoundError(key.sessionId);
      const detail = `the stored session is at revision ${result.revision}, this session object was built from revision ${expectedRevision}`;
      if (this.#onStale === 'throw') throw new StaleSessionError(key.sessionId, detail);
      if (reloads >= this.#maxReloads) {
        throw new StaleSessionError(
          key.sessionId,
          `it changed again after each of ${reloads} reloads (maxReloads is ${this.#maxReloads}); ${detail}`,
          { contention: true },
        );
      }
      expectedRevision = await this.#reloadInPlace(session, key, deadline);
    }
  }

  /**
   * Stores a whole session copied from another store (a migration): its state
   * exactly (session keys in the session, `user:`/`app:` keys merged into the
   * buckets), its events as they are (no delta is applied again) and its
   * `lastUpdateTime`. Resolves `'exists'` without writing when the key is
   * stored, unless `replace` (then the stored session is deleted first, and
   * a failure of the import after it says the call may have applied: the
   * stored session may be gone).
   * Uses the store's own `importSession` when it has one (atomic), else
   * `createSession` and one `appendEvent` per event; an event the store
   * refuses then fails the import, which removes the session again (or, when
   * that fails too, throws a `BackendError` saying part may remain).
   */
  async importSession(session: Session, options?: { replace?: boolean } | null): Promise<'imported' | 'exists'> {
    if (options !== undefined && options !== null && typeof options !== 'object') {
      throw new InvalidArgumentError('options', 'must be { replace?: boolean } when given');
    }
    if (typeof session !== 'object' || session === null || !Array.isArray(session.events)) {
      throw new InvalidArgumentError('session', 'must be a Session with state and events');
    }
    const key = toKey({ appName: session.appName, userId: session.userId, sessionId: session.id });
    assertStateMap('session.state', session.state);
    if (typeof session.lastUpdateTime !== 'number' || !Number.isFinite(session.lastUpdateTime)) {
      throw new InvalidArgumentError('session.lastUpdateTime', 'must be a finite number');
    }
    const writes = splitState(session.state);
    // As an append stores them: a partial event is never stored, nor is a temp: key of a delta.
    const events: StoredEvent[] = [];
    for (const event of session.events) {
      if (event?.partial === true) continue;
      assertStorableEvent(event);
      events.push(encodeEvent(withoutTemp(event)));
    }
    const first = events[0]?.timestamp ?? session.lastUpdateTime;
    const input = {
      key,
      state: writes.session,
      userDelta: writes.user,
      appDelta: writes.app,
      events,
      createTime: Math.min(first, session.lastUpdateTime),
      lastUpdateTime: session.lastUpdateTime,
      revision: randomInt(1, FIRST_REVISION_LIMIT),
    };
    this.#logCache?.delete(logCacheKey(key));
    if (!options?.replace) return this.#import(key, input, events);
    await this.#call('importSession', WRITE, key, (call) => this.store.deleteSession(key, call));
    try {
      return await this.#import(key, input, events);
    } catch (error) {
      throw replacedThenFailed(error);
    }
  }

  /** importSession's writes once the request is checked (and, with replace, the stored session deleted). */
  async #import(key: SessionKey, input: ImportInput, events: StoredEvent[]): Promise<'imported' | 'exists'> {
    const store = this.store;
    if (store.importSession) {
      const result = await this.#call('importSession', WRITE, key, (call) => store.importSession!(input, call));
      return result.status;
    }
    const created = await this.#call('importSession', WRITE, key, (call) =>
      store.createSession(
        { ...input, createTime: events.length === 0 ? input.lastUpdateTime : input.createTime },
        call,
      ),
    );
    if (created.status === 'exists') return 'exists';
    const none = new Map<string, string>();
    for (const [position, event] of events.entries()) {
      const last = position === events.length - 1;
      const appendInput = {
        key,
        expectedRevision: input.revision + position,
        event,
        sessionDelta: none,
        userDelta: none,
        appDelta: none,
        lastUpdateTime: last ? input.lastUpdateTime : event.timestamp,
      };
      let result: AppendResult;
      try {
        result = await this.#call('importSession', WRITE, key, (call) => store.appendEvent(appendInput, call));
      } catch (error) {
        throw await this.#removePartImport(key, error, { first: input.revision, position, events });
      }
      if (result.status !== 'ok') {
        // Another writer has the session now: what it holds is not this import's to remove.
        throw new StaleSessionError(
          key.sessionId,
          `another writer changed it while it was being imported (${result.status})`,
        );
      }
    }
    return 'imported';
  }

  /**
   * After an event of an import made through `createSession` and
   * `appendEvent` failed: removes the session that holds the events before
   * it (and that one, if its append went through after all), so that a
   * failed import leaves none of the session behind; but only while the
   * stored session is the import's own (its revision and newest event are
   * what the import wrote): another writer's events are never removed (bar
   * one that lands between that read and the removal). Not tried when the
   * backend failed (an outage, a timeout): each try would cost another
   * `timeoutMs`, and a run of the import again with `replace` replaces what
   * remains. Returns the error to throw: the event's own when the session is
   * gone again, else a {@link BackendError} that says part of it may remain.
   */
  async #removePartImport(
    key: SessionKey,
    error: unknown,
    done: { first: number; position: number; events: readonly StoredEvent[] },
  ): Promise<unknown> {
    const { first, position, events } = done;
    const remains = (why: string) => {
      // The backend's own words: a BackendError's message says what this one says around them.
      const reason = wordsOf(error);
      return new BackendError(
        'importSession',
        new Error(
          `event ${position + 1} of ${events.length} failed (${reason}), and ${why}: the session may remain with its first ${position} event(s) or more; import it again with replace`,
          { cause: error },
        ),
        { mayHaveApplied: true },
      );
    };
    if (error instanceof BackendError && error.kind === 'outage') {
      return remains('the backend failed, so removing what was imported was not tried');
    }
    try {
      const head = await this.#call('importSession', READ, key, (call) =>
        this.store.loadSession(key, { limit: 1 }, call),
      );
      if (head) {
        const newest = head.events[0]?.id;
        // Before the failed append, or after it (its outcome was unknown): nothing but the import's writes.
        const own =
          (head.session.revision === first + position && newest === newestOf(events, position)) ||
          (head.session.revision === first + position + 1 && newest === newestOf(events, position + 1));
        if (!own) return remains('another writer has written to it since, so it was left as it is');
        await this.#call('importSession', WRITE, key, (call) => this.store.deleteSession(key, call));
      }
      return error;
    } catch (failure) {
      return remains(`removing it failed too (${wordsOf(failure)})`);
    }
  }

  /** The un-prefixed user bucket of `(appName, userId)`; `{}` when empty. */
  async getUserState(request: { appName: string; userId: string }): Promise<Record<string, unknown>> {
    assertNonEmptyString('appName', request?.appName);
    assertNonEmptyString('userId', request.userId);
    const { appName, userId } = request;
    const bucket = await this.#call('getUserState', READ, { appName, userId }, (call) =>
      this.store.readUserState(appName, userId, call),
    );
    return decodeStored('getUserState', false, () => bucketToObject(bucket));
  }

  /** The un-prefixed app bucket of `appName`; `{}` when empty. */
  async getAppState(request: { appName: string }): Promise<Record<string, unknown>> {
    assertNonEmptyString('appName', request?.appName);
    const { appName } = request;
    const bucket = await this.#call('getAppState', READ, { appName }, (call) => this.store.readAppState(appName, call));
    return decodeStored('getAppState', false, () => bucketToObject(bucket));
  }

  /**
   * The name of every app the store holds a session of (`SessionStore.listAppNames`;
   * a store may also name an app that holds only state), sorted; `undefined`
   * when the store cannot list its apps. For tools that
   * copy a whole store: it may visit every record.
   */
  async listAppNames(): Promise<string[] | undefined> {
    const { store } = this;
    const list = store.listAppNames;
    if (typeof list !== 'function') return undefined;
    const names = await this.#call('listAppNames', READ, {}, (call) => list.call(store, call));
    return [...names].sort();
  }

  /**
   * The key of every session the store holds for `appName` (of `userId`
   * only, when given), found without the listing's indexes
   * (`SessionStore.listSessionKeys`), by user, then id; `undefined` when the
   * store does not offer it. For tools that copy a whole store: it may visit
   * every record of the app.
   */
  async listSessionKeys(request: { appName: string; userId?: string }): Promise<StoredSessionKey[] | undefined> {
    assertNonEmptyString('appName', request?.appName);
    const { appName, userId } = request;
    if (userId !== undefined) assertNonEmptyString('userId', userId);
    const { store } = this;
    const list = store.listSessionKeys;
    if (typeof list !== 'function') return undefined;
    return this.#call('listSessionKeys', READ, { appName, userId }, (call) => list.call(store, appName, userId, call));
  }

  /** Releases what the store opened itself. */
  async close(): Promise<void> {
    await this.store.close?.();
  }

  #toSession(loaded: LoadResult | HeldLoad): Session {
    const session = this.#fromRecord(loaded.session, loaded.userState, loaded.appState);
    if ('decoded' in loaded) {
      // The read's own length of the cache's array, and by default its own copy of each event.
      session.events = eventsWithRoom(loaded.decoded, loaded.length, this.#shareReadEvents ? undefined : copyEvent);
      adoptIndex(session.events, loaded.positions);
    } else {
      session.events = eventsWithRoom(loaded.events, loaded.events.length, decodeEvent);
    }
    return session;
  }

  #fromRecord(
    record: SessionRecord,
    userState: LoadResult['userState'] | undefined,
    appState: LoadResult['appState'],
  ): Session {
    assertReadableHead(record);
    const session: Session = {
      id: record.id,
      appName: record.appName,
      userId: record.userId,
      state: combineState(record.state, userState, appState),
      events: [],
      lastUpdateTime: record.lastUpdateTime,
    };
    this.#revisions.set(session, record.revision);
    return session;
  }

  /**
   * A session object this service never handed out (built by hand, cloned)
   * is current when its newest event is the newest stored event.
   */
  async #revisionOfUnmarked(session: Session, key: SessionKey, deadline: Deadline): Promise<number> {
    const head = await this.#call(
      'appendEvent',
      READ,
      key,
      (call) => this.store.loadSession(key, { limit: 1 }, call),
      deadline,
    );
    if (!head) throw new SessionNotFoundError(key.sessionId);
    decodeStored('appendEvent', false, () => assertReadableHead(head.session));
    const storedLast = head.events[0]?.id;
    const callerLast = session.events[session.events.length - 1]?.id;
    if (storedLast === callerLast) return head.session.revision;
    if (this.#onStale === 'reload') return this.#reloadInPlace(session, key, deadline);
    throw new StaleSessionError(
      key.sessionId,
      `its newest event is ${describeEventId(callerLast)} but the newest stored event is ${describeEventId(storedLast)}`,
    );
  }

  /** Replaces the caller's state (keeping `temp:` keys) and events with the stored ones; returns the revision. */
  async #reloadInPlace(session: Session, key: SessionKey, deadline: Deadline): Promise<number> {
    const loaded = await this.#call(
      'appendEvent',
      READ,
      key,
      (call) => this.store.loadSession(key, {}, call),
      deadline,
    );
    if (!loaded) throw new SessionNotFoundError(key.sessionId);
    // Before this append's write: nothing was written.
    const fresh = decodeStored('appendEvent', false, () => this.#toSession(loaded));
    const state = session.state as Record<string, unknown>;
    for (const stateKey of Object.keys(state)) {
      if (scopeOf(stateKey) !== 'temp') delete state[stateKey];
    }
    for (const stateKey of Object.keys(fresh.state)) defineEntry(state, stateKey, fresh.state[stateKey]);
    // Element by element: spreading a long history into splice() would exceed the argument limit.
    session.events.length = 0;
    for (const event of fresh.events) session.events.push(event);
    session.lastUpdateTime = fresh.lastUpdateTime;
    return loaded.session.revision;
  }

  /**
   * Runs one store step under the call's deadline (a new one unless the call
   * shares its own across steps), in a span when tracing is on. A failure
   * that is not one of ours becomes a {@link BackendError} with the cause,
   * saying whether a write may have been applied: never for a read, nor for a
   * write that was not begun.
   */
  #call<T>(
    operation: string,
    kind: StepKind,
    target: CallTarget,
    run: (call: StoreCall) => Promise<T>,
    shared?: Deadline,
  ): Promise<T> {
    return this.#telemetry.trace(operation, target, (usage) => this.#step(operation, kind, run, shared, usage));
  }

  async #step<T>(
    operation: string,
    kind: StepKind,
    run: (call: StoreCall) => Promise<T>,
    shared: Deadline | undefined,
    usage: StoreUsage | undefined,
  ): Promise<T> {
    const deadline = shared ?? new Deadline(this.#timeoutMs);
    try {
      return await deadline.run(usage ? () => run(deadline.withUsage(usage)) : run);
    } catch (error) {
      if (error instanceof AdkStateError) throw error;
      if (isUnreadableData(error)) throw unreadable(operation, error, false);
      const write = kind === WRITE;
      if (error instanceof DeadlineExceeded) {
        throw new BackendError(operation, error, { mayHaveApplied: write && error.started, timedOut: true });
      }
      throw new BackendError(operation, error, { mayHaveApplied: write });
    } finally {
      if (!shared) deadline.dispose();
    }
  }
}

/** The cache key of a session: its three ids, unambiguously joined. */
function logCacheKey(key: SessionKey): string {
  return JSON.stringify([key.appName, key.userId, key.sessionId]);
}

/**
 * A whole read through the log cache: the head as the store gave it, the
 * events as the cache's decoded masters: the first `length` of `decoded`
 * (a later read may have grown that array since).
 */
interface HeldLoad extends Omit<LoadResult, 'events' | 'logMark'> {
  decoded: readonly Event[];
  length: number;
  positions: ReadonlyMap<string, number>;
}

/**
 * Free slots a whole read's events array has past its end, so that the
 * events a turn appends through the session (ADK pushes them) fit: a full
 * array would be copied whole, into a larger one, by the first push.
 */
const READ_ROOM: readonly undefined[] = Array.from({ length: 16 }, () => undefined);

/**
 * The first `length` of `source` in a new array with room to grow, each made
 * an event by `make` (a copy, a decode); without `make` they are events
 * already, handed out as they are.
 */
function eventsWithRoom<T>(source: readonly T[], length: number, make: ((item: T) => Event) | undefined): Event[] {
  // concat copies as one block; shortened by less than half its capacity, the array keeps the room.
  const events = (length === source.length ? source : source.slice(0, length)).concat(
    READ_ROOM as unknown as T[],
  ) as unknown[];
  events.length = length;
  if (make) for (let at = 0; at < length; at++) events[at] = make(events[at] as T);
  return events as Event[];
}

/**
 * The held log with the events that follow it: the held array itself, grown
 * at its end, when no other read grew it since this one sent its length
 * (reads of the cache take only the length they were given); else a copy of
 * the held part with the new events after it. A long log is not copied on
 * every read.
 */
function grownLog(events: Event[], heldLength: number, added: readonly Event[]): Event[] {
  if (events.length !== heldLength) return events.slice(0, heldLength).concat(added);
  for (const event of added) events.push(event);
  return events;
}

/**
 * The id of the newest entry of a log made by appending the first `count`
 * of `events` in order: an id appended again replaces its entry in place,
 * so the newest entry is the last id seen for the first time.
 */
function newestOf(events: readonly StoredEvent[], count: number): string | undefined {
  const seen = new Set<string>();
  let newest: string | undefined;
  for (let at = 0; at < count; at++) {
    const id = (events[at] as StoredEvent).id;
    if (!seen.has(id)) {
      seen.add(id);
      newest = id;
    }
  }
  return newest;
}

/**
 * A failure of a replace's import, once the stored session was deleted: the
 * delete was written, so the call may have changed storage whatever the
 * import's own failure says of itself.
 */
function replacedThenFailed(error: unknown): unknown {
  if (!(error instanceof BackendError) || error.mayHaveApplied) return error;
  return new BackendError(
    'importSession',
    new Error(`the stored session was deleted (replace), then the import failed: ${wordsOf(error)}`, { cause: error }),
    {
      kind: error.kind === 'unreadable-data' ? 'unreadable-data' : 'outage',
      mayHaveApplied: true,
      timedOut: error.timedOut,
    },
  );
}

/** What an error says, in the backend's words when it is a {@link BackendError} (whose message wraps its cause's). */
function wordsOf(error: unknown): string {
  const said = error instanceof BackendError ? error.cause : error;
  return said instanceof Error ? said.message : String(said);
}

/**
 * Whether an append would have to write to a part of `event` that cannot
 * take it: the event itself (ADK's marks), its actions, or its delta when it
 * has `temp:` keys to take out and put back (frozen, sealed, not extensible,
 * or a `temp:` key that cannot be deleted).
 */
function isFixedEvent(event: Event, delta: unknown, temp: ReadonlyMap<string, unknown>): boolean {
  if (!Object.isExtensible(event)) return true;
  const actions: unknown = event.actions;
  if (typeof actions === 'object' && actions !== null && !Object.isExtensible(actions)) return true;
  if (temp.size === 0 || typeof delta !== 'object' || delta === null) return false;
  if (!Object.isExtensible(delta)) return true;
  for (const tempKey of temp.keys()) {
    if (Object.getOwnPropertyDescriptor(delta, tempKey)?.configurable === false) return true;
  }
  return false;
}

/** Puts the `temp:` keys an append took out of the event's delta back, as they came (the append failed). */
function giveBackTemp(delta: unknown, temp: ReadonlyMap<string, unknown>): void {
  if (typeof delta !== 'object' || delta === null) return;
  for (const [tempKey, value] of temp) defineEntry(delta as Record<string, unknown>, tempKey, value);
}

/**
 * The caller's session object must take the append: its `state` and
 * `events` are updated in place, and the object itself gets the new
 * `lastUpdateTime`. Checked before anything is written, so that a frozen or
 * sealed one is refused instead of failing after the store applied the event.
 */
function assertWritableSession(session: Session): void {
  if (typeof session.state !== 'object' || session.state === null || !Array.isArray(session.events)) {
    throw new InvalidArgumentError('session', 'must be a Session with a state object and an events array');
  }
  const fixed = !Object.isExtensible(session.state)
    ? 'its state object'
    : !Object.isExtensible(session.events)
      ? 'its events array'
      : Object.isFrozen(session)
        ? 'the session object'
        : undefined;
  if (fixed !== undefined) {
    throw new InvalidArgumentError(
      'session',
      `cannot take the append: ${fixed} is frozen, sealed or not extensible, and appendEvent updates it in place (append through a session object from getSession or createSession)`,
    );
  }
}

/** A session id from the `generateId` option: any non-empty string. */
function isSessionId(value: unknown): boolean {
  return typeof value === 'string' && value !== '';
}

/**
 * The result of calling the service option `name`, checked: a typed error
 * when it throws or gives something else than `expected` describes.
 */
function fromOption<T>(name: string, option: () => T, valid: (value: unknown) => boolean, expected: string): T {
  let value: T;
  try {
    value = option();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new InvalidArgumentError(name, `threw (${reason}); it must return ${expected}`);
  }
  if (!valid(value)) {
    throw new InvalidArgumentError(
      name,
      `must return ${expected}, got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`,
    );
  }
  return value;
}

/**
 * A stored head whose revision is not a safe integer or whose
 * `lastUpdateTime` is not a finite number was not written by adk-state (a
 * stray write, a damaged record): an append built on it could never match,
 * and a read would hand out NaN.
 */
function assertReadableHead(head: SessionHead): void {
  if (Number.isSafeInteger(head.revision) && Number.isFinite(head.lastUpdateTime)) return;
  throw new UnreadableDataError(
    `the stored head of session ${JSON.stringify(head.id)} has revision ${describeStored(head.revision)} and lastUpdateTime ${describeStored(head.lastUpdateTime)}; adk-state writes an integer and a number`,
  );
}

function describeStored(value: unknown): string {
  return typeof value === 'number' ? String(value) : `${typeof value} ${JSON.stringify(value) ?? String(value)}`;
}

/** A failure to decode stored data as the typed error it is. */
function unreadable(operation: string, error: UnreadableDataError, mayHaveApplied: boolean): BackendError {
  return new BackendError(operation, error, { kind: 'unreadable-data', mayHaveApplied });
}

/**
 * Runs `decode` on data a store returned; stored data that cannot be decoded
 * fails `operation` with a {@link BackendError} of kind `'unreadable-data'`.
 */
function decodeStored<T>(operation: string, mayHaveApplied: boolean, decode: () => T): T {
  try {
    return decode();
  } catch (error) {
    if (isUnreadableData(error)) throw unreadable(operation, error, mayHaveApplied);
    throw error;
  }
}

/**
 * The largest stored event (in characters of its JSON) whose stored form a
 * cached log keeps to tell the store, beside its id: larger ones are told by
 * their id alone, so a cached log holds at most this much text twice.
 */
const HELD_LAST_MAX_CHARS = 4096;

/** A log for the cache, with its last event's stored form when that is at most {@link HELD_LAST_MAX_CHARS} long. */
function cachedLog(log: Omit<CachedLog, 'last'>, last: StoredEvent | undefined): CachedLog {
  return last !== undefined && last.json.length <= HELD_LAST_MAX_CHARS ? { ...log, last } : log;
}

/**
 * What a read tells the store of the last event a cached copy holds: its id,
 * and its stored form when the entry's is that event's.
 */
function heldLast(held: CachedLog, length: number): Pick<HeldSession, 'lastEventId' | 'lastEvent'> {
  if (length === 0) return {};
  const id = (held.events[length - 1] as Event).id;
  return held.last?.id === id ? { lastEventId: id, lastEvent: held.last } : { lastEventId: id };
}

/**
 * Stores `entry` unless, while it was being read, another read of the same
 * session put a log in its place that is at least as new (reads of one
 * session may overlap: the newer one stays).
 */
function keepNewer(cache: LogCache, cacheKey: string, replaced: CachedLog | undefined, entry: CachedLog): void {
  const current = cache.get(cacheKey);
  if (current !== replaced && current !== undefined && current.revision >= entry.revision) return;
  cache.set(cacheKey, entry);
}

/** No key superseded (shared, never changed). */
const NONE: readonly string[] = [];

/**
 * ADK's own application of an event's delta to a state, with its write-order
 * rules: `BaseSessionService`'s `updateSessionState`, which applies the delta
 * as it is, synchronously, leaving the event alone.
 */
interface StateUpdater {
  updateSessionState?: (
    this: BaseSessionService,
    request: { session: Session | { state: Session['state']; events: Event[] }; event: Event },
  ) => void;
}

const updateSessionState = (BaseSessionService.prototype as unknown as StateUpdater).updateSessionState;

function applyWithWriteOrder(service: BaseSessionService, state: Record<string, unknown>, event: Event): void {
  const session = { state, events: [] } as unknown as Session;
  if (typeof updateSessionState === 'function') {
    updateSessionState.call(service, { session, event });
    return;
  }
  // Without that method: the same rules through ADK's public appendEvent, on copies of the event and its actions.
  BaseSessionService.prototype.appendEvent.call(service, {
    session,
    event: { ...event, actions: { ...event.actions } } as Event,
  });
}

/** Whether a store step writes (its failure may leave the write applied) or only reads. */
type StepKind = 'read' | 'write';
const READ: StepKind = 'read';
const WRITE: StepKind = 'write';

/** A state map (create state, event delta) must be a plain object: an array or a Map would lose its entries. */
function assertStateMap(name: string, value: unknown): void {
  let proto: unknown;
  try {
    proto = typeof value === 'object' && value !== null ? Object.getPrototypeOf(value) : undefined;
  } catch (error) {
    // A Proxy whose getPrototypeOf trap throws.
    throw new InvalidArgumentError(name, `cannot be read (${error instanceof Error ? error.message : String(error)})`);
  }
  if (proto !== Object.prototype && proto !== null) {
    throw new InvalidArgumentError(name, `must be a plain object of state keys, got ${describeValue(value)}`);
  }
}

function describeValue(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object' && value !== null) return `a ${value.constructor?.name ?? 'class instance'}`;
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

function toKey(request: { appName?: unknown; userId?: unknown; sessionId?: unknown } | undefined): SessionKey {
  if (typeof request !== 'object' || request === null) {
    throw new InvalidArgumentError('request', 'a session key { appName, userId, sessionId } is required');
  }
  assertNonEmptyString('appName', request.appName);
  assertNonEmptyString('userId', request.userId);
  assertNonEmptyString('sessionId', request.sessionId);
  return { appName: request.appName, userId: request.userId, sessionId: request.sessionId };
}

function describeEventId(id: string | undefined): string {
  return id === undefined ? '(none)' : JSON.stringify(id);
}
