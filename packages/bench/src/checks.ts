/**
 * The targets, checked against the ratios of one run. Every figure
 * comes from the results; the notes say what the run shows about a miss.
 */

import { APPEND_SCRIPT_PROBE, RAW_SCRIPT_PROBE } from './backends/redis.js';
import { conversationChecks } from './checks-conversation.js';
import { formatMs, formatRate, formatRatio } from './report/format.js';
import type { Check, Results, WorkloadId } from './results.js';

function median(results: Results, workload: WorkloadId, target: string): number | undefined {
  return results.workloads.find((each) => each.id === workload)?.cells[target]?.value?.median;
}

function probeRate(results: Results, backend: string, probe: string): number | undefined {
  return results.backends.find((each) => each.id === backend)?.probes.find((each) => each.name === probe)?.sequential
    .median;
}

/** A Redis probe's rate with many callers ÷ one at a time. */
function probeRatio(results: Results, probe: string): number | undefined {
  const found = results.backends.find((each) => each.id === 'redis')?.probes.find((each) => each.name === probe);
  return found ? found.concurrent.median / found.sequential.median : undefined;
}

function formatRatioOf(value: number | undefined): string {
  return value === undefined ? 'not measured' : formatRatio(value);
}

/** Why a figure is missing: the target was skipped, not selected, or its workload failed. */
function missing(results: Results, targets: string[], workloads: WorkloadId[] = []): string {
  const reasons: string[] = [];
  for (const id of targets) {
    const info = results.targets.find((each) => each.id === id);
    if (!info) {
      reasons.push(`${id} was not part of this run`);
      continue;
    }
    if (info.status === 'skipped') {
      reasons.push(`${info.label} was skipped: ${info.reason}`);
      continue;
    }
    for (const workload of workloads) {
      const error = results.workloads.find((each) => each.id === workload)?.cells[id]?.error;
      if (error) reasons.push(`${workload} failed on ${info.label}: ${error}`);
    }
  }
  return reasons.length > 0 ? reasons.join('; ') : 'a figure is missing';
}

function check(
  base: Omit<Check, 'status' | 'measured' | 'note'>,
  measured: number | undefined,
  whyMissing: () => string,
  whyMissed?: (measured: number) => string | undefined,
): Check {
  if (measured === undefined || !Number.isFinite(measured)) {
    return { ...base, status: 'not measured', note: whyMissing() };
  }
  const met = base.comparison === '>=' ? measured >= base.bound : measured <= base.bound;
  const note = met ? undefined : whyMissed?.(measured);
  return { ...base, status: met ? 'met' : 'missed', measured, ...(note ? { note } : {}) };
}

function ratio(numerator: number | undefined, denominator: number | undefined): number | undefined {
  if (numerator === undefined || denominator === undefined || denominator === 0) return undefined;
  return numerator / denominator;
}

function roundTripsOf(results: Results, target: string, operation: string): number | undefined {
  return results.roundTrips[target]?.operations[operation];
}

/** What the run shows about a store whose recent-events read grows with the history. */
function recentGrowthNote(results: Results, target: string, measured: number): string {
  const small = median(results, 'recent-small', target);
  const large = median(results, 'recent-large', target);
  const trips = roundTripsOf(results, target, 'getSessionRecent');
  const figures = `${small === undefined ? '?' : formatMs(small)} at the short history, ${large === undefined ? '?' : formatMs(large)} at the long one (${formatRatio(measured)}), with the same ${trips ?? '?'} round trip(s)`;
  const server = SERVER_SORTS[target];
  if (server) return `${figures}: the time goes to the server. ${server}`;
  return `${figures}: the server or the store does work proportional to the history.`;
}

/** How each test server answers "the last n by position" (checked in their sources), for a miss's note. */
const MONGO_STAND_IN_SORTS =
  "The bench runs the adapter's MongoDB stand-in, which reads the last events from the end of the (session, seq) index and stops at the limit, as a mongod does; a miss here comes from the run (compare the raw round-trip rate of the same run), not from the history.";

