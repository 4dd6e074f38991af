/**
 * The persistence contract: the few atomic primitives a backend must offer.
 * A store translates these to its backend and knows nothing of prefixes,
 * `temp:` keys, validation or staleness; {@link StateSessionService} holds
 * all of that. Values and events arrive already checked and encoded as JSON
 * text; a store keeps the text and hands it back unchanged.
 */
import type { EventFilter, StoredEvent } from './events.js';
import type { ListQuery } from './listing.js';
import type { SessionKey } from './requests.js';
import type { Bucket } from './scopes.js';
import type { StoreUsage } from './telemetry.js';

export type { Bucket, EventFilter, ListQuery, SessionKey, StoredEvent };

/** The stored facts about a session, apart from its events. */
export interface SessionHead {
  id: string;
  appName: string;
  userId: string;
  lastUpdateTime: number;
  /** Bumped by one on every write to the session; a new session starts at {@link CreateInput.revision}. */
  revision: number;
}

/** A session head with its own state bucket. */
export interface SessionRecord extends SessionHead {
  state: Bucket;
}

export interface CreateInput {
  key: SessionKey;
  /** The session bucket. */
  state: Bucket;
  /** Merged into the user bucket (top-level replace per key). */
  userDelta: Bucket;
  /** Merged into the app bucket (top-level replace per key). */
  appDelta: Bucket;
  /** Creation time, also the first `lastUpdateTime`. */
  createTime: number;
  /**
   * The new session's first revision, stored as given. Core draws it at
   * random below 2^30, so that a session object of a deleted session is all
   * but never (one chance in about a billion) at the revision of a session
   * re-created under the same id.
   */
  revision: number;
}

/** Result of {@link SessionStore.createSession}. */
export type CreateResult = { status: 'created'; userState: Bucket; appState: Bucket } | { status: 'exists' };

export interface LoadResult {
  session: SessionRecord;
  userState: Bucket;
  appState: Bucket;
  /** The events that match the filter, in append order. */
  events: StoredEvent[];
  /**
   * Set by a store with {@link SessionStore.loadSessionSince}: a mark of this
   * life of the session, new each time the key is created or imported (a
   * deleted and re-created id, an expired one created again, never has the
   * old mark). A store may make it name more than the life (the Redis store's
   * changes with each event written again in place); the service only hands
   * it back. Left out, the service never reads the session incrementally.
   */
  logMark?: string;
}

/** What a reader holds of a session, for {@link SessionStore.loadSessionSince}. */
export interface HeldSession {
  /** The stored revision its copy was read at. */
  revision: number;
  /** The {@link LoadResult.logMark} read with it. */
  logMark: string;
  /** How many events the copy holds: the first `events` of the log, as they were at `revision`. */
  events: number;
  /**
   * The id of the last event the copy holds; absent when it holds none. A
   * backend that can lose writes it acknowledged (a failover to a replica
   * that lagged, a restore from a backup) reaches the same revisions again
   * with other events: a store on one checks that its log still has this id
   * at position `events - 1`, and sends the whole log when it does not.
   */
  lastEventId?: string;
  /**
   * The stored form of that last event, as the copy read it, when the
   * service still has it. The same id can come back with other content
   * where writes were lost (an id a caller derives, written again after a
   * failover): a store on a backend that can lose writes compares this too
   * (its content, or a digest of it), and sends the whole log when it
   * differs. Absent when unknown, or when its JSON is longer than 4,096
   * characters (a cached log keeps no larger one twice): the id alone is
   * checked then.
   */
  lastEvent?: StoredEvent;
}

/**
 * Result of {@link SessionStore.loadSessionSince}: the session, its buckets
 * and its `logMark` as now stored, and either only the events that follow
 * the held ones (`restart: false`) or, when the held copy is no prefix of
 * the log any more, the whole log (`restart: true`).
 */
export interface SinceResult extends LoadResult {
  restart: boolean;
}

