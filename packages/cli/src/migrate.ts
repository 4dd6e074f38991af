/**
 * `adk-state migrate`: copies an app's sessions from one store to another,
 * faithfully (state as stored, events as stored, lastUpdateTime), safe to
 * re-run and to interrupt, with a field-by-field check on request.
 */
import { scopeOf } from '@adk-state/core/store';
import type { BaseSessionService, Event, Session } from '@google/adk';
import { redactUri, sessionServiceFromUri, type UriSessionService } from './uri.js';

/** What to copy, and how. */
export interface MigrateOptions {
  /** The source: any URI `sessionServiceFromUri` takes, `@google/adk`'s own `sqlite://`, `postgresql://`, … included. */
  from: string;
  /** The target: an adk-state store. */
  to: string;
  appName: string;
  /** Only this user's sessions. */
  userId?: string;
  /** Decide and report, write nothing. */
  dryRun?: boolean;
  /** After copying, compare every session of the run field by field. */
  verify?: boolean;
  /** Replace target sessions that are newer than, or differ from, the source. */
  overwrite?: boolean;
  /** Called after each session. */
  onProgress?: (progress: MigrateProgress) => void;
}

/** Where a run is. */
export interface MigrateProgress {
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
  /** In the target with a prefix of the source's events and no later update (an earlier or interrupted run): replaced. */
  | 'update'
  /** In the target, newer or different: left alone without `overwrite`. */
  | 'conflict';

/** One difference `verify` found. */
export interface Difference {
  session: string;
  field: string;
  source: unknown;
  target: unknown;
}

/** The outcome of a run. */
export interface MigrateReport {
  /** Sessions the source holds for the query. */
  sessions: number;
  /** Events copied (or that would be, in a dry run). */
  events: number;
  decisions: Record<SessionDecision, number>;
  /** `user/session` of every conflict left alone. */
  conflicts: string[];
  /** `user/session` and the error of every session that could not be copied. */
  failed: { session: string; error: string }[];
  /** With `verify`: every difference between source and target (none means a faithful copy). */
  differences: Difference[];
  /** True when `verify` ran (not in a dry run). */
  verified: boolean;
  dryRun: boolean;
}

interface ImportingService extends BaseSessionService {
  importSession(session: Session, options?: { replace?: boolean }): Promise<'imported' | 'exists'>;
  getUserState(request: { appName: string; userId: string }): Promise<Record<string, unknown>>;
  getAppState(request: { appName: string }): Promise<Record<string, unknown>>;
}

function canImport(service: BaseSessionService): service is ImportingService {
  return typeof (service as Partial<ImportingService>).importSession === 'function';
}

/** Events as stored data: what must be identical on both sides. */
function eventData(events: readonly Event[]): unknown[] {
  return JSON.parse(JSON.stringify(events)) as unknown[];
}

/** The stored state: everything but `temp:` keys (never stored, so never compared). */
function storedState(state: Record<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(state)) if (scopeOf(key) !== 'temp') result[key] = value;
  return JSON.parse(JSON.stringify(result)) as Record<string, unknown>;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** What to do with a source session given what the target holds. */
export function decide(source: Session, target: Session | undefined): SessionDecision {
  if (!target) return 'copy';
  const sourceEvents = eventData(source.events);
  const targetEvents = eventData(target.events);
  if (
    target.lastUpdateTime === source.lastUpdateTime &&
    same(sourceEvents, targetEvents) &&
    same(storedState(source.state), storedState(target.state))
  ) {
    return 'unchanged';
  }
  const prefix =
    targetEvents.length <= sourceEvents.length && targetEvents.every((event, n) => same(event, sourceEvents[n]));
  return prefix && target.lastUpdateTime <= source.lastUpdateTime ? 'update' : 'conflict';
}

/** Field-by-field differences between a source session and its copy. */
export function compareCopies(source: Session, target: Session | undefined): Difference[] {
  const session = `${source.userId}/${source.id}`;
  if (!target) return [{ session, field: 'session', source: 'present', target: 'missing' }];
  const differences: Difference[] = [];
  const note = (field: string, a: unknown, b: unknown) => {
    if (!same(a, b)) differences.push({ session, field, source: a, target: b });
  };
  note('lastUpdateTime', source.lastUpdateTime, target.lastUpdateTime);
  const a = storedState(source.state);
  const b = storedState(target.state);
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) note(`state.${key}`, a[key], b[key]);
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

/** Runs a migration. Opens both stores from their URIs and closes them at the end. */
export async function migrate(options: MigrateOptions): Promise<MigrateReport> {
  const source = await sessionServiceFromUri(options.from);
  let target: UriSessionService | undefined;
  try {
    target = await sessionServiceFromUri(options.to);
    if (!canImport(target)) {
      throw new Error(`the target ${redactUri(options.to)} is not an adk-state store (it cannot import)`);
    }
    return await copyAll(source, target, options);
  } finally {
    await Promise.allSettled([source.close?.(), target?.close?.()]);
  }
}

/** Copies between two open services (see {@link migrate}). */
export async function copyAll(
  source: BaseSessionService,
  target: ImportingService,
  options: Omit<MigrateOptions, 'from' | 'to'>,
): Promise<MigrateReport> {
  const { appName, userId } = options;
  const listed = await source.listSessions({ appName, ...(userId === undefined ? {} : { userId }) });
  const heads = [...listed.sessions].sort((a, b) =>
    a.userId === b.userId ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : a.userId < b.userId ? -1 : 1,
  );
  const report: MigrateReport = {
    sessions: heads.length,
    events: 0,
    decisions: { copy: 0, unchanged: 0, update: 0, conflict: 0 },
    conflicts: [],
    failed: [],
    differences: [],
    verified: options.verify === true && options.dryRun !== true,
    dryRun: options.dryRun === true,
  };
  const progress: MigrateProgress = { done: 0, total: heads.length, events: 0, startedAt: Date.now() };
  const copied: Session[] = [];
  for (const head of heads) {
    const name = `${head.userId}/${head.id}`;
    try {
      const key = { appName, userId: head.userId, sessionId: head.id };
      const full = await source.getSession(key);
      if (!full) throw new Error('deleted from the source during the run');
      const existing = await target.getSession(key);
      let decision = decide(full, existing);
      if (decision === 'conflict' && options.overwrite) decision = 'update';
      report.decisions[decision]++;
      if (decision === 'conflict') report.conflicts.push(name);
      if (decision === 'copy' || decision === 'update') {
        report.events += full.events.length;
        progress.events += full.events.length;
        if (!options.dryRun) {
          const outcome = await target.importSession(full, { replace: decision === 'update' });
          if (outcome === 'exists') throw new Error('another writer created it in the target during the run');
        }
      }
      if (decision !== 'conflict') copied.push(full);
    } catch (error) {
      report.failed.push({ session: name, error: describe(error) });
    }
    progress.done++;
    options.onProgress?.(progress);
  }
  if (report.verified) {
    for (const original of copied) {
      const key = { appName, userId: original.userId, sessionId: original.id };
      const copy = await target.getSession(key);
      report.differences.push(...compareCopies(original, copy));
    }
  }
  return report;
}

/** Whether the run succeeded: nothing failed and `verify` found nothing. */
export function migrationSucceeded(report: MigrateReport): boolean {
  return report.failed.length === 0 && report.differences.length === 0;
}
