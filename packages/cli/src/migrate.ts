/**
 * `adk-state migrate`: copies sessions from one store to another, faithfully
 * (state as stored, events as stored, lastUpdateTime), safe to re-run and to
 * interrupt, with a field-by-field check on request.
 *
 * A re-run never writes state older than the target's. Each session, each
 * user's `user:` state and each app's `app:` state is decided on its own:
 *
 * - a session missing from the target is copied; one the target holds with
 *   fewer of the source's events and no write of its own (an earlier run:
 *   see {@link decide}) is replaced; one that is the same is left alone; one
 *   that took writes of its own in the target is a conflict;
 * - a `user:` or `app:` key the target lacks is written; one the target holds
 *   with the same value is left alone; one the target holds with another
 *   value is a conflict of that key, in its scope (the user, or the app).
 *
 * A conflict goes to the side that last wrote it: for a session, the later
 * `lastUpdateTime`; for a `user:` or `app:` key, the later of its last write
 * on each side (the last event that wrote it, or the creation of a session
 * whose state gave it its value: see {@link lastWriteOf}). A tie is left alone. The policy can
 * be `target` (leave every conflict alone) or `source` (the source always
 * wins, `--overwrite`). Keys that only the target holds are never removed.
 */
import { isDeepStrictEqual } from 'node:util';
import { type BackendError, isAdkStateError } from '@adk-state/core';
import { scopeOf, withoutTemp } from '@adk-state/core/store';
import type { BaseSessionService, Event, Session } from '@google/adk';
import { checkStore, closeWithin, problemOf } from './check.js';
import { openReadOnly } from './read-only-source.js';
import { redactUri } from './redact.js';
import { isMemoryUri, sessionServiceFromUri, type UriSessionService } from './uri.js';

/** Who wins a conflict: the side that wrote last (default), always the target, or always the source. */
export type ConflictPolicy = 'newer' | 'target' | 'source';

/** What to copy, and how. */
export interface MigrateOptions {
  /**
   * The source: any URI `sessionServiceFromUri` takes, `@google/adk`'s own `sqlite://`, `postgresql://`, … included,
   * but `memory://`; a `sqlite://`, `postgresql://`, `mysql://` or `mariadb://` source is opened read-only
   * (see `read-only-source.ts`).
   */
  from: string;
  /** The target: an adk-state store, but `memory://`. */
  to: string;
  /** One app; every app of the source when absent (the source must be able to list them). */
  appName?: string;
  /** Only this user's sessions. */
  userId?: string;
  /** Decide and report, write nothing. */
  dryRun?: boolean;
  /** After copying, compare every session of the run field by field. */
  verify?: boolean;
  /** Who wins a conflict. Default `newer`. */
  onConflict?: ConflictPolicy;
  /** Same as `onConflict: 'source'`. */
  overwrite?: boolean;
  /** Stop after this many failed sessions in a row. Default 5. */
  maxFailures?: number;
  /** Bound of the start-up check of each store, in milliseconds. Default 10 000. */
  checkTimeoutMs?: number;
  /** Deadline of each call to an adk-state store, in milliseconds (core's `timeoutMs`). Default core's, 30 000. */
  timeoutMs?: number;
  /** Stops the run between two sessions (the report then says `interrupted`). */
  signal?: AbortSignal;
  /** Called after each session. */
  onProgress?: (progress: MigrateProgress) => void;
}

/** Where a run is. */
export interface MigrateProgress {
  /** The app being copied. */
  appName: string;
  /** Sessions done, and in all, over every app of the run. */
  done: number;
  total: number;
  events: number;
  startedAt: number;
}

/** What a run found and did with one session. */
export type SessionDecision =
  /** Not in the target: copied. */
  | 'copy'
  /** In the target with the same state, events and lastUpdateTime: left alone. */
  | 'unchanged'
  /** Behind in the target (a prefix of the source's events, no later update), or a conflict the source won: replaced. */
  | 'update'
  /** In the target with writes of its own that the policy leaves alone. */
  | 'conflict';

/** One difference `verify` found. */
export interface Difference {
  session: string;
  field: string;
  source: unknown;
  target: unknown;
}

/** What a run did with one `user:` or `app:` scope whose keys differ between the two stores. */
export interface ScopeOutcome {
  appName: string;
  /** `user:<id>` or `app`. */
  scope: string;
  /**
   * Keys written to the target (or that would be, in a dry run), by a run that
   * stopped too (those written before it stopped); with a source the app
   * writes to during the run, also keys the source wrote since the scope was
   * decided and carried since.
   */
  written: string[];
  /** Keys whose target value was left alone (conflicts the target won). */
  keptInTarget: string[];
  /**
   * Keys to write that no import of the run carried: no session of the user
   * (or of the app) was written, nor could one found unchanged be replaced to
   * carry them; or the run stopped before one did. A later run writes them
   * once one can be.
   */
  unwritten: string[];
}

/** Why a run ended before it was through. */
export interface Stop {
  reason: 'interrupted' | 'failures' | 'store';
  message: string;
}

