/**
 * One bench run: start the backends, open every target, run every workload
 * on every target with a warm-up and interleaved repetitions, count round
 * trips, measure the heap, stop everything, and return all the figures.
 */
import { randomUUID } from 'node:crypto';
import { separateCores } from './affinity.js';
import { evaluateChecks } from './checks.js';
import { describeMachine } from './machine.js';
import type { BenchOptions } from './options.js';
import type {
  BackendInfo,
  ClusterResult,
  MemoryResult,
  Results,
  RoundTripResult,
  TargetInfo,
  WorkloadCell,
  WorkloadId,
  WorkloadResult,
} from './results.js';
import { nowMs, summarize } from './stats.js';
import { TARGETS } from './targets/registry.js';
import type { AnyTargetSpec, BackendSpec, OpenTarget, Probe, RunningBackend } from './targets/types.js';
import {
  appendConcurrent,
  appendSequential,
  countRoundTrips,
  garbageCollector,
  heapPerEvent,
  listPage,
  probeConcurrent,
  probeSequential,
  type ReadData,
  readRecent,
  readWhole,
  seedReads,
  timeRead,
} from './workloads.js';

export type Log = (line: string) => void;

const stderrLog: Log = (line) => process.stderr.write(`${line}\n`);

interface Opened {
  spec: AnyTargetSpec;
  target: OpenTarget;
}

interface BackendEntry {
  spec: BackendSpec;
  running?: RunningBackend;
  error?: string;
}

/** Heap samples per in-process target. */
const HEAP_REPETITIONS = 3;

