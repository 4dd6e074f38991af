/**
 * What a backend author hands the suite: how to make a fresh service, how to
 * dispose of it, what the backend can do, and any recorded divergence.
 */
import type { StateSessionServiceOptions } from '@adk-state/core';
import type { BaseSessionService, Session } from '@google/adk';

/** The service surface the suite exercises: ADK's API plus the bucket readers. */
export interface ConformanceService extends BaseSessionService {
  getUserState(request: { appName: string; userId: string }): Promise<Record<string, unknown>>;
  getAppState(request: { appName: string }): Promise<Record<string, unknown>>;
  /** Stores a whole session copied from elsewhere (see `StateSessionService.importSession`). */
  importSession(session: Session, options?: { replace?: boolean }): Promise<'imported' | 'exists'>;
}

/**
 * How the suite takes a backend away and gives it back, to check that every
 * call then fails typed and in bounded time, and that the same service works
 * again afterwards. Data written before `stop()` must still be there after
 * `start()`: pause the server (`SIGSTOP`/`SIGCONT`), or close its listener
 * and connections while keeping its storage.
 */
export interface OutageControl {
  /** Makes the backend unreachable or unresponsive. Resolves once it is. */
  stop(): Promise<void> | void;
  /** Brings it back with its data. Resolves once it accepts connections again. */
  start(): Promise<void> | void;
}

/** The key of a stored session, as the damage control is given it. */
export interface DamagedKey {
  appName: string;
  userId: string;
  sessionId: string;
}

/** Puts back exactly what a {@link DamageControl} method changed. */
export type Restore = () => Promise<void>;

/**
 * How the suite changes a stored session behind the service's back, as a
 * record changed or damaged outside adk-state would be, straight in the
 * backend (a raw client). Each method changes one thing of the stored
 * session `key` and resolves to a function that puts it back exactly.
 */
export interface DamageControl {
  /** Its revision becomes something that is not a whole number (a word). */
  revision(key: DamagedKey): Promise<Restore>;
  /** Its `lastUpdateTime` becomes something that is not a number. */
  lastUpdateTime(key: DamagedKey): Promise<Restore>;
  /** The stored value of its session-scope state key `stateKey` becomes something that is not JSON text. */
  stateValue(key: DamagedKey, stateKey: string): Promise<Restore>;
  /** The stored form of its event `eventId` becomes something that is not an event. */
  event(key: DamagedKey, eventId: string): Promise<Restore>;
  /**
   * Takes the session out of what the store's listing reads (its entries in
   * listing indexes, or the fields its listing queries filter and order by),
   * as a record changed outside adk-state might be, leaving its key and
   * history stored. Required by the session-keys tests when the target also
   * declares `sessionKeys`.
   */
  listingEntry?(key: DamagedKey): Promise<Restore>;
}

/**
 * How the suite makes the backend lose writes it acknowledged, as a server
 * restarted from an older snapshot, or a failover to a replica that lagged,
 * does: for a backend that can (asynchronous replication), so that the
 * service's reads of a session read before are checked against it.
 */
export interface LostWritesControl {
  /**
   * Takes a copy of what the backend holds of the stored session `key` (its
   * head, its log and the ids in it) now; the function it resolves to puts
   * that back, so that every write made to the session since is lost.
   */
  snapshot(key: DamagedKey): Promise<Restore>;
}

/** What the backend offers beyond the contract every store meets. */
export interface Capabilities {
  /**
   * Services made by separate `create()` calls share one backend, so data
   * written through one is read through another (a database, a server, a
   * directory). Enables the durability and cross-instance concurrency groups.
   * In-process stores whose instances share nothing leave it false.
   */
  sharedBackend: boolean;
  /**
   * How to take the backend away (enables the outage group), or
   * `{ absent: reason }` for a backend that cannot be taken away (an
   * in-process store). Left out, the outage group is skipped as undeclared.
   */
  outage?: OutageControl | { absent: string };
  /**
   * `create()` honors `expireAfterCreateSeconds` in its options: a session
   * and its events disappear that long after the session was created (a
   * number of seconds, fractions allowed), while user and app state stay.
   * Enables the expiry tests; `{ absent: reason }` or left out skips them (a
   * backend whose expiry runs too late for a test, such as MongoDB's TTL
   * monitor, once a minute).
   */
  expiry?: true | { absent: string };
  /**
   * How to damage a stored session in the backend (enables the
   * damaged-records group), or `{ absent: reason }` for a store that keeps
   * no record outside the service (an in-process store).
   */
  damage?: DamageControl | { absent: string };
  /**
   * How to make the backend lose acknowledged writes of a session (enables
   * the lost-writes tests), or `{ absent: reason }` for a backend that never
   * loses one (synchronous replication, an in-process store).
   */
  lostWrites?: LostWritesControl | { absent: string };
  /**
   * The service's store offers `listSessionKeys(appName, userId?)`
   * (`SessionStore.listSessionKeys`): the key of every session it holds for
   * the app, found without the listing's indexes, sorted by user, then id.
   * Enables the session-keys tests; `{ absent: reason }` or left out skips them.
   */
  sessionKeys?: true | { absent: string };
}

/** What `create()` is asked for: core's options, and the creation-clock time to live of the expiry tests. */
export type ConformanceServiceOptions = StateSessionServiceOptions & {
  /** Only in tests that require the `expiry` capability. */
  expireAfterCreateSeconds?: number;
};

/**
 * A test the backend cannot pass, with the reason. The test still runs, as a
 * strict expected failure: once the backend passes it, the suite fails until
 * the record is deleted.
 */
export interface Divergence {
  /** The test's id as printed by the suite: `group › test name`. */
  test: string;
  reason: string;
  /**
   * The backend fails the test only some of the time (a race it loses now
   * and then, such as a third-party emulator without isolation). The test
   * still runs: a failure of its steps is reported as skipped (the reason in
   * its title, the error in a printed warning and, from vitest 3 on, in the
   * skip note), and a pass as a pass; a fault the store left or a failed
   * `destroy` still fails it. Use it only for a failure that comes and goes;
   * a backend that always fails the test records a plain divergence.
   */
  intermittent?: boolean;
}

/** The one argument of {@link runConformanceSuite}. */
export interface ConformanceTarget<S extends ConformanceService = ConformanceService> {
  /** Shown in the suite's title. */
  name: string;
  /** Runs once before all tests (start a server, connect a client). */
  setup?: () => Promise<void> | void;
  /** Runs once after all tests (stop what `setup` started). */
  teardown?: () => Promise<void> | void;
  /**
   * A fresh service for one test. Called once or more per test; every test
   * uses app names of its own, so services may share one backend.
   */
  create: (options: ConformanceServiceOptions) => Promise<S> | S;
  /** Disposes of a service made by `create`, after the test that made it. */
  destroy?: (service: S) => Promise<void> | void;
  capabilities: Capabilities;
  divergences?: readonly Divergence[];
}
