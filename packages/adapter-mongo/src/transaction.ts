/**
 * Transactions under a call's deadline, and honest outcomes. Every store
 * operation runs as one multi-document transaction in {@link runTransaction},
 * retried as the driver's `withTransaction` retries it (the whole
 * transaction on a `TransientTransactionError`, the commit on an
 * `UnknownTransactionCommitResult`) while the call has time left. MongoDB
 * discards a transaction that was never committed, so a write that failed
 * before its commit was sent throws a {@link BackendError} that says it was
 * not applied ({@link notApplied}); a failed or unanswered commit is thrown as
 * it is, and the service reports that the write may have been applied.
 *
 * Every command carries the time left before the call's deadline as
 * `maxTimeMS` (and the call's abort signal, which driver 7 honours; see
 * {@link callOptions}); a call the service has given up on sends no further
 * command and never commits. The driver's errors are read here as well: their
 * labels (by duck typing, for both driver majors) and what a failed
 * `bulkWrite` stands for ({@link bulkWriteError}).
 */

import { AdkStateError, BackendError } from '@adk-state/core';
import { isUnreadableData, type StoreCall } from '@adk-state/core/store';
import type { ClientSession, MongoClient } from 'mongodb';

const MAX_TIME_MS_EXPIRED = 50;
const WRITE_CONFLICT = 112;
/**
 * How a server refuses a command it does not have (CommandNotFound,
 * CommandNotSupported) or does not run in a transaction
 * (OperationNotSupportedInTransaction): the store then stops using `bulkWrite`.
 */
const UNSUPPORTED_COMMAND = new Set([59, 115, 263]);
const TRANSIENT = 'TransientTransactionError';
const UNKNOWN_COMMIT_RESULT = 'UnknownTransactionCommitResult';
/** How long a transaction is retried when its call has no deadline (as the driver's `withTransaction`). */
const RETRY_WINDOW_MS = 120_000;
/** The store methods that write; their failures say whether they were applied. */
const WRITES = new Set(['createSession', 'appendEvent', 'deleteSession', 'importSession']);

/** What a command carries of its call: the time left (`maxTimeMS`) and the abort signal. */
interface CallOptions {
  maxTimeMS?: number;
  signal?: AbortSignal;
}

/** The options of a transaction's next command. */
interface StatementOptions extends CallOptions {
  session: ClientSession;
}

/** What the work of one transaction gets. */
export interface TransactionScope {
  session: ClientSession;
  /** Options for the next command; throws once the call is abandoned, so no further command is sent. */
  next(): StatementOptions;
}

/** What runs transactions: the client, and what has to be ready before the first command. */
export interface TransactionHost {
  readonly client: MongoClient;
  ready(): Promise<void>;
}

/** The service gave up on the call at its deadline; the store sends nothing more for it. */
class CallAbandoned extends Error {
  constructor() {
    super('the call passed its deadline (timeoutMs) before this step');
    this.name = 'CallAbandoned';
  }
}

/** The server refused `bulkWrite`: the transaction runs again with a command per collection. */
export class BulkWriteUnavailable extends Error {
  constructor() {
    super('the server has no multi-collection bulkWrite command');
    this.name = 'BulkWriteUnavailable';
  }
}

/**
 * The options that pass a call's deadline on to the driver: `maxTimeMS`, the
 * time left, which the server enforces (both driver majors), and the abort
 * signal, which driver 7 uses to stop waiting for a server or a reply.
 */
export function callOptions(call: StoreCall | undefined): CallOptions {
  if (!call) return {};
  if (call.signal.aborted) throw new CallAbandoned();
  // Made for one command each: the command the options go with is one request to the server.
  if (call.usage) call.usage.roundTrips++;
  const left = call.deadline - Date.now();
  if (!Number.isFinite(left)) return { signal: call.signal };
  if (left <= 0) throw new CallAbandoned();
  return { maxTimeMS: Math.ceil(left), signal: call.signal };
}

/**
 * What a failure of `operation` that certainly left nothing applied is
 * thrown as: for a write, a {@link BackendError} that says so (and whether
 * the call had passed its deadline); a read's failure, an error of this
 * package, or stored data that cannot be read (the service says so), as it is.
 */
