/**
 * The typed errors of adk-state. Every error carries a stable `code` so that
 * callers can branch on it even when two copies of this package are loaded.
 * Messages begin with `@google/adk`'s own wording where it has one.
 */

/** Stable codes of the errors thrown by adk-state services and stores. */
export const ADK_STATE_ERROR_CODES = [
  'ALREADY_EXISTS',
  'SESSION_NOT_FOUND',
  'STALE_SESSION',
  'INVALID_STATE_VALUE',
  'INVALID_ARGUMENT',
  'BACKEND_ERROR',
] as const;

/** Stable codes of the errors thrown by adk-state services and stores. */
export type AdkStateErrorCode = (typeof ADK_STATE_ERROR_CODES)[number];

/** Base class of every error that adk-state throws on purpose. */
export class AdkStateError extends Error {
  readonly code: AdkStateErrorCode;

  constructor(code: AdkStateErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A session with the same `(appName, userId, sessionId)` already exists. */
export class AlreadyExistsError extends AdkStateError {
  readonly sessionId: string;

  constructor(sessionId: string) {
    super(
      'ALREADY_EXISTS',
      `Session with id ${sessionId} already exists. Pick another sessionId, omit it to have one generated, or load the existing session with getSession().`,
    );
    this.sessionId = sessionId;
  }
}

/** The session that an event was appended to is not (or no longer) stored. */
export class SessionNotFoundError extends AdkStateError {
  readonly sessionId: string;

  constructor(sessionId: string) {
    super(
      'SESSION_NOT_FOUND',
      `Session ${sessionId} not found. It was never created or has been deleted (or has expired); create it with createSession() before appending events.`,
    );
    this.sessionId = sessionId;
  }
}

/**
 * The stored session changed after the caller's session object was loaded:
 * appending would build on a view of the state that is no longer true.
 */
export class StaleSessionError extends AdkStateError {
  readonly sessionId: string;

  /** True when `onStale: 'reload'` gave up after `maxReloads` reloads under constant contention. */
  readonly contention: boolean;

  constructor(sessionId: string, detail: string, options: { contention?: boolean } = {}) {
    const contention = options.contention ?? false;
    const advice = contention
      ? 'Contention exceeded the limit: other writers kept changing the session. Retry the event later, or raise maxReloads.'
      : "Reload it with getSession() and apply the event again, or create the service with { onStale: 'reload' }.";
    super('STALE_SESSION', `Session ${sessionId} is stale: ${detail}. ${advice}`);
    this.sessionId = sessionId;
    this.contention = contention;
  }
}

/** A state value is not a JSON value. Names the state key and the path inside the value. */
export class StateValueError extends AdkStateError {
  readonly key: string;
  readonly path: string;

  constructor(key: string, path: string, problem: string) {
    super(
      'INVALID_STATE_VALUE',
      `State value for key ${JSON.stringify(key)} at ${path} ${problem}. State values must be JSON values: null, booleans, finite numbers, strings, arrays and plain objects of those. Nothing was written.`,
    );
    this.key = key;
    this.path = path;
  }
}

/** A request argument is missing or malformed. */
export class InvalidArgumentError extends AdkStateError {
  readonly argument: string;

  constructor(argument: string, problem: string) {
    super('INVALID_ARGUMENT', `Invalid argument ${argument}: ${problem}.`);
    this.argument = argument;
  }
}

/** What a {@link BackendError} knows of the write it interrupted. */
export interface BackendErrorOptions {
  /**
   * False only where the store knows that nothing was written (the request
   * never left, or the backend refused it before applying anything). Default
   * `true`: a write whose outcome is unknown may have been applied.
   */
  mayHaveApplied?: boolean;
  /** The call ran out of time (the service's `timeoutMs`) rather than failing. */
  timedOut?: boolean;
  /**
   * What kind of failure it is. Default `'outage'`. `'authentication'` and
   * `'unknown-database'` are refusals of the store's configuration, not of
   * one request: nothing was written, and a retry fails the same way.
   * `'unreadable-data'`: what the backend holds is not what adk-state
   * writes; `mayHaveApplied` defaults to false for it.
   */
  kind?: BackendFailureKind;
}

/**
 * The kinds of {@link BackendError}: `'outage'` (the backend failed or did not
 * answer: retrying later may succeed), `'authentication'` (the backend refused
 * the credentials or their rights), `'unknown-database'` (the database the
 * store names does not exist on the server), `'unreadable-data'` (a stored
 * record could not be decoded, such as an event's or a state value's text
 * that is not JSON: changed or damaged outside adk-state, so a retry fails
 * the same way until the record is repaired or removed).
 */
export type BackendFailureKind = 'outage' | 'authentication' | 'unknown-database' | 'unreadable-data';

/**
 * The backend failed (connection lost, refused command) or did not answer in
 * time. The cause is attached. `mayHaveApplied` says honestly whether the
 * write may have taken effect: `false` for every read, and for a write only
 * where the store knows it was not applied; `true` means reload the session
 * to see before retrying.
 */
export class BackendError extends AdkStateError {
  /** The service method or store step that failed, e.g. `appendEvent`. */
  readonly operation: string;
  /** Whether the write may have been applied (always `false` for a read). */
  readonly mayHaveApplied: boolean;
  /** True when the call was abandoned because its deadline passed. */
  readonly timedOut: boolean;

  /** `'outage'` unless the backend refused the store's configuration (see {@link BackendFailureKind}). */
  readonly kind: BackendFailureKind;

  constructor(operation: string, cause: unknown, options: BackendErrorOptions = {}) {
    const kind = options.kind ?? 'outage';
    const mayHaveApplied =
      kind === 'outage'
        ? (options.mayHaveApplied ?? true)
        : kind === 'unreadable-data'
          ? (options.mayHaveApplied ?? false)
          : false;
    // One sentence: the cause's own full stop is not doubled by the one after it.
    const reason = (cause instanceof Error ? cause.message : String(cause)).replace(/\.+$/, '');
    let message: string;
    if (kind === 'authentication') {
      message = `The storage backend refused the credentials, or none were found, during ${operation}: ${reason}. Nothing was written; check the credentials the store connects with (a user and password, a key, the environment's default credentials; a retry fails the same way).`;
    } else if (kind === 'unknown-database') {
      message = `The storage backend has no such database (during ${operation}): ${reason}. Nothing was written; name a database the server has.`;
    } else if (kind === 'unreadable-data') {
      const outcome = mayHaveApplied ? 'The write was made before the read that failed.' : 'Nothing was written.';
      message = `Stored data could not be read during ${operation}: ${reason}. ${outcome} The record is not what adk-state writes (changed or damaged outside it); a retry fails the same way until it is repaired or removed.`;
    } else {
      const outcome = mayHaveApplied
        ? 'The write may have been applied: reload the session (getSession) to see before retrying.'
        : 'Nothing was written; retry when the backend is reachable.';
      message = `The storage backend failed during ${operation}: ${reason}. ${outcome}`;
    }
    super('BACKEND_ERROR', message, { cause });
    this.operation = operation;
    this.mayHaveApplied = mayHaveApplied;
    this.timedOut = options.timedOut ?? false;
    this.kind = kind;
  }
}

/**
 * Thrown by a decode of stored data that is not what adk-state writes (an
 * event's or a state value's text that is not JSON, a malformed record). The
 * service turns it into a {@link BackendError} of kind `'unreadable-data'`;
 * a store that decodes records of its own may throw it too.
 */
export class UnreadableDataError extends Error {
  constructor(what: string, options?: { cause?: unknown }) {
    super(what, options);
    this.name = 'UnreadableDataError';
    (this as unknown as Record<symbol, boolean>)[UNREADABLE] = true;
  }
}

/** Marks an {@link UnreadableDataError} from any copy of this package (each built entry has its own class). */
const UNREADABLE = Symbol.for('@adk-state/core.UnreadableDataError');

/** True when `error` is an {@link UnreadableDataError}, from this copy of the package or another. */
export function isUnreadableData(error: unknown): error is UnreadableDataError {
  return error instanceof Error && (error as unknown as Record<symbol, unknown>)[UNREADABLE] === true;
}

/** True when `error` is an adk-state error with the given code (works across package copies). */
export function isAdkStateError(error: unknown, code?: AdkStateErrorCode): error is AdkStateError {
  if (typeof error !== 'object' || error === null) return false;
  const candidate = error as { code?: unknown };
  if (error instanceof AdkStateError) return code === undefined || candidate.code === code;
  return (
    typeof candidate.code === 'string' &&
    (code === undefined ? isKnownCode(candidate.code) : candidate.code === code) &&
    error instanceof Error
  );
}

function isKnownCode(code: string): boolean {
  return (ADK_STATE_ERROR_CODES as readonly string[]).includes(code);
}