export interface AppendInput {
  key: SessionKey;
  /** The write happens only if the stored revision equals this. */
  expectedRevision: number;
  /**
   * Stored after the last event, or in place of the stored event with the
   * same id (keeping its position).
   */
  event: StoredEvent;
  sessionDelta: Bucket;
  userDelta: Bucket;
  appDelta: Bucket;
  /** The new `lastUpdateTime` (the event's timestamp). */
  lastUpdateTime: number;
}

/**
 * A whole session copied from elsewhere (a migration): its state exactly as
 * given, its events as stored there, in order, and its `lastUpdateTime`. No
 * event's delta is applied again: the state is the state.
 */
export interface ImportInput {
  key: SessionKey;
  /** The session bucket, exactly. */
  state: Bucket;
  /** Merged into the user bucket (top-level replace per key), as on create. */
  userDelta: Bucket;
  /** Merged into the app bucket (top-level replace per key), as on create. */
  appDelta: Bucket;
  /** The events in append order. */
  events: StoredEvent[];
  /** No later than the first event's timestamp (and than `lastUpdateTime`). */
  createTime: number;
  lastUpdateTime: number;
  /** The session's revision once imported (a store that counts writes may add its own steps: see below). */
  revision: number;
}

/** Result of {@link SessionStore.importSession}. */
export type ImportResult = { status: 'imported' } | { status: 'exists' };

/** Result of {@link SessionStore.appendEvent}; `ok` means the revision is now `expectedRevision + 1`. */
export type AppendResult = { status: 'ok' } | { status: 'stale'; revision: number } | { status: 'missing' };

export interface ListResult {
  /** How many sessions match the query in all, ignoring offset and limit. */
  totalItems: number;
  /** The window of the query, ordered as it asks. */
  sessions: SessionRecord[];
  /** The user bucket of every user that owns a returned session. */
  userStates: Map<string, Bucket>;
  appState: Bucket;
}

/**
 * The deadline of one store call, handed to every method. The service
 * rejects the call with a timed-out {@link BackendError} when the deadline
 * passes, whatever the store does; a store passes the deadline on to its
 * client where the client takes one (a timeout option, an abort signal), so
 * that abandoned work stops too, and must never leave a rejected promise
 * unhandled after the service has given up on it.
 */
export interface StoreCall {
  /** Aborted when the deadline passes (never, when the service has no deadline). */
  signal: AbortSignal;
  /** Epoch milliseconds by which the call must settle; `Infinity` for none. */
  deadline: number;
  /**
   * True on the service's calls: the service itself stops waiting when the
   * deadline passes, so a store need not race each of its waits against
   * `signal` (which costs an `AbortController` per call); it only begins no
   * new step after `deadline`. A store's own calls (background work) leave
   * it out and are raced against their signal.
   */
  bounded?: boolean;
  /**
   * Present when the call is traced: a store adds the round trips it made
   * and, where it knows them, the bytes it moved, for the call's span.
   */
  usage?: StoreUsage;
}

/**
 * Whether a store must begin no new step for `call`: its deadline has passed
 * or, on a call that is not {@link StoreCall.bounded} (a store's own), its
 * signal has aborted. The service's calls are judged by their deadline
 * alone, so their `AbortController` is never made for this.
 */
export function callAbandoned(call: StoreCall | undefined): boolean {
  if (call === undefined) return false;
  return Date.now() >= call.deadline || (call.bounded !== true && call.signal.aborted);
}

/**
 * What a backend implements. Every method is atomic: it either happens whole
 * or not at all, and no reader ever sees part of it. A failure is thrown as
 * is (the service wraps it in a {@link BackendError} that says the write may
 * have been applied), or as a `BackendError` with `mayHaveApplied: false`
 * where the store knows that nothing was written.
 */
