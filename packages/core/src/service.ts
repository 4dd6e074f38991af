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
import {
  AdkStateError,
  AlreadyExistsError,
  BackendError,
  InvalidArgumentError,
  SessionNotFoundError,
  StaleSessionError,
} from './errors.js';
import { assertStorableEvent, decodeEvent, encodeEvent, takeTempEntries } from './events.js';
import { pageInfo, toListQuery } from './listing.js';
import { placeEvent } from './placement.js';
import { assertNonEmptyString, isPossibleKey, type SessionKey, toEventFilter } from './requests.js';
import { bucketToObject, combineState, type ScopedWrites, scopeOf, splitState } from './scopes.js';
import type { LoadResult, SessionRecord, SessionStore } from './store.js';
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
}

/**
 * New sessions start at a random revision below this (2^30), leaving room
 * for a billion appends before a store's number types get near 2^31.
 */
const FIRST_REVISION_LIMIT = 2 ** 30;

/** How many times `onStale: 'reload'` reloads before giving up under constant contention. */
const MAX_RELOADS = 32;

/**
 * A drop-in `sessionService` for the `@google/adk` Runner over any store.
 * Adapters export a subclass that only picks the store.
 */
export class StateSessionService extends BaseSessionService {
  readonly store: SessionStore;
  readonly #onStale: 'throw' | 'reload';
  readonly #generateId: () => string;
  readonly #now: () => number;
  /** The stored revision each session object handed out or updated by this service was built from. */
  readonly #revisions = new WeakMap<Session, number>();