const SERVER_SORTS: Record<string, string> = {
  mongodb: MONGO_STAND_IN_SORTS,
  'mongodb-7': MONGO_STAND_IN_SORTS,
  firestore:
    "The store reads the last events by the ids the session document keeps, two lookups whatever the history's length, and runs no query on this path (both emulators answer a query by scanning the whole collection, where Firestore walks an index); a miss here comes from the run (compare the raw round-trip rate of the same run), not from the history.",
};

/** What the table's texts and figures are computed from: the run's results and its sizes as printed. */
interface Run {
  results: Results;
  /** Events a recent read returns. */
  recent: number;
  /** The long and the short history, as printed. */
  large: string;
  small: string;
  /** Sessions appended to at once (workload 2). */
  sessions: number;
}

type Text = string | ((run: Run) => string);

/** One target of the issue: how it reads, its bound, and how the run measures it. */
interface CheckEntry {
  id: string;
  target: Text;
  bound: number;
  comparison: Check['comparison'];
  formula: Text;
  /** The measured ratio; undefined when the run lacks a figure. */
  measure: (run: Run) => number | undefined;
  whyMissing: (run: Run) => string;
  whyMissed?: (run: Run, measured: number) => string | undefined;
}

/** A row of the table: one check, or a check per item that the run holds (a check per store). */
type Row = CheckEntry | { expand: (run: Run) => CheckEntry[] };

function text(value: Text, run: Run): string {
  return typeof value === 'string' ? value : value(run);
}

function evaluate(entry: CheckEntry, run: Run): Check {
  return check(
    {
      id: entry.id,
      target: text(entry.target, run),
      bound: entry.bound,
      comparison: entry.comparison,
      formula: text(entry.formula, run),
    },
    entry.measure(run),
    () => entry.whyMissing(run),
    entry.whyMissed && ((measured) => entry.whyMissed?.(run, measured)),
  );
}

/** The Redis store's appends/s in a workload (1: one session, 2: many at once). */
function redisAppends(results: Results, workload: 'append-sequential' | 'append-concurrent'): number | undefined {
  return median(results, workload, 'redis');
}

function redisCpuPerAppend(results: Results): number | undefined {
  return results.workloads.find((each) => each.id === 'append-sequential')?.cells.redis?.cpuPerEvent?.median;
}

/** Workload 3 for one store: its recent-events read at the long history against the short one. */
function recentFlat(id: string, label: string): CheckEntry {
  return {
    id: `recent-flat-${id}`,
    target: ({ recent, large, small }) =>
      `${label}: getSession (${recent} recent) at ${large} events ≤ 1.5× its time at ${small} events`,
    bound: 1.5,
    comparison: '<=',
    formula: ({ large, small }) => `getSession time with ${large} events ÷ with ${small} events (workload 3)`,
    measure: ({ results }) => ratio(median(results, 'recent-large', id), median(results, 'recent-small', id)),
    whyMissing: ({ results }) => missing(results, [id], ['recent-small', 'recent-large']),
    whyMissed: ({ results }, measured) => recentGrowthNote(results, id, measured),
  };
}

function firestoreBackend(results: Results) {
  const firestore = results.backends.find((each) => each.id === 'firestore');
  return { firestore, onGoogle: firestore?.details.startsWith("Google's") === true };
}

/** What a Redis append costs this process beside the raw append script's round trip. */
function appendWork(results: Results): string {
  const cpu = redisCpuPerAppend(results);
  const raw = probeRate(results, 'redis', APPEND_SCRIPT_PROBE);
  return cpu === undefined || raw === undefined
    ? 'the difference is the work of this process per append'
    : `this process spends ${formatMs(cpu / 1000)} of CPU per append, ${formatRatio((cpu / 1e6) * raw)} of the raw script's whole round trip (${formatMs(1000 / raw)}): core's checks and encoding, the adapter's arguments and reply, and ADK's own appendEvent on the caller's session`;
}

function redisAppendsMissing({ results }: Run): string {
  return missing(results, ['redis'], ['append-sequential', 'append-concurrent']);
}

/** Workload 8: the Redis store's spread over the masters of a cluster, and its round trips there. */
function clusterOf(results: Results) {
  return results.clusters?.redis;
}

function clusterPhase(results: Results, name: string) {
  return clusterOf(results)?.phases.find((phase) => phase.name === name);
}

function clusterMissing({ results }: Run): string {
  return clusterOf(results)?.error ?? missing(results, ['redis']);
}