export interface SessionStore {
  /** The backend's name for telemetry (`redis`, `mongodb`, …). Default: the store's class name. */
  readonly backend?: string;
  /** Creates the session and merges the user/app deltas, unless the key exists. */
  createSession(input: CreateInput, call?: StoreCall): Promise<CreateResult>;
  /** The session, its buckets and the filtered events; `undefined` if the key is not stored. */
  loadSession(key: SessionKey, filter: EventFilter, call?: StoreCall): Promise<LoadResult | undefined>;
  /** Compare-and-set on the revision, then event + deltas + lastUpdateTime + revision, all or nothing. */
  appendEvent(input: AppendInput, call?: StoreCall): Promise<AppendResult>;
  /** Removes the session and all its events; user and app buckets stay. Unknown keys are a no-op. */
  deleteSession(key: SessionKey, call?: StoreCall): Promise<void>;
  /** A window of an app's (or one user's) sessions with their state buckets. */
  listSessions(query: ListQuery, call?: StoreCall): Promise<ListResult>;
  readUserState(appName: string, userId: string, call?: StoreCall): Promise<Bucket>;
  readAppState(appName: string, call?: StoreCall): Promise<Bucket>;
  /**
   * Optional: stores the whole session at once, unless the key exists. The
   * stored revision must be `input.revision`. Without it the service imports
   * through `createSession` and one `appendEvent` per event (no deltas), which
   * is exact but not atomic: an event the store refuses makes the service
   * remove the session again, and an import interrupted outright (the
   * process killed) leaves a session holding the first events, which a
   * re-run replaces.
   */
  importSession?(input: ImportInput, call?: StoreCall): Promise<ImportResult>;
  /**
   * Optional: a whole-log read for a reader that holds part of it. With the
   * same atomicity as `loadSession(key, {})`, returns the session, buckets and
   * `logMark`, and only the events appended after the held ones; or the whole
   * log with `restart: true` when the held copy is not what the log now
   * begins with: another life of the key (`held.logMark` differs), an event
   * among the held ones written again since `held.revision` (a re-appended
   * id), a revision below the held one, or (on a backend that can lose
   * acknowledged writes) another event than `held.lastEventId` where the
   * held copy ends. `undefined` when the key is not
   * stored (deleted, expired). The service uses it for `getSession` without
   * a filter, against its cache of recently read logs.
   */
  loadSessionSince?(key: SessionKey, held: HeldSession, call?: StoreCall): Promise<SinceResult | undefined>;
  /**
   * Optional: the name of every app that holds at least one session, in no
   * particular order (a store may also name an app that holds only state).
   * Used by tools that copy a whole store, such as `adk-state migrate`.
   */
  listAppNames?(call?: StoreCall): Promise<string[]>;
  /**
   * Optional: the key of every session of `appName` (of `userId` only, when
   * given) that the store holds, found without the indexes `listSessions`
   * reads (a scan of the stored records). A store whose listing can miss a
   * session whose index entries were changed outside adk-state offers it, so
   * that tools that copy a whole store (`adk-state migrate`) copy that
   * session too.
   */
  listSessionKeys?(appName: string, userId: string | undefined, call?: StoreCall): Promise<StoredSessionKey[]>;
  /**
   * Releases what the store opened itself (never a client the caller passed
   * in). A store whose client may go on with a call after its deadline (its
   * own retries) can wait here, for a bounded time, for those calls to end,
   * so that the caller's client can be closed after it with none in flight.
   */
  close?(): Promise<void>;
}

/** A session's user and id, as {@link SessionStore.listSessionKeys} names it. */
export interface StoredSessionKey {
  userId: string;
  sessionId: string;
}

/**
 * How many times a store reads again, when writers change what it reads
 * between the steps of one read, before it gives up with
 * {@link ConsistentReadContention}.
 */
export const CONSISTENT_READ_ATTEMPTS = 8;

/**
 * A read could not see its data at one moment in `attempts` tries: other
 * writers kept changing it between the read's steps. Nothing was written,
 * and the same read succeeds once the writes let up.
 */
export class ConsistentReadContention extends Error {
  readonly attempts: number;

  constructor(what: string, attempts: number) {
    super(`could not read ${what} at one moment in ${attempts} attempts (other writers kept changing it); try again`);
    this.name = 'ConsistentReadContention';
    this.attempts = attempts;
  }
}