export function notApplied(operation: string, error: unknown): unknown {
  if (!WRITES.has(operation) || error instanceof AdkStateError || isUnreadableData(error)) return error;
  return new BackendError(operation, error, { mayHaveApplied: false, timedOut: error instanceof CallAbandoned });
}

/**
 * Runs `work` in one transaction of `host.client` once the host is ready,
 * retried while the call has time left (see the module comment). A failure
 * before the commit was sent is thrown through {@link notApplied}; a failed
 * or unanswered commit as it is.
 */
export async function runTransaction<T>(
  host: TransactionHost,
  operation: string,
  call: StoreCall | undefined,
  work: (scope: TransactionScope) => Promise<T>,
): Promise<T> {
  try {
    await host.ready();
    if (call && (call.signal.aborted || Date.now() >= call.deadline)) throw new CallAbandoned();
  } catch (error) {
    throw notApplied(operation, error);
  }
  const until = Math.min(call?.deadline ?? Number.POSITIVE_INFINITY, Date.now() + RETRY_WINDOW_MS);
  const timeLeft = () => Date.now() < until && !call?.signal.aborted;
  let session = host.client.startSession();
  const scope: TransactionScope = { session, next: () => ({ session: scope.session, ...callOptions(call) }) };
  /** The next attempt runs on a fresh session, so that it never waits for the abort of the last one. */
  const renew = () => {
    void endSession(session);
    session = host.client.startSession();
    scope.session = session;
  };
  try {
    attempt: for (;;) {
      let result: T;
      try {
        // The options of the commit, the attempt's last command.
        const { maxTimeMS } = callOptions(call);
        session.startTransaction({
          readPreference: 'primary',
          ...(maxTimeMS !== undefined ? { maxCommitTimeMS: maxTimeMS } : {}),
        });
        result = await work(scope);
      } catch (error) {
        // Nothing of a refused bulkWrite was applied: the same work again, a command per collection.
        if (error instanceof BulkWriteUnavailable || (hasLabel(error, TRANSIENT) && timeLeft())) {
          renew();
          continue;
        }
        throw notApplied(operation, error);
      }
      if (!session.inTransaction()) return result; // the work aborted it: nothing to commit
      if (call?.signal.aborted) throw notApplied(operation, new CallAbandoned());
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
            if (!timeLeft()) throw notApplied(operation, error);
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

/**
 * What a failed `bulkWrite` is thrown as: {@link BulkWriteUnavailable} when
 * the server turns out not to have the command (a deployment still at
 * feature compatibility 7.0), otherwise the error it stands for.
 */
export function bulkWriteError(failure: unknown): unknown {
  const error = bulkWriteCause(failure);
  if (UNSUPPORTED_COMMAND.has((error as { code?: unknown } | null)?.code as number)) return new BulkWriteUnavailable();
  return error;
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

/**
 * The error a failed `bulkWrite` stands for. The driver wraps the server's
 * error (with its code and labels, such as `TransientTransactionError` on a
 * write conflict) in a `MongoClientBulkWriteError` as its `cause`; a failed
 * operation reported in the command's results comes as the first of its
 * `writeErrors`, whose write conflict is as transient as any other.
 */
function bulkWriteCause(error: unknown): unknown {
  if (!(error instanceof Error) || error.name !== 'MongoClientBulkWriteError') return error;
  if (error.cause !== undefined) return error.cause;
  const writeErrors = (error as { writeErrors?: Map<number, { code: number; message: string }> }).writeErrors;
  const first = writeErrors?.values().next().value;
  return first ? new BulkWriteFailure(first.code, first.message, error) : error;
}

/** An operation of a `bulkWrite` failed: its code, and the driver's error as the cause. */
class BulkWriteFailure extends Error {
  readonly code: number;

  constructor(code: number, message: string, cause: Error) {
    super(message, { cause });
    this.name = 'BulkWriteFailure';
    this.code = code;
  }

  /** As MongoDB labels a write conflict inside a transaction. */
  hasErrorLabel(label: string): boolean {
    return label === TRANSIENT && this.code === WRITE_CONFLICT;
  }
}
