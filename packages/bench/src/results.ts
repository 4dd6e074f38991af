/** The shape of results.json: every figure of a run. */

import type { Placement } from './affinity.js';
import type { ConversationResult } from './conversation.js';
import type { ClientCpuResult } from './redis-client-cpu.js';
import type { Summary } from './stats.js';

export interface Machine {
  cores: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  os: string;
}

/** `store`: an adk-state store. `peer`: one of `@google/adk`'s own session services. */
export type TargetKind = 'store' | 'peer';

export interface TargetInfo {
  id: string;
  label: string;
  kind: TargetKind;
  backend: string;
  /** `skipped`: its package or backend could not be used in this run (see `reason`). */
  status: 'ok' | 'skipped';
  reason?: string;
  details?: string;
}

export interface ProbeResult {
  name: string;
  /** Requests per second, one at a time. */
  sequential: Summary;
  /** Requests per second, with `options.rawConcurrency` in flight. */
  concurrent: Summary;
}

export interface BackendInfo {
  id: string;
  label: string;
  details: string;
  probes: ProbeResult[];
}

export type WorkloadId = 'append-sequential' | 'append-concurrent' | 'recent-small' | 'recent-large' | 'whole' | 'list';

export interface WorkloadCell {
  /** events/s for appends, ms per operation for reads. */
  value?: Summary;
  /** Appends: events done per sample. */
  events?: Summary;
  /** Sequential appends: events/s over the first and the last tenth of each sample. */
  firstTenth?: Summary;
  lastTenth?: Summary;
  /** Sequential appends: this process's CPU time per event, in microseconds. */
  cpuPerEvent?: Summary;
  /** Set when the workload failed on this target. */
  error?: string;
}

export interface WorkloadResult {
  id: WorkloadId;
  title: string;
  unit: 'events/s' | 'ms';
  cells: Record<string, WorkloadCell>;
}

export interface RoundTripResult {
  unit: string;
  /** Operation name to round trips; empty when not counted. */
  operations: Record<string, number>;
  error?: string;
}

export interface MemoryResult {
  bytesPerEvent?: Summary;
  jsonBytesPerEvent?: number;
  error?: string;
}

/** One phase of the scale-out workload: what each master of the cluster ran. */
export interface ClusterPhase {
  name: string;
  appends: number;
  /** Per master (`host:port`): commands run there, requests and the commands scripts ran alike (`INFO commandstats`). */
  commands: Record<string, number>;
  /** The busiest master's commands ÷ the average over the masters. */
  busiestOverAverage: number;
}

/** The scale-out workload of a store on a cluster: many users of one app. */
export interface ClusterResult {
  masters: number;
  users: number;
  /** The store's `shards` setting. */
  shards: number;
  phases: ClusterPhase[];
  /** Per master: keys it holds after the workload. */
  keys: Record<string, number>;
  keysBusiestOverAverage: number;
  /** Round trips (requests the masters received from the store's connections) per kind of operation. */
  roundTrips: Record<string, number>;
  error?: string;
}

export interface Check {
  id: string;
  /** The target as the issue states it. */
  target: string;
  status: 'met' | 'missed' | 'not measured';
  /** The measured ratio. */
  measured?: number;
  /** The ratio's bound, and which side passes. */
  bound: number;
  comparison: '>=' | '<=';
  /** How the ratio is computed. */
  formula: string;
  /** Why the target is missed (or cannot be measured), from what the run shows. */
  note?: string;
}

export interface Results {
  date: string;
  command: string;
  durationSeconds: number;
  machine: Machine;
  /** Where the bench and the servers ran; null when not pinned. */
  placement: Placement | null;
  options: {
    repetitions: number;
    sizes: Record<string, number>;
    minSampleMs: number;
    maxSampleMs: number;
    probeMaxMs: number;
    /** Untimed work before each sample, after its forced collection; absent in older results (none). */
    warmMs?: number;
    rawConcurrency: number;
  };
  targets: TargetInfo[];
  backends: BackendInfo[];
  workloads: WorkloadResult[];
  roundTrips: Record<string, RoundTripResult>;
  memory: Record<string, MemoryResult>;
  /** Stores measured on a cluster too (by target id); absent in older results. */
  clusters?: Record<string, ClusterResult>;
  /** Workload 9, the conversation through ADK's Runner (by target id); absent in older results. */
  conversation?: Record<string, ConversationResult>;
  /** Workload 9 on the stores' services with `shareReadEvents: true` (by target id); absent in older results. */
  conversationShared?: Record<string, ConversationResult>;
  /** Workload 10, appendEvent on 10-event sessions (appends/s, by target id); absent in older results. */
  shortAppends?: Record<string, Summary>;
  /** Workload 11, client CPU per operation beside the same round trips sent raw (by target id); absent in older results. */
  clientCpu?: Record<string, ClientCpuResult>;
  checks: Check[];
}
