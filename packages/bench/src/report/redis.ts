/**
 * The Redis sections every report (terminal, markdown) shares: the append
 * path against the wire (ratios of one run, client CPU per append) and
 * workload 8, the store on a cluster of masters.
 */
import { RAW_SCRIPT_PROBE } from '../backends/redis.js';
import type { ClusterResult, Results } from '../results.js';
import { formatMs, formatRatio } from './format.js';

export const REDIS_APPEND_HEADER = ['figure', 'measured', 'target'];

function rate(results: Results, workload: string, target: string): number | undefined {
  return results.workloads.find((each) => each.id === workload)?.cells[target]?.value?.median;
}

function probe(results: Results, name: string) {
  return results.backends.find((each) => each.id === 'redis')?.probes.find((each) => each.name === name);
}

function show(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? 'n/a' : formatRatio(value);
}

/** The append path of the Redis store from one run: against PING, concurrency, and the raw script beside it. */
export function redisAppendRows(results: Results): string[][] {
  const sequential = rate(results, 'append-sequential', 'redis');
  const concurrent = rate(results, 'append-concurrent', 'redis');
  if (sequential === undefined && concurrent === undefined) return [];
  const ping = probe(results, 'PING');
  const script = probe(results, RAW_SCRIPT_PROBE);
  const n = results.options.rawConcurrency;
  const sessions = results.options.sizes.concurrentSessions ?? n;
  const div = (a: number | undefined, b: number | undefined) =>
    a === undefined || b === undefined || b === 0 ? undefined : a / b;
  const cpu = results.workloads.find((each) => each.id === 'append-sequential')?.cells.redis?.cpuPerEvent;
  return [
    ['appendEvent sequential ÷ PING sequential', show(div(sequential, ping?.sequential.median)), '≥ 0.85×'],
    [
      `raw script (3 commands) sequential ÷ PING sequential`,
      show(div(script?.sequential.median, ping?.sequential.median)),
      '',
    ],
    [`appendEvent ${sessions} sessions at once ÷ sequential`, show(div(concurrent, sequential)), '≥ 4.5×'],
    [
      `raw script (3 commands) ${n} callers ÷ sequential (ceiling)`,
      show(div(script?.concurrent.median, script?.sequential.median)),
      '',
    ],
    [`PING ${n} callers ÷ sequential`, show(div(ping?.concurrent.median, ping?.sequential.median)), ''],
    [
      'client CPU per sequential append (user + system)',
      cpu ? `${formatMs(cpu.median / 1000)} (${formatMs(cpu.min / 1000)} – ${formatMs(cpu.max / 1000)})` : 'n/a',
      '',
    ],
  ];
}

export function clusterOf(results: Results): ClusterResult | undefined {
  return results.clusters?.redis;
}

/** The title of workload 8, or undefined when it did not run. */
export function clusterTitle(results: Results): string | undefined {
  const cluster = clusterOf(results);
  if (!cluster) return undefined;
  const sizes = results.options.sizes;
  return `8. Redis Cluster, ${cluster.masters} masters: ${(sizes.clusterUsers ?? cluster.users).toLocaleString('en-US')} users of one app (shards: ${cluster.shards}), ${sizes.clusterAppends} appends per user per phase, ${sizes.concurrentSessions} callers`;
}

/** Per master: commands run in each phase and keys held; the last row is busiest ÷ average. */
export function clusterTable(cluster: ClusterResult): { header: string[]; rows: string[][] } {
  const masters = Object.keys(cluster.keys);
  const header = ['master', ...cluster.phases.map((phase) => `commands, ${phase.name}`), 'keys'];
  const rows = masters.map((master) => [
    master,
    ...cluster.phases.map((phase) => (phase.commands[master] ?? 0).toLocaleString('en-US')),
    (cluster.keys[master] ?? 0).toLocaleString('en-US'),
  ]);
  rows.push([
    'busiest ÷ average',
    ...cluster.phases.map((phase) => formatRatio(phase.busiestOverAverage)),
    formatRatio(cluster.keysBusiestOverAverage),
  ]);
  return { header, rows };
}

/** One line: the round trips of each kind of operation counted on the cluster. */
export function clusterRoundTrips(cluster: ClusterResult): string {
  const parts = Object.entries(cluster.roundTrips).map(([operation, trips]) => `${operation}: ${trips}`);
  return parts.length > 0
    ? `round trips (requests the masters received from the store's connections): ${parts.join('; ')}`
    : 'round trips not counted';
}