export async function runBench(
  options: BenchOptions,
  targets: readonly AnyTargetSpec[] = TARGETS,
  log: Log = stderrLog,
): Promise<Results> {
  const started = nowMs();
  const date = new Date().toISOString();
  const runId = randomUUID().slice(0, 8);
  const selected = selectTargets(targets, options.only);
  const backends = new Map<string, BackendEntry>();
  const opened: Opened[] = [];
  const infos: TargetInfo[] = [];
  const { sizes } = options;

  try {
    for (const spec of selected) {
      const info: TargetInfo = {
        id: spec.id,
        label: spec.label,
        kind: spec.kind,
        backend: spec.backend.id,
        status: 'ok',
      };
      infos.push(info);
      let entry = backends.get(spec.backend.id);
      if (!entry) {
        entry = { spec: spec.backend };
        backends.set(spec.backend.id, entry);
        try {
          log(`starting ${spec.backend.label}`);
          entry.running = await spec.backend.start();
        } catch (error) {
          entry.error = message(error);
          log(`  ${spec.backend.label} could not be started: ${entry.error}`);
        }
      }
      if (!entry.running) {
        info.status = 'skipped';
        info.reason = `${spec.backend.label} could not be started: ${entry.error}`;
        continue;
      }
      try {
        const target = await spec.open(entry.running);
        opened.push({ spec, target });
        if (target.details) info.details = target.details;
      } catch (error) {
        info.status = 'skipped';
        info.reason = `could not be opened: ${message(error)}`;
        log(`  ${spec.label} skipped: ${info.reason}`);
      }
    }

    const detached = [...backends.values()].flatMap((entry) => entry.running?.detachedPids?.() ?? []);
    const placement = options.pin ? await separateCores(log, detached) : undefined;
    const backendInfos = await measureProbes(backends, options, log);
    const workloads = emptyWorkloads(options);
    const cell = (id: WorkloadId, targetId: string): WorkloadCell => {
      const workload = workloads.find((each) => each.id === id) as WorkloadResult;
      workload.cells[targetId] ??= {};
      return workload.cells[targetId];
    };

    // Reads first, on data seeded once per target, so that the append
    // workloads' rows do not sit in the tables the reads query.
    const readData = new Map<string, ReadData>();
    // Seeding is not timed, so every target seeds at once: the slowest sets the pace.
    await Promise.all(
      opened.map(async ({ spec, target }) => {
        const begin = nowMs();
        try {
          readData.set(spec.id, await seedReads(target.service, target.seed, `bench-read-${runId}`, sizes));
          log(`seeded ${spec.label} in ${((nowMs() - begin) / 1000).toFixed(1)} s`);
        } catch (error) {
          for (const id of READ_WORKLOADS) cell(id, spec.id).error = `seeding failed: ${message(error)}`;
          log(`  seeding ${spec.label} failed: ${message(error)}`);
        }
      }),
    );
    const readSamples = new Map<string, number[]>();
    await interleave(opened, options.repetitions, async ({ spec, target }, repetition) => {
      const data = readData.get(spec.id);
      if (!data) return;
      const reads: Record<(typeof READ_WORKLOADS)[number], () => Promise<unknown>> = {
        'recent-small': () => readRecent(target.service, data.small, sizes.recentEvents),
        'recent-large': () => readRecent(target.service, data.large, sizes.recentEvents),
        whole: () => readWhole(target.service, data.whole, sizes.wholeHistory),
        list: () => listPage(target.service, data.listApp, sizes.listPage, sizes.listSessions),
      };
      for (const id of READ_WORKLOADS) {
        const slot = cell(id, spec.id);
        if (slot.error) continue;
        try {
          collectGarbage();
          const sample = await timeRead(reads[id], repetition === 0 ? options.minSampleMs / 4 : options.minSampleMs);
          if (repetition === 0) continue;
          const key = `${id}/${spec.id}`;
          const list = readSamples.get(key) ?? [];
          list.push(sample.msPerOperation);
          readSamples.set(key, list);
          slot.value = summarize(list);
        } catch (error) {
          slot.error = message(error);
          log(`  ${id} on ${spec.label} failed: ${slot.error}`);
        }
      }
    });
    log('reads done');

    for (const id of ['append-sequential', 'append-concurrent'] as const) {
      const rates = new Map<string, number[]>();
      const counts = new Map<string, number[]>();
      const firsts = new Map<string, number[]>();
      const lasts = new Map<string, number[]>();
      const cpus = new Map<string, number[]>();
      await interleave(opened, options.repetitions, async ({ spec, target }, repetition) => {
        const slot = cell(id, spec.id);
        if (slot.error) return;
        const warmUp = repetition === 0;
        const params = {
          appName: `bench-${id}-${repetition}-${runId}`,
          events: warmUp ? Math.max(50, Math.floor(sizes.appendEvents / 10)) : sizes.appendEvents,
          maxMs: warmUp ? options.maxSampleMs / 4 : options.maxSampleMs,
        };
        try {
          collectGarbage();
          const sample =
            id === 'append-sequential'
              ? await appendSequential(target.service, params)
              : await appendConcurrent(target.service, { ...params, sessions: sizes.concurrentSessions });
          if (warmUp) return;
          const rateList = push(rates, spec.id, sample.eventsPerSecond);
          const countList = push(counts, spec.id, sample.events);
          slot.value = summarize(rateList);
          slot.events = summarize(countList);
          if (sample.firstTenthPerSecond !== undefined && sample.lastTenthPerSecond !== undefined) {
            slot.firstTenth = summarize(push(firsts, spec.id, sample.firstTenthPerSecond));
            slot.lastTenth = summarize(push(lasts, spec.id, sample.lastTenthPerSecond));
          }
          if (sample.cpuMicrosPerEvent !== undefined) {
            slot.cpuPerEvent = summarize(push(cpus, spec.id, sample.cpuMicrosPerEvent));
          }
        } catch (error) {
          slot.error = message(error);
          log(`  ${id} on ${spec.label} failed: ${slot.error}`);
        }
      });
      log(`${id} done`);
    }

    const roundTrips: Record<string, RoundTripResult> = {};
    for (const { spec, target } of opened) {
      const data = readData.get(spec.id);
      if (target.roundTrips === 'in-process') {
        roundTrips[spec.id] = { unit: 'in process: no round trips', operations: zeroRoundTrips() };
      } else if (!target.roundTrips) {
        roundTrips[spec.id] = { unit: 'not counted', operations: {} };
      } else if (!data) {
        roundTrips[spec.id] = { unit: target.roundTrips.unit, operations: {}, error: 'no read data (seeding failed)' };
      } else {
        try {
          const operations = await countRoundTrips(target.roundTrips, data, sizes, `bench-count-${runId}`);
          roundTrips[spec.id] = { unit: target.roundTrips.unit, operations };
        } catch (error) {
          roundTrips[spec.id] = { unit: target.roundTrips.unit, operations: {}, error: message(error) };
          log(`  round trips of ${spec.label} failed: ${message(error)}`);
        }
      }
    }
    log('round trips counted');

    const clusters: Record<string, ClusterResult> = {};
    for (const { spec, target } of opened) {
      if (!target.cluster) continue;
      log(`${spec.label} on a cluster: ${sizes.clusterUsers} users of one app`);
      clusters[spec.id] = await target.cluster(sizes);
      const error = clusters[spec.id]?.error;
      if (error) log(`  ${spec.label} on a cluster failed: ${error}`);
    }

    const memory: Record<string, MemoryResult> = {};
    const heapTargets = opened.filter(({ target }) => target.fresh !== undefined);
    const heapSamples = new Map<string, number[]>();
    await interleave(heapTargets, HEAP_REPETITIONS, async ({ spec, target }, repetition) => {
      memory[spec.id] ??= {};
      const result = memory[spec.id] as MemoryResult;
      if (result.error || repetition === 0) return;
      try {
        const sample = await heapPerEvent(target.fresh as () => OpenTarget['service'], sizes.memoryEvents);
        result.bytesPerEvent = summarize(push(heapSamples, spec.id, sample.bytesPerEvent));
        result.jsonBytesPerEvent = sample.jsonBytesPerEvent;
      } catch (error) {
        result.error = message(error);
      }
    });
    log('heap measured');

    const results: Results = {
      date,
      command: options.command,
      durationSeconds: 0,
      machine: describeMachine(),
      placement: placement ?? null,
      options: {
        repetitions: options.repetitions,
        sizes: { ...sizes },
        minSampleMs: options.minSampleMs,
        maxSampleMs: options.maxSampleMs,
        probeMaxMs: options.probeMaxMs,
        rawConcurrency: options.rawConcurrency,
      },
      targets: infos,
      backends: backendInfos,
      workloads,
      roundTrips,
      memory,
      ...(Object.keys(clusters).length > 0 ? { clusters } : {}),
      checks: [],
    };
    results.checks = evaluateChecks(results);
    results.durationSeconds = Math.round((nowMs() - started) / 100) / 10;
    return results;
  } finally {
    for (const { spec, target } of opened) {
      await target.close().catch((error) => log(`  closing ${spec.label}: ${message(error)}`));
    }
    for (const entry of backends.values()) {
      await entry.running?.stop().catch((error) => log(`  stopping ${entry.spec.label}: ${message(error)}`));
    }
  }
}

