/**
 * One bench run, phase by phase: start the backends and open every target,
 * place the processes on cores, measure the backends' raw round trips, seed
 * and time the reads, time the appends, count round trips, run the cluster
 * workload, measure the heap, and at the end stop everything. The phases
 * (`phases/`) share one context, which ends up holding every figure.
 */
import { evaluateChecks } from './checks.js';
import { describeMachine } from './machine.js';
import type { BenchOptions } from './options.js';
import { runAppends } from './phases/appends.js';
import { measureClientCpu } from './phases/client-cpu.js';
import { runClusters } from './phases/cluster.js';
import { type BenchContext, createContext, type Log } from './phases/context.js';
import { runConversations } from './phases/conversation.js';
import { measureHeap } from './phases/heap.js';
import { closeTargets, openTargets, placeProcesses, selectTargets } from './phases/open.js';
import { measureProbes } from './phases/probes.js';
import { runReads, seedReadData } from './phases/reads.js';
import { countRoundTrips } from './phases/round-trips.js';
import { runShortAppends } from './phases/short-appends.js';
import type { Results } from './results.js';
import { nowMs } from './stats.js';
import { TARGETS } from './targets/registry.js';
import type { AnyTargetSpec } from './targets/types.js';

export type { Log } from './phases/context.js';

const stderrLog: Log = (line) => process.stderr.write(`${line}\n`);

export async function runBench(
  options: BenchOptions,
  targets: readonly AnyTargetSpec[] = TARGETS,
  log: Log = stderrLog,
): Promise<Results> {
  const started = nowMs();
  const context = createContext(options, log);
  const selected = selectTargets(targets, options.only);
  try {
    await openTargets(context, selected);
    await placeProcesses(context);
    await measureProbes(context);
    await seedReadData(context);
    await runReads(context);
    await runAppends(context);
    await countRoundTrips(context);
    await runClusters(context);
    await measureHeap(context);
    await runShortAppends(context);
    await runConversations(context);
    await measureClientCpu(context);
    return results(context, started);
  } finally {
    await closeTargets(context);
  }
}

/** Everything the phases measured, as results.json has it, with the targets checked. */
function results(context: BenchContext, started: number): Results {
  const { options, sizes } = context;
  const results: Results = {
    date: context.date,
    command: options.command,
    durationSeconds: 0,
    machine: describeMachine(),
    placement: context.placement ?? null,
    options: {
      repetitions: options.repetitions,
      sizes: { ...sizes },
      minSampleMs: options.minSampleMs,
      maxSampleMs: options.maxSampleMs,
      probeMaxMs: options.probeMaxMs,
      warmMs: options.warmMs,
      rawConcurrency: options.rawConcurrency,
    },
    targets: context.targets,
    backends: context.backendInfos,
    workloads: context.workloads,
    roundTrips: context.roundTrips,
    memory: context.memory,
    ...(Object.keys(context.clusters).length > 0 ? { clusters: context.clusters } : {}),
    ...(Object.keys(context.conversation).length > 0 ? { conversation: context.conversation } : {}),
    ...(Object.keys(context.conversationShared).length > 0 ? { conversationShared: context.conversationShared } : {}),
    ...(Object.keys(context.shortAppends).length > 0 ? { shortAppends: context.shortAppends } : {}),
    ...(Object.keys(context.clientCpu).length > 0 ? { clientCpu: context.clientCpu } : {}),
    checks: [],
  };
  results.checks = evaluateChecks(results);
  results.durationSeconds = Math.round((nowMs() - started) / 100) / 10;
  return results;
}