/** The outcome of a run. */
export interface MigrateReport {
  /** The apps of the run. */
  apps: string[];
  /** Sessions the source holds for the query. */
  sessions: number;
  /**
   * `app/user/session` of every session the source holds but its listing
   * left out (its listing entries were changed outside adk-state), found by
   * the source store's scan of its records; the run handles them as the rest.
   */
  unlisted: string[];
  /**
   * What the run decided for each session of `unlisted` it got through, by
   * `app/user/session`: one that failed, or that the run never reached, is absent.
   */
  unlistedDecisions: Record<string, SessionDecision>;
  /** Sessions the run got to (all of them unless it stopped). */
  processed: number;
  /** Events copied (or that would be, in a dry run). */
  events: number;
  decisions: Record<SessionDecision, number>;
  /** `app/user/session` of every conflict left alone. */
  conflicts: string[];
  /**
   * `app/user/session` of every conflict the source won (by the policy): the
   * target's session, with writes of its own, was replaced (or would be, in
   * a dry run) by the source's; those writes are gone from it. Counted as
   * `update`.
   */
  overwritten: string[];
  /** Scopes with keys written or left alone. */
  scopes: ScopeOutcome[];
  /** `app/user/session` and the error of every session that could not be copied. */
  failed: { session: string; error: string }[];
  /** With `verify`: every difference between source and target (none means a faithful copy). */
  differences: Difference[];
  /** True when `verify` ran (not in a dry run, nor after a stop). */
  verified: boolean;
  dryRun: boolean;
  /** Set when the run ended early. */
  stopped?: Stop;
}

interface ImportingService extends BaseSessionService {
  importSession(session: Session, options?: { replace?: boolean }): Promise<'imported' | 'exists'>;
  getUserState(request: { appName: string; userId: string }): Promise<Record<string, unknown>>;
  getAppState(request: { appName: string }): Promise<Record<string, unknown>>;
}

function canImport(service: BaseSessionService): service is ImportingService {
  return typeof (service as Partial<ImportingService>).importSession === 'function';
}

/**
 * Events as stored data, as an import stores them (no partial event, no
 * `temp:` key in a delta): what must be identical on both sides.
 */
function eventData(events: readonly Event[]): unknown[] {
  let data = eventDataOf.get(events);
  if (!data) {
    data = JSON.parse(JSON.stringify(events.filter((event) => event.partial !== true).map(withoutTemp))) as unknown[];
    eventDataOf.set(events, data);
  }
  return data;
}

/** {@link eventData} of each events array read (a run never changes one): a session is compared more than once. */
const eventDataOf = new WeakMap<readonly Event[], unknown[]>();

/** The keys of one scope (`session` for un-prefixed keys), as stored JSON. */
function scopeState(state: Record<string, unknown>, scope: 'session' | 'user' | 'app'): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(state)) {
    // Defined, not assigned: a key named __proto__ is a key like any other.
    if (scopeOf(key) === scope)
      Object.defineProperty(result, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return JSON.parse(JSON.stringify(result)) as Record<string, unknown>;
}

/**
 * Whether two stored JSON values are the same data: objects key by key in any
 * order (stores hand keys back in orders of their own), arrays in order.
 */
const same = (a: unknown, b: unknown) => isDeepStrictEqual(a, b);

/**
 * What to do with a source session given what the target holds, before any
 * policy: only the session's own keys, its events and its lastUpdateTime
 * count (`user:` and `app:` keys are decided key by key, per scope). The
 * target's session is behind (`update`) when its events are a prefix of the
 * source's and its lastUpdateTime is not later, or, whatever the times, when
 * its log is an earlier state of the source's (see {@link behindSource}).
 */
export function decide(source: Session, target: Session | undefined): SessionDecision {
  if (!target) return 'copy';
  if (sameSession(source, target)) return 'unchanged';
  const sourceEvents = eventData(source.events);
  const targetEvents = eventData(target.events);
  const prefix =
    targetEvents.length <= sourceEvents.length && targetEvents.every((event, n) => same(event, sourceEvents[n]));
  if (prefix && target.lastUpdateTime <= source.lastUpdateTime) return 'update';
  return behindSource(source, sourceEvents, target, targetEvents) ? 'update' : 'conflict';
}

/**
 * Whether the target's session is an earlier state of the source's, by their
 * logs rather than their times: the target holds events, every one of them
 * one of the source's, in the source's order (a prefix on an adk-state source; on ADK's
 * SQL service, which reads events in timestamp order, an event a slower clock
 * stamped lands amid them), the source holds events the target lacks, and
 * every session key on which the two differ is one those events write. Then
 * the target took no write of its own, whatever the times say: an event
 * appended with an older timestamp (a second server with a slower clock)
 * moves the source's lastUpdateTime back, before the target's copy.
 */
function behindSource(
  source: Session,
  sourceEvents: readonly unknown[],
  target: Session,
  targetEvents: readonly unknown[],
): boolean {
  // Without an event, nothing in the target's copy says it came from the source: the times decide.
  if (targetEvents.length === 0) return false;
  const lackedAt = missingFrom(targetEvents, sourceEvents);
  if (lackedAt === undefined || lackedAt.length === 0) return false;
  const stored = source.events.filter((event) => event.partial !== true);
  const lacked = lackedAt.map((at) => stored[at] as Event);
  const written = new Set(lacked.flatMap((event) => Object.keys(event.actions?.stateDelta ?? {})));
  const a = scopeState(source.state, 'session');
  const b = scopeState(target.state, 'session');
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (!Object.hasOwn(a, key)) return false;
    if (!(Object.hasOwn(b, key) && same(a[key], b[key])) && !written.has(key)) return false;
  }
  return true;
}

