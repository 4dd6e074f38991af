/**
 * What the phases of a run share: the options, the backends started and the
 * targets opened, and every figure measured so far. `runBench` creates one
 * and hands it to each phase in turn; each phase reads what the earlier ones
 * left and adds its own part.
 */
import { randomUUID } from 'node:crypto';
import type { Placement } from '../affinity.js';
import type { BackendSpec, RunningBackend } from '../backends/types.js';
import type { ConversationResult } from '../conversation.js';
import type { BenchOptions, BenchSizes } from '../options.js';
import type { ClientCpuResult } from '../redis-client-cpu.js';
import type {
  BackendInfo,
  ClusterResult,
  MemoryResult,
  RoundTripResult,
  TargetInfo,
  WorkloadCell,
  WorkloadId,
  WorkloadResult,
} from '../results.js';
import type { Summary } from '../stats.js';
import type { AnyTargetSpec, OpenTarget } from '../targets/types.js';
import type { ReadData } from '../workloads.js';

export type Log = (line: string) => void;

/** A target that opened on its backend. */
export interface Opened {
  spec: AnyTargetSpec;
  target: OpenTarget;
}

/** A backend of the run: started, or why not. */
export interface BackendEntry {
  spec: BackendSpec;
  running?: RunningBackend;
  error?: string;
}

export interface BenchContext {
  readonly options: BenchOptions;
  readonly sizes: BenchSizes;
  readonly log: Log;
  /** When the run started (ISO 8601), for the report. */
  readonly date: string;
  /** Tells this run's apps apart from an earlier run's on the same backend. */
  readonly runId: string;
  /** Every backend a selected target needs, by id. */
  readonly backends: Map<string, BackendEntry>;
  /** The targets that opened, in the order of the registry. */
  readonly opened: Opened[];
  /** Every selected target, opened or skipped. */
  readonly targets: TargetInfo[];
  /** How the bench and its servers were placed on cores; undefined when nothing was pinned. */
  placement?: Placement;
  /** The backends' raw round-trip rates. */
  backendInfos: BackendInfo[];
  /** Workloads 1 to 5, a cell per target. */
  readonly workloads: WorkloadResult[];
  /** The read workloads' data per target id, where seeding succeeded. */
  readonly readData: Map<string, ReadData>;
  readonly roundTrips: Record<string, RoundTripResult>;
  readonly clusters: Record<string, ClusterResult>;
  readonly memory: Record<string, MemoryResult>;
  readonly conversation: Record<string, ConversationResult>;
  /** Workload 9 again on each target's service with `shareReadEvents` (by target id). */
  readonly conversationShared: Record<string, ConversationResult>;
  /** Workload 10: appends per second on 10-event sessions, by target id. */
  readonly shortAppends: Record<string, Summary>;
  readonly shortAppendErrors: Record<string, string>;
  /** Workload 11: client CPU per operation beside raw round trips, by target id. */
  readonly clientCpu: Record<string, ClientCpuResult>;
}

export function createContext(options: BenchOptions, log: Log): BenchContext {
  return {
    options,
    sizes: options.sizes,
    log,
    date: new Date().toISOString(),
    runId: randomUUID().slice(0, 8),
    backends: new Map(),
    opened: [],
    targets: [],
    backendInfos: [],
    workloads: emptyWorkloads(options.sizes),
    readData: new Map(),
    roundTrips: {},
    clusters: {},
    memory: {},
    conversation: {},
    conversationShared: {},
    shortAppends: {},
    shortAppendErrors: {},
    clientCpu: {},
  };
}

/** The cell of workload `id` for the target `targetId`, created on first use. */
export function cell(context: BenchContext, id: WorkloadId, targetId: string): WorkloadCell {
  const workload = context.workloads.find((each) => each.id === id) as WorkloadResult;
  workload.cells[targetId] ??= {};
  return workload.cells[targetId];
}

/** Workloads 3 to 5, timed on data seeded once per target. */
export const READ_WORKLOADS = ['recent-small', 'recent-large', 'whole', 'list'] as const;

/** Workloads 1 and 2. */
export const APPEND_WORKLOADS = ['append-sequential', 'append-concurrent'] as const;

function emptyWorkloads(sizes: BenchSizes): WorkloadResult[] {
  const n = (value: number) => value.toLocaleString('en-US');
  return [
    {
      id: 'append-sequential',
      title: `1. appendEvent, one session, ${n(sizes.appendEvents)} events (delta: session, user:, app:, temp: key)`,
      unit: 'events/s',
      cells: {},
    },
    {
      id: 'append-concurrent',
      title: `2. appendEvent, ${sizes.concurrentSessions} sessions at once through one service, ${n(sizes.appendEvents)} events in all`,
      unit: 'events/s',
      cells: {},
    },
    {
      id: 'recent-small',
      title: `3a. getSession, numRecentEvents: ${sizes.recentEvents}, history of ${n(sizes.smallHistory)} events`,
      unit: 'ms',
      cells: {},
    },
    {
      id: 'recent-large',
      title: `3b. getSession, numRecentEvents: ${sizes.recentEvents}, history of ${n(sizes.largeHistory)} events`,
      unit: 'ms',
      cells: {},
    },
    {
      id: 'whole',
      title: `4. getSession, whole history of ${n(sizes.wholeHistory)} events`,
      unit: 'ms',
      cells: {},
    },
    {
      id: 'list',
      title: `5. listSessions, page of ${sizes.listPage} (newest first) among ${n(sizes.listSessions)} sessions of one app`,
      unit: 'ms',
      cells: {},
    },
  ];
}
