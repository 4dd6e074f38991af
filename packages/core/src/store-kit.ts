/**
 * `@adk-state/core/store`: the kit for writing a store. The contract's types
 * and the helpers every store shares (ordering, event selection, bucket
 * merges, option checks). Applications need only the package root.
 *
 * @packageDocumentation
 */

export { decodeEvent, type EventFilter, encodeEvent, type StoredEvent, selectEvents } from './events.js';
export { compareSessions, type ListQuery, utf16OrderKey } from './listing.js';
export {
  assertPositiveNumber,
  type Expiry,
  type ExpiryClock,
  type ExpiryLimits,
  type ExpiryOptions,
  expiryOf,
  type NumberLimits,
} from './options.js';
export type { SessionKey } from './requests.js';
export {
  APP_PREFIX,
  type Bucket,
  mergeInto,
  type ScopedWrites,
  scopeOf,
  splitState,
  TEMP_PREFIX,
  USER_PREFIX,
} from './scopes.js';
export type {
  AppendInput,
  AppendResult,
  CreateInput,
  CreateResult,
  HeldSession,
  ImportInput,
  ImportResult,
  ListResult,
  LoadResult,
  SessionHead,
  SessionRecord,
  SessionStore,
  SinceResult,
  StoreCall,
} from './store.js';
export { CONSISTENT_READ_ATTEMPTS, ConsistentReadContention } from './store.js';
export type { StoreUsage } from './telemetry.js';
export { assertJsonValue, decodeValue, encodeValue, findNonJson, type JsonProblem, type JsonRules } from './values.js';