const READ_WORKLOADS = ['recent-small', 'recent-large', 'whole', 'list'] as const;

function emptyWorkloads(options: BenchOptions): WorkloadResult[] {
  const { sizes } = options;
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

/** The raw round-trip rate of every backend that has probes, interleaved across backends. */
async function measureProbes(
  backends: Map<string, BackendEntry>,
  options: BenchOptions,
  log: Log,
): Promise<BackendInfo[]> {
  const infos: BackendInfo[] = [];
  const probes: Array<{ info: BackendInfo; probe: Probe }> = [];
  for (const entry of backends.values()) {
    if (!entry.running) continue;
    const info: BackendInfo = {
      id: entry.spec.id,
      label: entry.spec.label,
      details: entry.running.details,
      probes: [],
    };
    infos.push(info);
    for (const probe of entry.running.probes) probes.push({ info, probe });
  }
  const sequential = new Map<string, number[]>();
  const concurrent = new Map<string, number[]>();
  const ops = options.sizes.rawOps;
  await interleave(probes, options.repetitions, async ({ info, probe }, repetition) => {
    const count = repetition === 0 ? Math.max(10, Math.floor(ops / 10)) : ops;
    collectGarbage();
    const one = await probeSequential(probe, count, options.probeMaxMs);
    const many = await probeConcurrent(probe, count, options.rawConcurrency, options.probeMaxMs);
    if (repetition === 0) return;
    const key = `${info.id}/${probe.name}`;
    const result = {
      name: probe.name,
      sequential: summarize(push(sequential, key, one)),
      concurrent: summarize(push(concurrent, key, many)),
    };
    const index = info.probes.findIndex((each) => each.name === probe.name);
    if (index >= 0) info.probes[index] = result;
    else info.probes.push(result);
  });
  if (probes.length > 0) log('raw round trips measured');
  return infos;
}

/**
 * Runs a warm-up round (repetition 0) and then `repetitions` rounds; each
 * round visits every item once, starting one item later than the round
 * before, so that drift of the machine falls on all items alike.
 */
async function interleave<T>(
  items: readonly T[],
  repetitions: number,
  sample: (item: T, repetition: number) => Promise<void>,
) {
  for (let repetition = 0; repetition <= repetitions; repetition++) {
    for (let offset = 0; offset < items.length; offset++) {
      await sample(items[(offset + repetition) % items.length] as T, repetition);
    }
  }
}

function selectTargets(targets: readonly AnyTargetSpec[], only: string[] | undefined): AnyTargetSpec[] {
  if (!only) return [...targets];
  const unknown = only.filter((id) => !targets.some((target) => target.id === id));
  if (unknown.length > 0) {
    throw new Error(`unknown target ${unknown.join(', ')}; known: ${targets.map((target) => target.id).join(', ')}`);
  }
  return targets.filter((target) => only.includes(target.id));
}

function zeroRoundTrips(): Record<string, number> {
  return { createSession: 0, appendEvent: 0, getSessionRecent: 0, getSessionWhole: 0, listSessions: 0 };
}

function push(map: Map<string, number[]>, key: string, value: number): number[] {
  const list = map.get(key) ?? [];
  list.push(value);
  map.set(key, list);
  return list;
}

function collectGarbage(): void {
  garbageCollector()?.();
}

function message(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
    return `${error.message}${cause}`.split('\n').slice(0, 3).join(' ');
  }
  return String(error);
}