/**
 * Whether the target's session is a later state of the source's, by their
 * logs: it holds every event of the source's, in the source's order, and
 * events of its own besides. Then the target wrote last, whatever the times
 * say (its own events stamped by a clock behind the source's).
 */
function aheadOfSource(source: Session, target: Session): boolean {
  const extra = missingFrom(eventData(source.events), eventData(target.events));
  return extra !== undefined && extra.length > 0;
}

/**
 * The positions in `log` of the events that `part` lacks, when `part` is
 * `log` without them (every event of `part` in `log`, in the same order);
 * undefined when it is not.
 */
function missingFrom(part: readonly unknown[], log: readonly unknown[]): number[] | undefined {
  const missing: number[] = [];
  let at = 0;
  for (const event of part) {
    while (at < log.length && !same(log[at], event)) missing.push(at++);
    if (at === log.length) return undefined;
    at++;
  }
  while (at < log.length) missing.push(at++);
  return missing;
}

/** Whether two reads of a session hold the same data: its own keys, its events and its lastUpdateTime. */
function sameSession(a: Session, b: Session): boolean {
  return (
    a.lastUpdateTime === b.lastUpdateTime &&
    same(eventData(a.events), eventData(b.events)) &&
    same(scopeState(a.state, 'session'), scopeState(b.state, 'session'))
  );
}

/**
 * Reads the target's session again just before it is replaced: a session
 * that took writes of its own since the run read it is left as it is, and
 * the run fails for it (a later run decides it again).
 */
async function assertTargetAsRead(target: BaseSessionService, read: Session): Promise<void> {
  const now = await target.getSession({ appName: read.appName, userId: read.userId, sessionId: read.id });
  if (now && sameSession(now, read)) return;
  throw new Error(
    `the target's session ${now ? 'changed' : 'was deleted'} during the run, after it was compared; it was left as it is (run again to decide it anew)`,
  );
}

/** Whether the source wins a conflict whose sides last wrote at these times. */
function sourceWins(policy: ConflictPolicy, sourceTime: number, targetTime: number): boolean {
  if (policy === 'source') return true;
  if (policy === 'target') return false;
  return sourceTime > targetTime;
}

/**
 * When a side last wrote a `user:` or `app:` key (`user:plan`, say): the
 * latest event of `sessions` whose state delta wrote it, or, where the
 * key's value is not the one that event gave it, the creation of a session
 * whose state gave it (see {@link ScopeClock}); `-Infinity` when neither.
 */
export function lastWriteOf(sessions: readonly Session[], key: string): number {
  const scope = scopeOf(key);
  if (scope !== 'user' && scope !== 'app') throw new Error(`not a user: or app: key: ${key}`);
  const clock = new ScopeClock(scope);
  for (const session of sessions) clock.add(session);
  return clock.lastWrite(key);
}

/**
 * How much later than an event a session's creation is taken to be when it
 * can have been any time after that event: a microsecond, so that it comes
 * after the event's write and before any later one in whole milliseconds.
 */
const JUST_AFTER_MS = 0.001;

/**
 * {@link lastWriteOf} for the keys of one scope, told one session at a time
 * (so that none has to be kept).
 *
 * A store keeps no record of the state a session was created with, so that
 * write is found from what it left: a key whose value is not the one the
 * side's last event writing that key gave it (or that no event wrote) got
 * it from the state of a session created later. Its time is the earliest
 * that creation can have been, so that a side never wins on a guess: a
 * session without events was created at its lastUpdateTime, but one with
 * events at any time up to its first event, so only just after that event
 * ({@link JUST_AFTER_MS}) when its first event came later.
 */
class ScopeClock {
  /** Per key of the scope: the time and value of the latest event that wrote it. */
  readonly #lastEvents = new Map<string, { time: number; value: unknown }>();
  /** The scope's values on this side, as the sessions read show them. */
  readonly #values = new Map<string, unknown>();
  /**
   * Each session's creation: `exact` (a session without events, created at
   * its lastUpdateTime) or no later than `time` (its first event).
   */
  readonly #starts: { time: number; exact: boolean }[] = [];
  constructor(readonly scope: 'user' | 'app') {}

  add(session: Session): void {
    const first = session.events[0]?.timestamp;
    this.#starts.push(
      first === undefined ? { time: session.lastUpdateTime, exact: true } : { time: first, exact: false },
    );
    for (const [key, value] of Object.entries(scopeState(session.state, this.scope))) this.#values.set(key, value);
    for (const event of session.events) {
      const delta = event.actions?.stateDelta ?? {};
      for (const key of Object.keys(delta)) {
        if (scopeOf(key) !== this.scope) continue;
        const last = this.#lastEvents.get(key);
        if (!last || event.timestamp >= last.time)
          this.#lastEvents.set(key, { time: event.timestamp, value: delta[key] });
      }
    }
  }

  /** When this side last wrote `key` (a key of the scope, with its prefix). */
  lastWrite(key: string): number {
    const last = this.#lastEvents.get(key);
    const written = last?.time ?? Number.NEGATIVE_INFINITY;
    if (!this.#values.has(key) || (last && same(last.value, this.#values.get(key)))) return written;
    // Given by a session's creation state, after the last event that wrote the key: the earliest
    // such creation can have been (one whose session has events, just after that event).
    let created = Number.POSITIVE_INFINITY;
    for (const start of this.#starts) {
      if (start.time > written) created = Math.min(created, start.exact ? start.time : written + JUST_AFTER_MS);
    }
    return created === Number.POSITIVE_INFINITY ? written : created;
  }
}

