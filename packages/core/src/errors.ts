/**
 * The typed errors of adk-state. Every error carries a stable `code` so that
 * callers can branch on it even when two copies of this package are loaded.
 * Messages begin with `@google/adk`'s own wording where it has one.
 */

/** Stable codes of the errors thrown by adk-state services and stores. */
export type AdkStateErrorCode =
  | 'ALREADY_EXISTS'
  | 'SESSION_NOT_FOUND'
  | 'STALE_SESSION'
  | 'INVALID_STATE_VALUE'
  | 'INVALID_ARGUMENT'
  | 'BACKEND_ERROR';

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

  constructor(sessionId: string, detail: string) {
    super(
      'STALE_SESSION',
      `Session ${sessionId} is stale: ${detail}. Reload it with getSession() and apply the event again, or create the service with { onStale: 'reload' }.`,
    );
    this.sessionId = sessionId;
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

/** The backend failed (connection lost, timeout, refused command). The cause is attached. */
export class BackendError extends AdkStateError {
  constructor(operation: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(
      'BACKEND_ERROR',
      `The storage backend failed during ${operation}: ${reason}. Nothing was half-applied; retry when the backend is reachable.`,
      { cause },
    );
  }
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
  return [
    'ALREADY_EXISTS',
    'SESSION_NOT_FOUND',
    'STALE_SESSION',
    'INVALID_STATE_VALUE',
    'INVALID_ARGUMENT',
    'BACKEND_ERROR',
  ].includes(code);
}
