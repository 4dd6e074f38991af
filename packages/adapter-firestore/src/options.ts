/**
 * The options of the Firestore store and service, their defaults and bounds,
 * and the checks that turn them into the settings the store runs with.
 */
import { InvalidArgumentError, type StateSessionServiceOptions } from '@adk-state/core';
import { assertPositiveNumber, type Expiry, expiryOf } from '@adk-state/core/store';
import type { Firestore } from '@google-cloud/firestore';
import { EVENTS, SESSION_DOCUMENT_FIELDS, SESSIONS, USERS } from './layout.js';

/** Options of {@link FirestoreStore}. */
export interface FirestoreStoreOptions {
  /** A `Firestore` instance from `@google-cloud/firestore` (or `firebase-admin/firestore`). Never closed by the store. */
  firestore: Firestore;
  /**
   * The collection that holds one document per app. Any collection path
   * (`adk_state`, `tenants/t1/adk_state`) that does not run through this
   * store's own subcollections (`adk_users`, `adk_sessions`, `adk_events`).
   * Default `adk_state`.
   */
  rootCollection?: string;
  /**
   * Idle time to live, in seconds: every create and append stamps the session
   * document with `now + expireAfterIdleSeconds` in {@link ttlField}, for a
   * Firestore TTL policy, so a session expires once it has not been written
   * for this long. Give at most one of this and `expireAfterCreateSeconds`.
   */
  expireAfterIdleSeconds?: number;
  /**
   * Time to live counted from creation, in seconds: `createSession` stamps the
   * session document with `now + expireAfterCreateSeconds` in {@link ttlField}
   * and appends leave it, so a session expires this long after it was
   * created, however active. Give at most one of this and `expireAfterIdleSeconds`.
   */
  expireAfterCreateSeconds?: number;
  /** The field that carries the expiry time. Default `expireAt`. */
  ttlField?: string;
  /** Attempts of a read-write transaction under contention. Default 10, at most 100. */
  maxTransactionAttempts?: number;
  /** The clock for expiry times. Default `Date.now`. */
  now?: () => number;
  /**
   * How long `close()` waits, in milliseconds, for the store's calls that are
   * still running in the client: after a call's deadline has passed,
   * `@google-cloud/firestore` may still retry its reads for several seconds.
   * Default 30,000; 0 to not wait.
   */
  closeWaitMs?: number;
}

/** Options of {@link FirestoreSessionService}: the store's and the service's. */
export interface FirestoreSessionServiceOptions extends FirestoreStoreOptions, StateSessionServiceOptions {}

export const DEFAULT_ROOT_COLLECTION = 'adk_state';
export const DEFAULT_TTL_FIELD = 'expireAt';

/**
 * The longest `expireAfterIdleSeconds` or `expireAfterCreateSeconds`: 1,000 years, so that the expiry time
 * stays far below the last instant a Firestore timestamp can hold (year 9999).
 */
export const MAX_SESSION_TTL_SECONDS = 1_000 * 365.25 * 24 * 3_600;

const MAX_TRANSACTION_ATTEMPTS = 100;

export const DEFAULT_CLOSE_WAIT_MS = 30_000;
const MAX_CLOSE_WAIT_MS = 600_000;

/** What the store runs with: the options, checked, with their defaults filled in. */
export interface StoreSettings {
  firestore: Firestore;
  rootCollection: string;
  expiry: Expiry | undefined;
  ttlField: string;
  maxTransactionAttempts: number;
  now: () => number;
  closeWaitMs: number;
}

/** Checks the options of {@link FirestoreStore}; throws {@link InvalidArgumentError} for the first one that is off. */
export function checkStoreOptions(options: FirestoreStoreOptions): StoreSettings {
  if (typeof options !== 'object' || options === null || typeof options.firestore?.collection !== 'function') {
    throw new InvalidArgumentError(
      'firestore',
      'FirestoreStore needs { firestore }: a Firestore instance from @google-cloud/firestore',
    );
  }
  const {
    expireAfterIdleSeconds,
    expireAfterCreateSeconds,
    ttlField = DEFAULT_TTL_FIELD,
    maxTransactionAttempts = 10,
    now = Date.now,
    closeWaitMs = DEFAULT_CLOSE_WAIT_MS,
  } = options;
  const expiry = expiryOf({ expireAfterIdleSeconds, expireAfterCreateSeconds }, { max: MAX_SESSION_TTL_SECONDS });
  if (
    typeof ttlField !== 'string' ||
    !/^[A-Za-z_][A-Za-z0-9_]*$/.test(ttlField) ||
    Object.hasOwn(SESSION_DOCUMENT_FIELDS, ttlField) ||
    ttlField.startsWith('__')
  ) {
    throw new InvalidArgumentError(
      'ttlField',
      `must be a plain field name that the store does not use itself, got ${String(ttlField)}`,
    );
  }
  assertPositiveNumber('maxTransactionAttempts', maxTransactionAttempts, {
    integer: true,
    max: MAX_TRANSACTION_ATTEMPTS,
  });
  if (typeof now !== 'function') throw new InvalidArgumentError('now', `must be a function, got ${typeof now}`);
  assertPositiveNumber('closeWaitMs', closeWaitMs, { allowZero: true, max: MAX_CLOSE_WAIT_MS });
  return {
    firestore: options.firestore,
    rootCollection: checkRootCollection(options.rootCollection ?? DEFAULT_ROOT_COLLECTION),
    expiry,
    ttlField,
    maxTransactionAttempts,
    now,
    closeWaitMs,
  };
}

/**
 * Checks a root collection path: an odd number of non-empty segments that
 * Firestore accepts as ids, none of them this store's own subcollection
 * names (a root inside another store's `adk_sessions`, say, would mix its
 * documents with that store's sessions).
 */
function checkRootCollection(path: unknown): string {
  if (typeof path !== 'string' || path === '') {
    throw new InvalidArgumentError('rootCollection', `must be a non-empty collection path, got ${String(path)}`);
  }
  const segments = path.split('/');
  if (segments.length % 2 === 0) {
    throw new InvalidArgumentError(
      'rootCollection',
      `must name a collection (an odd number of segments, such as adk_state or tenants/t1/adk_state), got ${path}`,
    );
  }
  for (const segment of segments) {
    if (
      segment === '' ||
      segment === '.' ||
      segment === '..' ||
      /^__.*__$/.test(segment) ||
      Buffer.byteLength(segment, 'utf8') > 1_500
    ) {
      throw new InvalidArgumentError(
        'rootCollection',
        `has a segment Firestore does not take as an id (empty, ".", "..", "__x__" or over 1,500 bytes): ${JSON.stringify(segment)}`,
      );
    }
    if (segment === USERS || segment === SESSIONS || segment === EVENTS) {
      throw new InvalidArgumentError(
        'rootCollection',
        `must not run through ${segment}, a collection of this store's own layout: the root would sit among another store's documents (${path})`,
      );
    }
  }
  return path;
}