/** The `user:`/`app:` keys a run left to the target on purpose. */
export interface KeptKeys {
  has(key: string): boolean;
}

/** Field-by-field differences between a source session and its copy (`user:`/`app:` keys the run left alone excepted). */
export function compareCopies(
  source: Session,
  target: Session | undefined,
  keptInTarget: KeptKeys = new Set(),
): Difference[] {
  const session = `${source.appName}/${source.userId}/${source.id}`;
  if (!target) return [{ session, field: 'session', source: 'present', target: 'missing' }];
  const differences: Difference[] = [];
  const note = (field: string, a: unknown, b: unknown) => {
    if (!same(a, b)) differences.push({ session, field, source: a, target: b });
  };
  note('lastUpdateTime', source.lastUpdateTime, target.lastUpdateTime);
  const a = scopeState(source.state, 'session');
  const b = scopeState(target.state, 'session');
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) note(`state.${key}`, a[key], b[key]);
  // Shared keys: the source's must be in the target, unless the run left the target's value on purpose.
  const shared = { ...scopeState(source.state, 'user'), ...scopeState(source.state, 'app') };
  const copied = { ...scopeState(target.state, 'user'), ...scopeState(target.state, 'app') };
  for (const key of Object.keys(shared)) if (!keptInTarget.has(key)) note(`state.${key}`, shared[key], copied[key]);
  const sourceEvents = eventData(source.events);
  const targetEvents = eventData(target.events);
  note('events.length', sourceEvents.length, targetEvents.length);
  for (let n = 0; n < Math.min(sourceEvents.length, targetEvents.length); n++) {
    const x = sourceEvents[n] as Record<string, unknown>;
    const y = targetEvents[n] as Record<string, unknown>;
    for (const field of new Set([...Object.keys(x), ...Object.keys(y)]))
      note(`events[${n}].${field}`, x[field], y[field]);
  }
  return differences;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A failure that ends the run at once: the backend refused the configuration,
 * or the connection is gone. One session's unreadable data fails that session only.
 */
function isFatal(error: unknown): boolean {
  if (isAdkStateError(error, 'BACKEND_ERROR')) {
    const { kind } = error as BackendError;
    if (kind === 'authentication' || kind === 'unknown-database') return true;
  }
  const problem = problemOf(error);
  return (
    problem === 'authentication' ||
    problem === 'unknown database' ||
    problem === 'refused' ||
    problem === 'host not found'
  );
}

/**
 * What an adk-state service offers tools that copy a whole store (each
 * answers `undefined` when its store cannot): see `StateSessionService`.
 */
interface ScanningService {
  listAppNames(): Promise<string[] | undefined>;
  listSessionKeys(request: {
    appName: string;
    userId?: string;
  }): Promise<Array<{ userId: string; sessionId: string }> | undefined>;
}

/** The apps of a source: its store's own list, or the `sessions` table of `@google/adk`'s database service. */
export async function listApps(service: BaseSessionService): Promise<string[] | undefined> {
  const lister = service as Partial<ScanningService>;
  if (typeof lister.listAppNames === 'function') {
    const names = await lister.listAppNames();
    if (names) return names;
  }
  const database = service as {
    init?: () => Promise<void>;
    orm?: { em: { fork(): { getConnection(): { execute(sql: string): Promise<Array<Record<string, unknown>>> } } } };
  };
  if (typeof database.init === 'function' && service.constructor.name === 'DatabaseSessionService') {
    await database.init();
    const rows = await database.orm?.em.fork().getConnection().execute('select distinct app_name from sessions');
    return (rows ?? []).map((row) => String(row.app_name)).sort();
  }
  return undefined;
}

/**
 * The sessions of an app that the source's store holds but `listed` (its
 * listing) does not name, as heads without state or events (the run loads
 * each one whole): none when the store cannot find them without its listing.
 */
async function unlistedSessions(
  source: BaseSessionService,
  appName: string,
  userId: string | undefined,
  listed: readonly Session[],
): Promise<Session[]> {
  const lister = source as Partial<ScanningService>;
  if (typeof lister.listSessionKeys !== 'function') return [];
  const found = await lister.listSessionKeys({ appName, ...(userId === undefined ? {} : { userId }) });
  if (!found) return [];
  const seen = new Set(listed.map((session) => `${session.userId}\u0000${session.id}`));
  return found
    .filter((key) => !seen.has(`${key.userId}\u0000${key.sessionId}`))
    .map((key) => ({ appName, userId: key.userId, id: key.sessionId, state: {}, events: [], lastUpdateTime: 0 }));
}

/**
 * Refuses, before any store is opened, what no run can use: a `memory://`
 * store on either side (it lives only in the process that made it: a source
 * would be a new, empty one, and a copy would be gone when the run ends), an
 * in-memory SQLite source (the same). A `sqlite://`, `postgresql://`,
 * `mysql://` or `mariadb://` source is opened so that it cannot change (see
 * `read-only-source.ts`).
 */
