/** Number formats and the rows every report (terminal, markdown) shares. */
import type { Check, Results, WorkloadResult } from '../results.js';
import type { Summary } from '../stats.js';

export function formatRate(value: number): string {
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

export function formatMs(value: number): string {
  if (value < 0.01) return `${(value * 1000).toFixed(2)} µs`;
  if (value < 1) return `${(value * 1000).toFixed(0)} µs`;
  if (value < 10) return `${value.toFixed(2)} ms`;
  if (value < 100) return `${value.toFixed(1)} ms`;
  return `${Math.round(value).toLocaleString('en-US')} ms`;
}

export function formatRatio(value: number): string {
  if (value >= 100) return `${Math.round(value).toLocaleString('en-US')}×`;
  if (value >= 10) return `${value.toFixed(1)}×`;
  return `${value.toFixed(2)}×`;
}

export function formatBytes(value: number): string {
  return `${Math.round(value).toLocaleString('en-US')} B`;
}

export function formatValue(unit: WorkloadResult['unit'], value: number): string {
  return unit === 'ms' ? formatMs(value) : formatRate(value);
}

export function formatSpread(unit: WorkloadResult['unit'], summary: Summary): string {
  return `${formatValue(unit, summary.min)} – ${formatValue(unit, summary.max)}`;
}

/** The peers every figure is compared with, by target id. */
export const REFERENCES = [
  { id: 'adk-in-memory', header: 'vs ADK in-memory' },
  { id: 'adk-db-postgresql', header: 'vs ADK DB PostgreSQL' },
] as const;

/**
 * How many times faster `target` is than `reference` on a workload: rates
 * divide as they are, times the other way round. Undefined when either is missing.
 */
export function speedup(workload: WorkloadResult, target: string, reference: string): number | undefined {
  const mine = workload.cells[target]?.value?.median;
  const theirs = workload.cells[reference]?.value?.median;
  if (mine === undefined || theirs === undefined || mine === 0 || theirs === 0) return undefined;
  return workload.unit === 'ms' ? theirs / mine : mine / theirs;
}

/** One table row per target of a workload, formatted. */
export interface WorkloadRow {
  label: string;
  median: string;
  spread: string;
  /** Appends: events per sample. */
  events: string;
  /** Sequential appends: the rate over the last tenth of a sample ÷ over its first tenth. */
  drift: string;
  ratios: string[];
}

export function workloadRows(results: Results, workload: WorkloadResult): WorkloadRow[] {
  const rows: WorkloadRow[] = [];
  for (const target of results.targets) {
    if (target.status !== 'ok') continue;
    const cell = workload.cells[target.id];
    if (!cell) continue;
    if (cell.error || !cell.value) {
      rows.push({ label: target.label, median: 'failed', spread: cell.error ?? '', events: '', drift: '', ratios: [] });
      continue;
    }
    const events = cell.events
      ? cell.events.min === cell.events.max
        ? cell.events.median.toLocaleString('en-US')
        : `${cell.events.min.toLocaleString('en-US')}–${cell.events.max.toLocaleString('en-US')}`
      : '';
    rows.push({
      label: target.label,
      median: formatValue(workload.unit, cell.value.median),
      spread: formatSpread(workload.unit, cell.value),
      events,
      drift: cell.firstTenth && cell.lastTenth ? formatRatio(cell.lastTenth.median / cell.firstTenth.median) : '',
      ratios: REFERENCES.map(({ id }) => {
        const value = id === target.id ? undefined : speedup(workload, target.id, id);
        return value === undefined ? '' : formatRatio(value);
      }),
    });
  }
  return rows;
}

/** The raw round-trip rows shown under the append workloads. */
export function probeRows(results: Results, concurrent: boolean): WorkloadRow[] {
  const rows: WorkloadRow[] = [];
  for (const backend of results.backends) {
    for (const probe of backend.probes) {
      const summary = concurrent ? probe.concurrent : probe.sequential;
      rows.push({
        label: `raw ${backend.label} ${probe.name}${concurrent ? ` ×${results.options.rawConcurrency}` : ''}`,
        median: formatRate(summary.median),
        spread: formatSpread('events/s', summary),
        events: results.options.sizes.rawOps?.toLocaleString('en-US') ?? '',
        drift: '',
        ratios: [],
      });
    }
  }
  return rows;
}

export const ROUND_TRIP_OPERATIONS = [
  ['createSession', 'createSession'],
  ['appendEvent', 'appendEvent'],
  ['getSessionRecent', 'getSession (recent)'],
  ['getSessionWhole', 'getSession (whole)'],
  ['listSessions', 'listSessions'],
] as const;

/** The header of the round-trip table: the target, one column per counted operation, how it was counted. */
export const ROUND_TRIP_HEADER = ['target', ...ROUND_TRIP_OPERATIONS.map(([, title]) => title), 'counted as'];

/** Which round-trip columns hold numbers (right-aligned). */
export const ROUND_TRIP_NUMERIC = [false, ...ROUND_TRIP_OPERATIONS.map(() => true), false];

/** One row per measured target: round trips of each operation and what was counted. */
export function roundTripRows(results: Results): string[][] {
  return results.targets
    .filter((target) => target.status === 'ok')
    .map((target) => {
      const result = results.roundTrips[target.id];
      if (!result) return [target.label, ...ROUND_TRIP_OPERATIONS.map(() => ''), 'not counted'];
      return [
        target.label,
        ...ROUND_TRIP_OPERATIONS.map(([key]) => String(result.operations[key] ?? '–')),
        result.error ? `${result.unit} (failed: ${result.error})` : result.unit,
      ];
    });
}

export function checkVerdict(check: Check): string {
  if (check.status === 'not measured') return 'not measured';
  const measured = formatRatio(check.measured as number);
  return `${check.status} (${measured}, bound ${check.comparison} ${check.bound}×)`;
}

/** Size of the 3b/3a growth: the ratio the "cost grows with history" target reads. */
export function growth(results: Results, target: string): number | undefined {
  const large = results.workloads.find((each) => each.id === 'recent-large')?.cells[target]?.value?.median;
  const small = results.workloads.find((each) => each.id === 'recent-small')?.cells[target]?.value?.median;
  if (large === undefined || small === undefined || small === 0) return undefined;
  return large / small;
}

/** One row per measured target: its growth with history, or n/a. */
export function growthRows(results: Results): string[][] {
  return results.targets
    .filter((target) => target.status === 'ok')
    .map((target) => {
      const value = growth(results, target.id);
      return [target.label, value === undefined ? 'n/a' : formatRatio(value)];
    });
}

/** The columns of a workload table: which of the optional ones it has. */
export interface WorkloadColumns {
  events: boolean;
  drift: boolean;
}

export function workloadHeader(unit: string, columns: WorkloadColumns): string[] {
  return [
    'target',
    `median ${unit}`,
    'min – max',
    ...(columns.events ? ['events/sample'] : []),
    ...(columns.drift ? ['last ÷ first tenth'] : []),
    ...REFERENCES.map((reference) => reference.header),
  ];
}

export function workloadCells(row: WorkloadRow, columns: WorkloadColumns): string[] {
  return [
    row.label,
    row.median,
    row.spread,
    ...(columns.events ? [row.events] : []),
    ...(columns.drift ? [row.drift] : []),
    ...REFERENCES.map((_, index) => row.ratios[index] ?? ''),
  ];
}

/** Which cells are numbers (right-aligned). */
export function workloadAlignment(columns: WorkloadColumns): boolean[] {
  return workloadHeader('', columns).map((_, index) => index > 0);
}

/** The header of the memory workload's table (workload 7). */
export const MEMORY_HEADER = ['target', 'heap/event', 'min – max', 'JSON/event', 'heap ÷ JSON'];

/** One row per target of the memory workload: heap bytes per event against the event's JSON size. */
export function memoryRows(results: Results): string[][] {
  return Object.entries(results.memory).map(([id, memory]) => {
    const name = results.targets.find((target) => target.id === id)?.label ?? id;
    if (!memory.bytesPerEvent || memory.jsonBytesPerEvent === undefined) {
      return [name, 'failed', memory.error ?? '', '', ''];
    }
    return [
      name,
      formatBytes(memory.bytesPerEvent.median),
      `${formatBytes(memory.bytesPerEvent.min)} – ${formatBytes(memory.bytesPerEvent.max)}`,
      formatBytes(memory.jsonBytesPerEvent),
      formatRatio(memory.bytesPerEvent.median / memory.jsonBytesPerEvent),
    ];
  });
}
