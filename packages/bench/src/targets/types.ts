/**
 * What the bench measures: targets, each a session service on a backend
 * (`../backends/types.ts`). Adding a store is one {@link defineTarget} call in
 * `registry.ts`, plus a {@link BackendSpec} in `../backends/` when it needs a
 * new server.
 */
import type { BaseSessionService, Event } from '@google/adk';
import type { BackendSpec, RunningBackend } from '../backends/types.js';
import type { ClientCpuResult } from '../redis-client-cpu.js';
import type { ClusterResult, TargetKind } from '../results.js';

/** Counts the requests that operations make to their backend. */
export interface RoundTripCounter {
  /** What is counted, e.g. `commands received by redis-server`. */
  unit: string;
  /** The service whose requests are counted (the measured one, or a twin on the same backend). */
  service: BaseSessionService;
  /** Runs `operation` (calls on {@link service}) and returns how many round trips it made. */
  count(operation: () => Promise<unknown>): Promise<number>;
}

export interface SessionKey {
  appName: string;
  userId: string;
  sessionId: string;
}

/**
 * A faster way to build the read workloads' data than one call per event,
 * writing exactly the rows or records the service's own calls would write.
 */
export interface Seeder {
  /** Creates the session `key` holding `events` (already stripped of `temp:` keys). */
  history(key: SessionKey, events: Event[]): Promise<void>;
  /** Creates `count` sessions of `appName`, spread over `users`. */
  sessions(appName: string, users: string[], count: number): Promise<void>;
}

/**
 * An adapter's bulk-seeding module (`@adk-state/adapter-mongo/seed`,
 * `@adk-state/adapter-firestore/seed`): both functions work on the adapter's own store.
 */
export interface SeedingModule<S> {
  seedHistory(store: S, key: SessionKey, events: Event[]): Promise<void>;
  seedSessions(store: S, appName: string, users: string[], count: number): Promise<void>;
}

/** The {@link Seeder} of an adapter's seeding module over `store`, the service's store. */
export function adapterSeeder<S>(seeding: SeedingModule<S>, store: S): Seeder {
  return {
    history: (key, events) => seeding.seedHistory(store, key, events),
    sessions: (appName, users, count) => seeding.seedSessions(store, appName, users, count),
  };
}

/** The sizes of the scale-out workload (see `options.ts`). */
export interface ClusterSizes {
  clusterUsers: number;
  clusterAppends: number;
  concurrentSessions: number;
}

/** A target ready to be measured. */
export interface OpenTarget {
  service: BaseSessionService;
  /** In-process targets: a new empty service of the same kind (for the heap workload). */
  fresh?: () => BaseSessionService;
  /** Round trips per operation; absent when they cannot be counted. In-process targets make none. */
  roundTrips?: RoundTripCounter | 'in-process';
  seed?: Seeder;
  /** The scale-out workload on a cluster, when the target has one (run once, not timed). */
  cluster?: (sizes: ClusterSizes) => Promise<ClusterResult>;
  /** Workload 11: client CPU per operation beside the same round trips sent raw (Redis). */
  clientCpu?: (options: { runId: string; repetitions: number; minSampleMs: number }) => Promise<ClientCpuResult>;
  /** Extra facts printed with the results (settings of this target). */
  details?: string;
  /**
   * The same store's service made with `shareReadEvents: true` (whole reads
   * hand out the cached events, frozen, instead of copies): workload 9 runs a
   * second conversation on it.
   */
  sharingReads?: BaseSessionService;
  /** Documents the backend has sent so far (Firestore: what reads are billed by); absent when not counted. */
  documentsRead?: () => number;
  close(): Promise<void>;
}

export interface TargetSpec<B extends RunningBackend = RunningBackend> {
  /** Short id used on the command line (`--only`) and in results.json. */
  id: string;
  label: string;
  kind: TargetKind;
  backend: BackendSpec<B>;
  open(backend: B): Promise<OpenTarget>;
}

/** A target with its backend type erased, so targets of every backend fit in one list. */
export interface AnyTargetSpec {
  id: string;
  label: string;
  kind: TargetKind;
  backend: BackendSpec;
  open(backend: RunningBackend): Promise<OpenTarget>;
}

export function defineTarget<B extends RunningBackend>(spec: TargetSpec<B>): AnyTargetSpec {
  return {
    id: spec.id,
    label: spec.label,
    kind: spec.kind,
    backend: spec.backend as unknown as BackendSpec,
    open: (backend) => spec.open(backend as B),
  };
}