function refuseUnusable(from: string, to: string): void {
  const memory = 'a memory:// store lives only in the process that made it';
  if (isMemoryUri(from)) {
    throw new Error(
      `the source ${redactUri(from)} cannot be migrated from: ${memory}, so this run would read a new, empty one`,
    );
  }
  if (from === 'sqlite://:memory:') {
    throw new Error(
      `the source ${from} cannot be migrated from: an in-memory SQLite database lives only in the process that opened it, so this run would read a new, empty one`,
    );
  }
  if (isMemoryUri(to)) {
    throw new Error(
      `the target ${redactUri(to)} cannot be migrated to: ${memory}, so the copy would be gone when this run ends`,
    );
  }
}

/** Runs a migration. Opens both stores from their URIs, checks them, and closes them at the end. */
export async function migrate(options: MigrateOptions): Promise<MigrateReport> {
  refuseUnusable(options.from, options.to);
  // No cache of read logs: a run reads each session once or twice, and a cache would hold up to 32 MiB a store.
  const serviceOptions = {
    logCacheBytes: 0,
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  };
  const bound = options.checkTimeoutMs === undefined ? {} : { timeoutMs: options.checkTimeoutMs };
  const source =
    (await openReadOnly(
      options.from,
      'the source',
      'a source is only read, never created or changed',
      bound.timeoutMs,
    )) ?? (await sessionServiceFromUri(options.from, serviceOptions));
  let target: UriSessionService | undefined;
  try {
    target = await sessionServiceFromUri(options.to, serviceOptions);
    if (!canImport(target)) {
      throw new Error(`the target ${redactUri(options.to)} is not an adk-state store (it cannot import)`);
    }
    await checkStore(options.from, source, bound);
    await checkStore(options.to, target, bound);
    let apps: string[];
    if (options.appName !== undefined) apps = [options.appName];
    else {
      const listed = await listApps(source);
      if (!listed) {
        throw new Error(`the source ${redactUri(options.from)} cannot list its apps: name one with --app`);
      }
      apps = listed;
    }
    return await copyAll(source, target, { ...options, apps });
  } finally {
    await Promise.all([closeWithin(source), closeWithin(target)]);
  }
}

function emptyReport(options: { dryRun?: boolean; verify?: boolean }, apps: string[]): MigrateReport {
  return {
    apps,
    sessions: 0,
    unlisted: [],
    unlistedDecisions: {},
    processed: 0,
    events: 0,
    decisions: { copy: 0, unchanged: 0, update: 0, conflict: 0 },
    conflicts: [],
    overwritten: [],
    scopes: [],
    failed: [],
    differences: [],
    verified: options.verify === true && options.dryRun !== true,
    dryRun: options.dryRun === true,
  };
}

/** One source session as the run handles it. */
interface Item {
  head: Session;
  full?: Session;
  existing?: Session;
  decision?: SessionDecision;
  /** Loading it failed (the failure is reported once). */
  failed?: boolean;
  /** A conflict the source won: the target's own writes go with it. */
  overwrites?: boolean;
}

const byUserThenId = (a: Session, b: Session) =>
  a.userId === b.userId ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : a.userId < b.userId ? -1 : 1;

/** Thrown inside a run to end it (caught by {@link copyAll}). */
class Stopped {
  constructor(readonly stop: Stop) {}
}

