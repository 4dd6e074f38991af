/**
 * @adk-state/core: `StateSessionService`, the `@google/adk` session service
 * on any store, with its options, its typed errors and the JSON types. The
 * kit for writing a store (the `SessionStore` contract and its helpers) is
 * `@adk-state/core/store`.
 *
 * @packageDocumentation
 */
export {
  ADK_STATE_ERROR_CODES,
  AdkStateError,
  type AdkStateErrorCode,
  AlreadyExistsError,
  BackendError,
  type BackendErrorOptions,
  type BackendFailureKind,
  InvalidArgumentError,
  isAdkStateError,
  SessionNotFoundError,
  StaleSessionError,
  StateValueError,
} from './errors.js';
export {
  DEFAULT_LOG_CACHE_BYTES,
  DEFAULT_MAX_RELOADS,
  DEFAULT_TIMEOUT_MS,
  MAX_TIMEOUT_MS,
  StateSessionService,
  type StateSessionServiceOptions,
} from './service.js';
export type { StoredSessionKey } from './store.js';
export { type TelemetryOptions, TRACER_NAME } from './telemetry.js';
export { type JsonObject, type JsonValue, MAX_VALUE_DEPTH } from './values.js';