  constructor(store: SessionStore, options: StateSessionServiceOptions = {}) {
    super();
    if (options.onStale !== undefined && options.onStale !== 'throw' && options.onStale !== 'reload') {
      throw new InvalidArgumentError('onStale', `must be 'throw' or 'reload', got ${String(options.onStale)}`);
    }
    this.store = store;
    this.#onStale = options.onStale ?? 'throw';
    this.#generateId = options.generateId ?? randomUUID;
    this.#now = options.now ?? Date.now;
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
    if (state !== undefined && (typeof state !== 'object' || state === null || Array.isArray(state))) {
      throw new InvalidArgumentError('state', 'must be a plain object of state keys');
    }
    const writes = splitState(state);
    const id = sessionId || this.#generateId();
    const createTime = this.#now();
    const revision = randomInt(1, FIRST_REVISION_LIMIT);
    const result = await this.#call('createSession', () =>
      this.store.createSession({
        key: { appName, userId, sessionId: id },
        state: writes.session,
        userDelta: writes.user,
        appDelta: writes.app,
        createTime,
        revision,
      }),
    );
    if (result.status === 'exists') throw new AlreadyExistsError(id);
    const session: Session = {
      id,
      appName,
      userId,
      state: combineState(writes.session, result.userState, result.appState),
      events: [],
      lastUpdateTime: createTime,
    };
    this.#revisions.set(session, revision);
    return session;
  }

  override async getSession(request: GetSessionRequest): Promise<Session | undefined> {
    if (typeof request !== 'object' || request === null) return undefined;
    const key = { appName: request.appName, userId: request.userId, sessionId: request.sessionId };
    const filter = toEventFilter(request.config);
    if (!isPossibleKey(key)) return undefined;
    const loaded = await this.#call('getSession', () => this.store.loadSession(key, filter));
    if (!loaded) return undefined;
    return this.#toSession(loaded);
  }

  override async listSessions(request: ListSessionsRequest): Promise<ListSessionsResponse> {
    const query = toListQuery(request);
    const result = await this.#call('listSessions', () => this.store.listSessions(query));
    const sessions = result.sessions.map((record) => {
      const session = this.#fromRecord(record, result.userStates.get(record.userId), result.appState);
      return session;
    });
    return { sessions, ...pageInfo(request, result.totalItems) };
  }

  override async deleteSession(request: DeleteSessionRequest): Promise<void> {
    const key = toKey(request);
    await this.#call('deleteSession', () => this.store.deleteSession(key));
  }

  override async appendEvent({ session, event }: AppendEventRequest): Promise<Event> {
    if (event?.partial === true) return event;
    assertStorableEvent(event);
    const key = toKey({ appName: session?.appName, userId: session?.userId, sessionId: session?.id });
    if (typeof session.state !== 'object' || session.state === null || !Array.isArray(session.events)) {
      throw new InvalidArgumentError('session', 'must be a Session with a state object and an events array');
    }
    // Validate everything before touching the caller's objects or storage.
    const writes = splitState(event.actions?.stateDelta as Record<string, unknown> | undefined);
    const temp = takeTempEntries(event);
    let expectedRevision: number;
    try {
      expectedRevision = await this.#store(session, key, event, writes);
    } catch (error) {
      // Nothing was stored: give the event back its temp: keys, as it came.
      const delta = event.actions?.stateDelta as Record<string, unknown> | undefined;
      if (delta) for (const [tempKey, value] of temp) defineEntry(delta, tempKey, value);
      throw error;
    }
    for (const [tempKey, value] of temp) defineEntry(session.state, tempKey, value);

    // The same @google/adk module's own appendEvent applies the delta to the
    // caller's state with ADK's write-order rules. It gets the caller's state
    // object but no events: its search of the events array for the id costs
    // O(events) per append, so the event is placed here through an index.
    const appended = await super.appendEvent({ session: { ...session, state: session.state, events: [] }, event });
    placeEvent(session.events, appended);
    session.lastUpdateTime = event.timestamp;
    this.#revisions.set(session, expectedRevision + 1);
    return appended;
  }

  /** Stores the event under the revision check; returns the revision it was built on. */
  async #store(session: Session, key: SessionKey, event: Event, writes: ScopedWrites): Promise<number> {
    const stored = encodeEvent(event);
    let expectedRevision = this.#revisions.get(session) ?? (await this.#revisionOfUnmarked(session, key));
    for (let reloads = 0; ; reloads++) {
      const result = await this.#call('appendEvent', () =>
        this.store.appendEvent({
          key,
          expectedRevision,
          event: stored,
          sessionDelta: writes.session,
          userDelta: writes.user,
          appDelta: writes.app,
          lastUpdateTime: event.timestamp,
        }),
      );
      if (result.status === 'ok') return expectedRevision;
      if (result.status === 'missing') throw new SessionNotFoundError(key.sessionId);
      const detail = `the stored session is at revision ${result.revision}, this session object was built from revision ${expectedRevision}`;
      if (this.#onStale === 'throw' || reloads >= MAX_RELOADS) throw new StaleSessionError(key.sessionId, detail);
      expectedRevision = await this.#reloadInPlace(session, key);
    }
  }

  /** The un-prefixed user bucket of `(appName, userId)`; `{}` when empty. */
  async getUserState(request: { appName: string; userId: string }): Promise<Record<string, unknown>> {
    assertNonEmptyString('appName', request?.appName);
    assertNonEmptyString('userId', request.userId);
    const bucket = await this.#call('getUserState', () => this.store.readUserState(request.appName, request.userId));
    return bucketToObject(bucket);
  }

  /** The un-prefixed app bucket of `appName`; `{}` when empty. */
  async getAppState(request: { appName: string }): Promise<Record<string, unknown>> {
    assertNonEmptyString('appName', request?.appName);
    const bucket = await this.#call('getAppState', () => this.store.readAppState(request.appName));
    return bucketToObject(bucket);
  }

  /** Releases what the store opened itself. */
  async close(): Promise<void> {
    await this.store.close?.();
  }

  #toSession(loaded: LoadResult): Session {
    const session = this.#fromRecord(loaded.session, loaded.userState, loaded.appState);
    session.events = loaded.events.map(decodeEvent);
    return session;
  }

  #fromRecord(
    record: SessionRecord,
    userState: LoadResult['userState'] | undefined,
    appState: LoadResult['appState'],
  ): Session {
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
  async #revisionOfUnmarked(session: Session, key: SessionKey): Promise<number> {
    const head = await this.#call('appendEvent', () => this.store.loadSession(key, { limit: 1 }));
    if (!head) throw new SessionNotFoundError(key.sessionId);
    const storedLast = head.events[0]?.id;
    const callerLast = session.events[session.events.length - 1]?.id;
    if (storedLast === callerLast) return head.session.revision;
    if (this.#onStale === 'reload') return this.#reloadInPlace(session, key);
    throw new StaleSessionError(
      key.sessionId,
      `its newest event is ${describeEventId(callerLast)} but the newest stored event is ${describeEventId(storedLast)}`,
    );
  }

  /** Replaces the caller's state (keeping `temp:` keys) and events with the stored ones; returns the revision. */
  async #reloadInPlace(session: Session, key: SessionKey): Promise<number> {
    const loaded = await this.#call('appendEvent', () => this.store.loadSession(key, {}));
    if (!loaded) throw new SessionNotFoundError(key.sessionId);
    const fresh = this.#toSession(loaded);
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

  /** Runs a store call; a failure that is not one of ours becomes a {@link BackendError} with the cause. */
  async #call<T>(operation: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      if (error instanceof AdkStateError) throw error;
      throw new BackendError(operation, error);
    }
  }
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