/** Copies between two open services (see {@link migrate}). `apps` (or `appName`) names the apps. */
export async function copyAll(
  source: BaseSessionService,
  target: ImportingService,
  options: Omit<MigrateOptions, 'from' | 'to'> & { apps?: string[] },
): Promise<MigrateReport> {
  const apps = options.apps ?? (options.appName === undefined ? [] : [options.appName]);
  const report = emptyReport(options, apps);
  const policy: ConflictPolicy = options.overwrite ? 'source' : (options.onConflict ?? 'newer');
  const maxFailures = options.maxFailures ?? 5;
  const { userId } = options;
  const listings = new Map<string, Session[]>();
  for (const appName of apps) {
    const listed = await source.listSessions({ appName, ...(userId === undefined ? {} : { userId }) });
    const heads = [...listed.sessions];
    for (const head of await unlistedSessions(source, appName, userId, heads)) {
      heads.push(head);
      report.unlisted.push(`${appName}/${head.userId}/${head.id}`);
    }
    listings.set(appName, heads.sort(byUserThenId));
    report.sessions += heads.length;
  }
  const progress: MigrateProgress = { appName: '', done: 0, total: report.sessions, events: 0, startedAt: Date.now() };
  const unlisted = new Set(report.unlisted);
  const copied: { session: Session; kept: KeptKeys }[] = [];
  let failuresInARow = 0;
  // The scopes the run is at, reported when it stops there.
  let appScope: ScopeWrites | undefined;
  let userScope: ScopeWrites | undefined;

  const checkSignal = () => {
    if (options.signal?.aborted) throw new Stopped({ reason: 'interrupted', message: 'interrupted' });
  };
  const advance = () => {
    report.processed++;
    progress.done++;
    options.onProgress?.(progress);
  };

  try {
    for (const appName of apps) {
      progress.appName = appName;
      const heads = listings.get(appName) ?? [];
      const items: Item[] = heads.map((head) => ({ head }));
      const name = (session: Session) => `${appName}/${session.userId}/${session.id}`;
      const fail = (session: Session, error: unknown) => {
        report.failed.push({ session: name(session), error: describe(error) });
        failuresInARow++;
        if (isFatal(error)) throw new Stopped({ reason: 'store', message: describe(error) });
        if (failuresInARow >= maxFailures) {
          throw new Stopped({
            reason: 'failures',
            message: `${failuresInARow} sessions in a row failed (the last: ${describe(error)})`,
          });
        }
      };
      /** Reads a session on both sides unless it is read already; false when that failed (reported once). */
      const load = async (item: Item): Promise<boolean> => {
        if (item.full) return true;
        if (item.failed) return false;
        checkSignal();
        const key = { appName, userId: item.head.userId, sessionId: item.head.id };
        try {
          const full = await source.getSession(key);
          if (!full) throw new Error('deleted from the source during the run');
          item.existing = await target.getSession(key);
          item.full = full;
          item.decision = decide(full, item.existing);
          failuresInARow = 0;
          return true;
        } catch (error) {
          item.failed = true;
          fail(item.head, error);
          return false;
        }
      };
      const scopes = { source, target, policy, onlyUser: userId, load, fail };

      /**
       * Writes `item` (loaded) with the shared keys to carry (see {@link ScopeWrites}): the scopes'
       * keys the run decided to write that no import carried yet, and any the source wrote since
       * the run decided them, as this read of the session shows them.
       */
      const write = async (item: Item, open: readonly ScopeWrites[]): Promise<void> => {
        const full = item.full as Session;
        let shared = Object.assign({}, ...open.map((scope) => scope.toWrite(full))) as Record<string, unknown>;
        if (!options.dryRun) {
          if (item.decision === 'update' && item.existing) await assertTargetAsRead(target, item.existing);
          for (const scope of open) shared = await scope.withoutTargetWrites(target, shared);
          const state = { ...scopeState(full.state, 'session'), ...shared };
          const outcome = await target.importSession({ ...full, state }, { replace: item.decision === 'update' });
          if (outcome === 'exists') throw new Error('another writer created it in the target during the run');
        }
        for (const scope of open) scope.carried(shared);
        report.events += full.events.length;
        progress.events += full.events.length;
      };
      /**
       * Shared keys that no import of a group carried: one session of the
       * group the run found unchanged, read again, is replaced as it is with
       * them. The sessions were counted already: a read or a write that fails
       * here is not a failure of theirs (the keys say they were not written);
       * it ends the attempt.
       */
      const carry = async (group: Item[], open: readonly ScopeWrites[]): Promise<void> => {
        for (const item of group) {
          if (item.decision !== 'unchanged' || item.failed) continue;
          checkSignal();
          const key = { appName, userId: item.head.userId, sessionId: item.head.id };
          try {
            const full = await source.getSession(key);
            const existing = full && (await target.getSession(key));
            // Changed on either side since it was found unchanged: another one carries them.
            if (!full || !existing || decide(full, existing) !== 'unchanged') continue;
            Object.assign(item, { full, existing, decision: 'update' });
            await write(item, open);
            report.decisions.unchanged--;
            report.decisions.update++;
            if (unlisted.has(name(full))) report.unlistedDecisions[name(full)] = 'update';
            return;
          } catch (error) {
            if (isFatal(error)) throw new Stopped({ reason: 'store', message: describe(error) });
            return;
          } finally {
            release(item);
          }
        }
      };

      // The app scope first: its keys ride on the first session the run writes.
      const app = new ScopeWrites(await scopeDecision(appName, 'app', items, undefined, scopes));
      appScope = app;

      // One user's sessions at a time, each read when its turn comes and let go once handled.
      let index = 0;
      while (index < items.length) {
        const owner = (items[index] as Item).head.userId;
        const group: Item[] = [];
        while (index < items.length && (items[index] as Item).head.userId === owner) group.push(items[index++] as Item);
        const user = new ScopeWrites(await scopeDecision(appName, 'user', group, owner, scopes));
        userScope = user;
        const open = [user, app];
        // Read at the check: a key the target wrote during the run joins them when a write finds it.
        const kept: KeptKeys = { has: (key) => app.kept(key) || user.kept(key) };
        for (const item of group) {
          checkSignal();
          if (!(await load(item))) {
            advance();
            continue;
          }
          const full = item.full as Session;
          // A conflict goes to the side the policy names; under `newer`, a target whose log
          // extends the source's wrote last, whatever the times.
          if (
            item.decision === 'conflict' &&
            item.existing &&
            !(policy === 'newer' && aheadOfSource(full, item.existing)) &&
            sourceWins(policy, full.lastUpdateTime, item.existing.lastUpdateTime)
          ) {
            item.decision = 'update';
            item.overwrites = true;
          }
          const decision = item.decision as SessionDecision;
          try {
            if (decision === 'copy' || decision === 'update') await write(item, open);
            report.decisions[decision]++;
            if (unlisted.has(name(full))) report.unlistedDecisions[name(full)] = decision;
            if (item.overwrites) report.overwritten.push(name(full));
            if (decision === 'conflict') report.conflicts.push(name(full));
            else if (report.verified) copied.push({ session: full, kept });
            failuresInARow = 0;
          } catch (error) {
            advance();
            fail(full, error);
            continue;
          } finally {
            release(item);
          }
          advance();
        }
        if (user.unwritten().length > 0 || app.unwritten().length > 0) await carry(group, open);
        // What no import carried is not written: user keys are reported so, app keys wait for the next user.
        userScope = undefined;
        user.report(report);
      }
      appScope = undefined;
      app.report(report);
    }
  } catch (error) {
    if (!(error instanceof Stopped)) throw error;
    // What the scopes it was at got written before the stop is reported, as is what was not.
    userScope?.report(report);
    appScope?.report(report);
    report.stopped = error.stop;
    report.verified = false;
  }
  if (report.verified) {
    for (const { session: original, kept } of copied) {
      const key = { appName: original.appName, userId: original.userId, sessionId: original.id };
      const copy = await target.getSession(key);
      report.differences.push(...compareCopies(original, copy, kept));
    }
  }
  return report;
}

