/** The readable table printed on stdout. */

import { placementLine } from '../affinity.js';
import { machineLine } from '../machine.js';
import type { Results } from '../results.js';
import {
  CLIENT_CPU_TITLE,
  CONVERSATION_TITLE,
  clientCpuTable,
  conversationTable,
  SHORT_APPENDS_TITLE,
  shortAppendLines,
} from './conversation.js';
import {
  checkVerdict,
  growthRows,
  MEMORY_HEADER,
  memoryRows,
  probeRows,
  ROUND_TRIP_HEADER,
  ROUND_TRIP_NUMERIC,
  roundTripRows,
  type WorkloadColumns,
  type WorkloadRow,
  workloadAlignment,
  workloadCells,
  workloadHeader,
  workloadRows,
} from './format.js';
import {
  clusterOf,
  clusterRoundTrips,
  clusterTable,
  clusterTitle,
  REDIS_APPEND_HEADER,
  redisAppendRows,
} from './redis.js';

type Align = 'left' | 'right';

/** Plain-text columns, padded to the widest cell. */
export function textTable(header: string[], rows: string[][], align: Align[]): string {
  const widths = header.map((cell, column) =>
    Math.max([...cell].length, ...rows.map((row) => [...(row[column] ?? '')].length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => {
        const pad = ' '.repeat((widths[column] as number) - [...cell].length);
        return align[column] === 'right' ? pad + cell : cell + pad;
      })
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)]
    .map((text) => `  ${text}`)
    .join('\n');
}

function workloadTable(rows: WorkloadRow[], unit: string, columns: WorkloadColumns): string {
  const align = workloadAlignment(columns).map((right): Align => (right ? 'right' : 'left'));
  return textTable(
    workloadHeader(unit, columns),
    rows.map((row) => workloadCells(row, columns)),
    align,
  );
}

export function renderTable(results: Results): string {
  const out: string[] = [];
  out.push('adk-state bench');
  out.push(`  date     ${results.date}`);
  out.push(`  machine  ${machineLine(results.machine)}`);
  out.push(`  placed   ${placementLine(results.placement ?? undefined)}`);
  out.push(`  command  ${results.command}`);
  out.push(
    `  samples  ${results.options.repetitions} per figure after a warm-up, interleaved across targets; median and min – max${results.options.warmMs ? `; each after ${results.options.warmMs} ms of untimed work` : ''}`,
  );
  for (const backend of results.backends) out.push(`  backend  ${backend.details}`);
  for (const target of results.targets) {
    if (target.status === 'skipped') out.push(`  skipped  ${target.label}: ${target.reason}`);
    else if (target.details) out.push(`  note     ${target.label}: ${target.details}`);
  }
  out.push('');
  out.push('"vs" columns: how many times faster than that peer (higher is better).');
  out.push(
    '"last ÷ first tenth": append rate over the last tenth of a sample ÷ over its first tenth (1.0: no slowdown).',
  );

  for (const workload of results.workloads) {
    out.push('');
    const isAppend = workload.id.startsWith('append');
    const better = workload.unit === 'ms' ? 'time per call, lower is better' : 'events per second, higher is better';
    out.push(`${workload.title}  [${better}]`);
    const rows = workloadRows(results, workload);
    if (isAppend) rows.push(...probeRows(results, workload.id === 'append-concurrent'));
    out.push(workloadTable(rows, workload.unit, { events: isAppend, drift: workload.id === 'append-sequential' }));
  }

  const appendPath = redisAppendRows(results);
  if (appendPath.length > 0) {
    out.push('');
    out.push('Redis append path, this run (medians)');
    out.push(textTable(REDIS_APPEND_HEADER, appendPath, ['left', 'right', 'left']));
  }

  out.push('');
  out.push('3. growth with history: getSession (recent) time at the long history ÷ at the short one  [1.0 is flat]');
  out.push(textTable(['target', 'ratio'], growthRows(results), ['left', 'right']));

  out.push('');
  out.push('6. round trips per operation');
  out.push(
    textTable(
      ROUND_TRIP_HEADER,
      roundTripRows(results),
      ROUND_TRIP_NUMERIC.map((numeric): Align => (numeric ? 'right' : 'left')),
    ),
  );

  out.push('');
  out.push(
    `7. memory: heap bytes per stored event (after GC, ${results.options.sizes.memoryEvents?.toLocaleString('en-US')} events) against the event's JSON size`,
  );
  out.push(textTable(MEMORY_HEADER, memoryRows(results), ['left', 'right', 'right', 'right', 'right']));

  const cluster = clusterOf(results);
  if (cluster) {
    out.push('');
    out.push(clusterTitle(results) as string);
    if (cluster.error) out.push(`  failed: ${cluster.error}`);
    if (cluster.phases.length > 0) {
      const { header, rows } = clusterTable(cluster);
      out.push(
        textTable(
          header,
          rows,
          header.map((_, index): Align => (index === 0 ? 'left' : 'right')),
        ),
      );
    }
    out.push(`  ${clusterRoundTrips(cluster)}`);
  }

  const conversation = conversationTable(results);
  if (conversation) {
    out.push('');
    out.push(CONVERSATION_TITLE);
    const align = conversation.header.map((_, index): Align => (index === 0 ? 'left' : 'right'));
    out.push(textTable(conversation.header, conversation.rows, align));
  }

  const shortAppends = shortAppendLines(results);
  if (shortAppends.length > 0) {
    out.push('');
    out.push(SHORT_APPENDS_TITLE);
    for (const line of shortAppends) out.push(`  ${line}`);
  }

  const clientCpu = clientCpuTable(results);
  if (clientCpu) {
    out.push('');
    out.push(CLIENT_CPU_TITLE);
    const align = clientCpu.header.map((_, index): Align => (index > 0 && index < 6 ? 'right' : 'left'));
    out.push(textTable(clientCpu.header, clientCpu.rows, align));
  }

  out.push('');
  out.push('targets');
  for (const check of results.checks) {
    out.push(`  [${check.status === 'met' ? 'met' : check.status === 'missed' ? 'MISSED' : 'n/a'}] ${check.target}`);
    out.push(`        ${checkVerdict(check)}: ${check.formula}`);
    if (check.note) out.push(`        ${check.note}`);
  }
  out.push('');
  out.push(`done in ${results.durationSeconds.toFixed(1)} s`);
  return out.join('\n');
}