function clusterUsers({ results }: Run): string {
  return (results.options.sizes.clusterUsers ?? 0).toLocaleString('en-US');
}

/** The targets, in the order results.json lists them (the conversation's follow). */
const CHECKS: Row[] = [
  {
    id: 'redis-append-vs-raw',
    target: 'Redis appendEvent sequential ≥ 0.85× the raw round-trip rate',
    bound: 0.85,
    comparison: '>=',
    formula: 'adk-state Redis appendEvent/s (workload 1) ÷ Redis PING/s, both one request at a time',
    measure: ({ results }) => ratio(redisAppends(results, 'append-sequential'), probeRate(results, 'redis', 'PING')),
    whyMissing: ({ results }) => missing(results, ['redis'], ['append-sequential']),
    whyMissed: ({ results }) => {
      const ping = probeRate(results, 'redis', 'PING');
      const trips = roundTripsOf(results, 'redis', 'appendEvent');
      const cell = results.workloads.find((each) => each.id === 'append-sequential')?.cells.redis;
      const first = cell?.firstTenth?.median;
      const last = cell?.lastTenth?.median;
      const cpu = cell?.cpuPerEvent?.median;
      const script = probeRate(results, 'redis', RAW_SCRIPT_PROBE);
      const parts = [
        `An append with an app: key is ${trips ?? '?'} round trip(s)${trips !== undefined && trips > 1 ? " (one script in the user's slot, one in the app's)" : ''}, a PING one; besides the waiting, the difference is work: the scripts on the server (revision check, event, state buckets, indexes) and core's validation and encoding in this process.`,
      ];
      if (trips !== undefined && trips > 1) {
        parts.push(
          `Workload 1's every event carries an app: key, so its appends cannot pass ${formatRatio(1 / trips)} the PING rate in this layout; an append without app: keys is one round trip (workload 8 counts both).`,
        );
      }
      if (cpu !== undefined && ping !== undefined) {
        parts.push(
          `This process spends ${formatMs(cpu / 1000)} of CPU per append, ${formatRatio((cpu / 1e6) * ping)} of a PING's whole round trip (${formatMs(1000 / ping)}).`,
        );
      }
      if (script !== undefined && ping !== undefined) {
        parts.push(`A raw 3-command script, one at a time, runs at ${formatRatio(script / ping)} the PING rate.`);
      }
      if (first !== undefined && last !== undefined) {
        parts.push(
          `Within a sample the rate goes from ${formatRate(first)}/s over the first tenth of the events to ${formatRate(last)}/s over the last.`,
        );
      }
      if (!results.placement) {
        parts.push(
          'This run was not pinned: when the scheduler puts the bench and redis-server on one core, a PING is a context switch and runs several times faster than across cores, while an append still pays for its work.',
        );
      }
      return parts.join(' ');
    },
  },
  {
    id: 'redis-concurrent-vs-sequential',
    target: ({ sessions }) => `Redis appendEvent with ${sessions} concurrent sessions ≥ 4.5× its own sequential rate`,
    bound: 4.5,
    comparison: '>=',
    formula: ({ results, sessions }) =>
      `adk-state Redis appendEvent/s with ${sessions} sessions at once (workload 2) ÷ one session (workload 1); ceiling: a raw 3-command script from ${results.options.rawConcurrency} callers ÷ one at a time (${formatRatioOf(probeRatio(results, RAW_SCRIPT_PROBE))})`,
    measure: ({ results }) =>
      ratio(redisAppends(results, 'append-concurrent'), redisAppends(results, 'append-sequential')),
    whyMissing: redisAppendsMissing,
    whyMissed: ({ results }) => {
      const raw = probeRatio(results, 'PING');
      const script = probeRatio(results, RAW_SCRIPT_PROBE);
      return `The same client running a raw 3-command script reaches ${formatRatioOf(script)} from ${results.options.rawConcurrency} callers. With ${results.options.rawConcurrency} requests in flight even PING gains only ${raw === undefined ? '?' : formatRatio(raw)} over one at a time here: the bench and redis-server share ${results.machine.cores} cores, and the client-side work of each append is done on one thread.`;
    },
  },
  // The Redis store's append beside a raw script of the same round trip and the same commands from the
  // same client: what is left is this process's work per append (core, the adapter, ADK).
  {
    id: 'redis-append-vs-raw-append-script',
    target: 'Redis appendEvent sequential (one server, with an app: key) ≥ 0.9× a raw script of the same round trip',
    bound: 0.9,
    comparison: '>=',
    formula: `adk-state Redis appendEvent/s (workload 1) ÷ raw ${APPEND_SCRIPT_PROBE}/s, both one at a time from one client`,
    measure: ({ results }) =>
      ratio(redisAppends(results, 'append-sequential'), probeRate(results, 'redis', APPEND_SCRIPT_PROBE)),
    whyMissing: redisAppendsMissing,
    whyMissed: ({ results }) => `Both are one EVALSHA running the same commands on the server; ${appendWork(results)}.`,
  },
  {
    id: 'redis-concurrent-gain-vs-raw-append-script',
    target: ({ sessions }) =>
      `Redis appendEvent's gain from ${sessions} concurrent sessions ≥ 0.9× the raw append script's own gain`,
    bound: 0.9,
    comparison: '>=',
    formula: ({ results }) =>
      `(workload 2 ÷ workload 1) ÷ (raw ${APPEND_SCRIPT_PROBE} from ${results.options.rawConcurrency} callers ÷ one at a time)`,
    measure: ({ results }) =>
      ratio(
        ratio(redisAppends(results, 'append-concurrent'), redisAppends(results, 'append-sequential')),
        probeRatio(results, APPEND_SCRIPT_PROBE),
      ),
    whyMissing: redisAppendsMissing,
    whyMissed: ({ results }) =>
      `The raw script gains ${formatRatioOf(probeRatio(results, APPEND_SCRIPT_PROBE))} from many callers; the store gains less because ${appendWork(results)}, and with many callers in flight this process's one thread is the limit, not the server.`,
  },
  // Workload 8: the Redis store on a cluster.
  {
    id: 'redis-cluster-commands',
    target: (run) =>
      `Redis Cluster, 3 masters, ${clusterUsers(run)} users of one app: busiest master ≤ 1.2× the average commands (appends without app: keys)`,
    bound: 1.2,
    comparison: '<=',
    formula:
      'commands run by the busiest master ÷ the average over the masters, INFO commandstats over the phase (workload 8)',
    measure: ({ results }) => clusterPhase(results, 'appends without app: keys')?.busiestOverAverage,
    whyMissing: clusterMissing,
    whyMissed: ({ results }) => {
      const withApp = clusterPhase(results, 'appends with app: keys');
      return `The users' shards fall unevenly on the masters' slot ranges in this run; with app: keys the ratio is ${withApp ? formatRatio(withApp.busiestOverAverage) : '?'} (every such append also runs a script in the app's one slot).`;
    },
  },
  {
    id: 'redis-cluster-keys',
    target: (run) =>
      `Redis Cluster, 3 masters, ${clusterUsers(run)} users of one app: busiest master ≤ 1.25× the average keys`,
    bound: 1.25,
    comparison: '<=',
    formula: 'keys held by the busiest master ÷ the average over the masters, DBSIZE after workload 8',
    measure: ({ results }) => {
      const cluster = clusterOf(results);
      return cluster && Object.keys(cluster.keys).length > 0 ? cluster.keysBusiestOverAverage : undefined;
    },
    whyMissing: clusterMissing,
  },
  {
    id: 'redis-cluster-append-round-trips',
    target: 'Redis Cluster: an append without app: keys is 1 round trip',
    bound: 1,
    comparison: '<=',
    formula: "requests the masters received from the store's connections for one appendEvent (MONITOR, workload 8)",
    measure: ({ results }) => clusterOf(results)?.roundTrips['appendEvent without app: keys'],
    whyMissing: clusterMissing,
  },
  // Workload 3, one check per store of the run.
  {
    expand: ({ results }) =>
      results.targets.filter((each) => each.kind === 'store').map((info) => recentFlat(info.id, info.label)),
  },
  // Issue 14's bound for the Firestore store, which holds only on Google's emulator (the reference).
  {
    id: 'recent-flat-firestore-google',
    target: ({ recent, large, small }) =>
      `adk-state Firestore on Google's emulator: getSession (${recent} recent) at ${large} events ≤ 1.2× its time at ${small} events`,
    bound: 1.2,
    comparison: '<=',
    formula: ({ large, small }) =>
      `getSession time with ${large} events ÷ with ${small} events (workload 3), Firestore rows on Google's emulator`,
    measure: ({ results }) =>
      firestoreBackend(results).onGoogle
        ? ratio(median(results, 'recent-large', 'firestore'), median(results, 'recent-small', 'firestore'))
        : undefined,
    whyMissing: ({ results }) => {
      const { firestore, onGoogle } = firestoreBackend(results);
      return firestore && !onGoogle
        ? `the Firestore rows ran on ${firestore.details.split(' (')[0]}, not on Google's emulator (apt package google-cloud-cli-firestore-emulator)`
        : missing(results, ['firestore'], ['recent-small', 'recent-large']);
    },
    whyMissed: ({ results }, measured) => recentGrowthNote(results, 'firestore', measured),
  },
  {
    id: 'memory-vs-adk-in-memory',
    target: ({ recent, large }) =>
      `Memory store: getSession (${recent} recent) at ${large} events ≥ 1,000× faster than ADK's InMemorySessionService`,
    bound: 1_000,
    comparison: '>=',
    formula: ({ large }) =>
      `InMemorySessionService time ÷ adk-state memory time, getSession with ${large} events (workload 3)`,
    measure: ({ results }) =>
      ratio(median(results, 'recent-large', 'adk-in-memory'), median(results, 'recent-large', 'memory')),
    whyMissing: ({ results }) => missing(results, ['memory', 'adk-in-memory'], ['recent-large']),
    whyMissed: () =>
      'InMemorySessionService deep-copies the whole session before it keeps the last events; the memory store copies only the events it returns, so the ratio grows with the history: at this history length it stays under the bound.',
  },
  {
    id: 'memory-heap',
    target: 'Memory store: heap per event ≤ 2× its JSON size',
    bound: 2,
    comparison: '<=',
    formula: 'heap growth per stored event (after GC) ÷ mean JSON size of the stored event (workload 7)',
    measure: ({ results }) => {
      const heap = results.memory.memory;
      return ratio(heap?.bytesPerEvent?.median, heap?.jsonBytesPerEvent);
    },
    whyMissing: ({ results }) => results.memory.memory?.error ?? missing(results, ['memory']),
    whyMissed: () =>
      'Besides the JSON text, each event costs its id in the index map and a small record; for events this small the fixed part weighs more.',
  },
  {
    id: 'redis-vs-adk-postgresql',
    target: "Redis store appendEvent ≥ 40× the throughput of ADK's DatabaseSessionService on PostgreSQL",
    bound: 40,
    comparison: '>=',
    formula:
      'adk-state Redis appendEvent/s ÷ DatabaseSessionService (PostgreSQL) appendEvent/s, one session (workload 1)',
    measure: ({ results }) =>
      ratio(redisAppends(results, 'append-sequential'), median(results, 'append-sequential', 'adk-db-postgresql')),
    whyMissing: ({ results }) => missing(results, ['redis', 'adk-db-postgresql'], ['append-sequential']),
    whyMissed: ({ results }) => {
      const theirs = roundTripsOf(results, 'adk-db-postgresql', 'appendEvent');
      const ours = roundTripsOf(results, 'redis', 'appendEvent');
      return `DatabaseSessionService sends ${theirs ?? '?'} SQL statements per append, the Redis store ${ours ?? '?'} round trip(s); the remaining gap is the client-side work of each append in this process (see the first target).`;
    },
  },
];

export function evaluateChecks(results: Results): Check[] {
  const { sizes } = results.options;
  const run: Run = {
    results,
    recent: sizes.recentEvents ?? 10,
    large: (sizes.largeHistory ?? 0).toLocaleString('en-US'),
    small: (sizes.smallHistory ?? 0).toLocaleString('en-US'),
    sessions: sizes.concurrentSessions ?? 32,
  };
  const entries = CHECKS.flatMap((row) => ('expand' in row ? row.expand(run) : [row]));
  return [...entries.map((entry) => evaluate(entry, run)), ...conversationChecks(results)];
}