/** What a run decided for one scope (the app's, or one user's). */
interface ScopeDecision {
  appName: string;
  scope: 'user' | 'app';
  /** The user whose scope it is (`user` only). */
  userId?: string;
  /** `user:<id>` or `app`. */
  label: string;
  /** Keys to write, with the source's values as the decision read them. */
  write: Record<string, unknown>;
  /** Keys whose target value the decision left alone. */
  keptInTarget: string[];
  /** Each side's keys of the scope when it was decided; absent when that could not be read (nothing is written then). */
  seen?: { source: Record<string, unknown>; target: Record<string, unknown> };
}

/**
 * The keys of one scope that a run writes, riding on the sessions it imports,
 * and what the report says of them: the keys decided to write ride on the
 * next import; after that, an import carries a key again only when the
 * session it imports, as just read, shows the source wrote another value
 * since (the app still writing to the source); and a key the two sides held
 * with the same value when the scope was decided, or that neither held, is
 * carried when the source writes it during the run. Else a session imported
 * with the event that wrote a newer value would go into the target beside
 * the older value an earlier import carried, and each later run would find
 * the two sides' last writes of the key at that same event.
 */
class ScopeWrites {
  /** Keys carried by an import, and the last value carried. */
  readonly #carried = new Map<string, unknown>();
  /** Keys left to the target: the decision's, and those the app wrote to the target during the run. */
  readonly #kept: Set<string>;
  readonly #prefix: string;
  constructor(readonly decision: ScopeDecision) {
    this.#kept = new Set(decision.keptInTarget);
    this.#prefix = `${decision.scope}:`;
  }

  kept(key: string): boolean {
    return this.#kept.has(key);
  }

