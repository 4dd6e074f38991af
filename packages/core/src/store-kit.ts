/**
 * `@adk-state/core/store`: the kit for writing a store. The contract's types
 * and the helpers every store shares (ordering, event selection, bucket
 * merges, option checks). Applications need only the package root.
 *
 * @packageDocumentation
 */

export { isUnreadableData, UnreadableDataError } from './errors.js';
export { type EventFilter, encodeEvent, type StoredEvent, selectEvents } from './events.js';
export { compareSessionKeys, compareSessions, type ListQuery, utf16OrderKey } from './listing.js';
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
export { type Bucket, mergeInto, type ScopedWrites, scopeOf, splitState, withoutTemp } from './scopes.js';
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
  StoredSessionKey,
} from './store.js';
export { CONSISTENT_READ_ATTEMPTS, ConsistentReadContention, callAbandoned } from './store.js';
export type { StoreUsage } from './telemetry.js';
export { ToldOnce } from './told.js';
export { unreadableText } from './values.js';
export { settledWithin } from './waits.js';