  /** The keys of the scope to write with an import of `session` (read from the source just now). */
  toWrite(session: Session): Record<string, unknown> {
    const { seen, write, scope } = this.decision;
    if (!seen) return {};
    const now = scopeState(session.state, scope);
    const result: Record<string, unknown> = {};
    for (const key of new Set([...Object.keys(write), ...Object.keys(now)])) {
      if (this.#kept.has(key)) continue;
      const value = Object.hasOwn(now, key) ? now[key] : write[key];
      let carry: boolean;
      if (this.#carried.has(key)) carry = !same(this.#carried.get(key), value);
      else if (Object.hasOwn(write, key)) carry = true;
      else if (Object.hasOwn(seen.target, key)) {
        // Equal on both sides when decided (else the decision named it), and written in the source since.
        carry =
          Object.hasOwn(seen.source, key) && same(seen.source[key], seen.target[key]) && !same(value, seen.target[key]);
      } else carry = true;
      if (carry) result[key] = value;
    }
    return result;
  }

  /**
   * `shared` (what an import is about to carry, of every scope) without this
   * scope's keys whose target value is no longer the one this run last knew
   * (read when the scope was decided, or written by the run since): the app,
   * writing to the target, wrote them during the run. They are left to the
   * target as conflicts (a later run decides them anew). Read just before the
   * import, which narrows the window to the moment between the two.
   */
  async withoutTargetWrites(
    target: ImportingService,
    shared: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    const { seen } = this.decision;
    const mine = Object.keys(shared).filter((key) => key.startsWith(this.#prefix));
    if (mine.length === 0 || !seen) return shared;
    const now = await targetScope(target, this.decision);
    const result = { ...shared };
    for (const key of mine) {
      const knew = this.#carried.has(key) || Object.hasOwn(seen.target, key);
      const known = this.#carried.has(key) ? this.#carried.get(key) : seen.target[key];
      if (Object.hasOwn(now, key) === knew && (!knew || same(now[key], known))) continue;
      delete result[key];
      this.#kept.add(key);
    }
    return result;
  }

  /** Records what an import carried (of every scope: the keys of others are passed over). */
  carried(shared: Record<string, unknown>): void {
    for (const [key, value] of Object.entries(shared)) if (key.startsWith(this.#prefix)) this.#carried.set(key, value);
  }

  /** Keys decided to write that no import carried yet. */
  unwritten(): string[] {
    return Object.keys(this.decision.write).filter((key) => !this.#carried.has(key) && !this.#kept.has(key));
  }

  /** Adds what became of the scope to `report` (nothing when no key was written, to write or left alone); once. */
  #reported = false;
  report(report: MigrateReport): void {
    if (this.#reported) return;
    this.#reported = true;
    const written = [...this.#carried.keys()];
    const unwritten = this.unwritten();
    const keptInTarget = [...this.#kept];
    const { appName, label: scope } = this.decision;
    if (written.length === 0 && unwritten.length === 0 && keptInTarget.length === 0) return;
    report.scopes.push({ appName, scope, written, keptInTarget, unwritten });
  }
}

interface ScopeContext {
  source: BaseSessionService;
  target: ImportingService;
  policy: ConflictPolicy;
  onlyUser: string | undefined;
  load: (item: Item) => Promise<boolean>;
  fail: (session: Session, error: unknown) => void;
}

/**
 * Decides one scope (the app's, or one user's): compares the source's keys
 * (as the first loaded session of `items` shows them) with the target's, and
 * for keys both hold with other values asks which side wrote the scope last,
 * which loads every session of the scope on both sides: only when values differ.
 */
async function scopeDecision(
  appName: string,
  scope: 'user' | 'app',
  items: Item[],
  owner: string | undefined,
  context: ScopeContext,
): Promise<ScopeDecision> {
  const { target, policy, load, fail } = context;
  let first: Item | undefined;
  for (const item of items) {
    if (await load(item)) {
      first = item;
      break;
    }
  }
  const label = scope === 'app' ? 'app' : `user:${owner}`;
  const userId = scope === 'app' ? undefined : owner;
  const nothing: ScopeDecision = { appName, scope, userId, label, write: {}, keptInTarget: [] };
  if (!first?.full) return nothing;
  const sourceKeys = scopeState(first.full.state, scope);
  let targetKeys: Record<string, unknown>;
  try {
    targetKeys = await targetScope(target, nothing);
  } catch (error) {
    fail(first.head, new Error(`reading the target's ${label} state: ${describe(error)}`, { cause: error }));
    return nothing;
  }
  const write: Record<string, unknown> = {};
  const conflicting: string[] = [];
  for (const [key, value] of Object.entries(sourceKeys)) {
    if (!(key in targetKeys)) write[key] = value;
    else if (!same(value, targetKeys[key])) conflicting.push(key);
  }
  const keptInTarget: string[] = [];
  if (conflicting.length > 0) {
    let wins = (_key: string) => policy === 'source';
    if (policy === 'newer') {
      let sourceClock = new ScopeClock(scope);
      if (scope === 'app' && context.onlyUser !== undefined) {
        // The run's sessions are one user's: the app's clock is every user's, as on the target.
        try {
          sourceClock = await scopeClockOf(context.source, appName, undefined, scope);
        } catch (error) {
          fail(
            first.head,
            new Error(`reading the source's sessions of ${label}: ${describe(error)}`, { cause: error }),
          );
          return nothing;
        }
      } else {
        for (const item of items) {
          if (!(await load(item))) continue;
          sourceClock.add(item.full as Session);
          // Read again when its turn comes: the sessions of a scope are not all kept at once.
          if (item !== first) release(item);
        }
      }
      try {
        const targetClock = await scopeClockOf(target, appName, userId, scope);
        // Each key to the side that wrote it last: a later write of another key of the scope does
        // not carry an older value of this one.
        wins = (key) => sourceWins(policy, sourceClock.lastWrite(key), targetClock.lastWrite(key));
      } catch (error) {
        fail(first.head, new Error(`reading the target's sessions of ${label}: ${describe(error)}`, { cause: error }));
        wins = () => false;
      }
    }
    for (const key of conflicting) {
      if (wins(key)) write[key] = sourceKeys[key];
      else keptInTarget.push(key);
    }
  }
  return { ...nothing, write, keptInTarget, seen: { source: sourceKeys, target: targetKeys } };
}

/** The target's keys of a scope, with their prefix, as stored JSON. */
async function targetScope(
  target: ImportingService,
  { appName, scope, userId }: Pick<ScopeDecision, 'appName' | 'scope' | 'userId'>,
): Promise<Record<string, unknown>> {
  const bucket =
    scope === 'app'
      ? await target.getAppState({ appName })
      : await target.getUserState({ appName, userId: userId as string });
  const keys: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(bucket)) keys[`${scope}:${key}`] = value;
  return JSON.parse(JSON.stringify(keys)) as Record<string, unknown>;
}

/** The {@link ScopeClock} of an app's sessions (or one user's) in a store, read one session at a time. */
async function scopeClockOf(
  service: BaseSessionService,
  appName: string,
  userId: string | undefined,
  scope: 'user' | 'app',
): Promise<ScopeClock> {
  const clock = new ScopeClock(scope);
  const { sessions } = await service.listSessions({ appName, ...(userId === undefined ? {} : { userId }) });
  for (const head of sessions) {
    const full = await service.getSession({ appName, userId: head.userId, sessionId: head.id });
    if (full) clock.add(full);
  }
  return clock;
}

/** Lets go of what was read for `item` (read again if it is needed again): a run holds only the sessions it is at. */
function release(item: Item): void {
  delete item.full;
  delete item.existing;
}

/** Whether nothing failed, `verify` found nothing and the run was not stopped. */
export function migrationSucceeded(report: MigrateReport): boolean {
  return report.failed.length === 0 && report.differences.length === 0 && report.stopped === undefined;
}

/** Writes the run made (or would make): sessions copied or replaced, and scope keys written. */
export function changesOf(report: MigrateReport): number {
  return (
    report.decisions.copy +
    report.decisions.update +
    report.scopes.reduce((sum, scope) => sum + scope.written.length, 0)
  );
}

/** `user:`/`app:` keys the run was to write and did not (see {@link ScopeOutcome.unwritten}). */
export function keysUnwritten(report: MigrateReport): number {
  return report.scopes.reduce((sum, scope) => sum + scope.unwritten.length, 0);
}

/** Conflicts the run left alone: sessions and scope keys. */
export function conflictsLeft(report: MigrateReport): number {
  return report.conflicts.length + report.scopes.reduce((sum, scope) => sum + scope.keptInTarget.length, 0);
}
