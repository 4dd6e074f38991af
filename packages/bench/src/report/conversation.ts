/** Workload 9's figures as rows: store time per turn at each checkpoint, and Firestore's documents read. */
import type { ConversationPoint, ConversationResult } from '../conversation.js';
import type { Results } from '../results.js';

export const CONVERSATION_TITLE =
  "9. conversation through ADK's Runner: ms inside the session service per turn (median of 5 turns), documents read per turn";

/** The header and rows, or undefined when the run has no conversation. */
export function conversationTable(results: Results): { header: string[]; rows: string[][] } | undefined {
  const conversation = results.conversation;
  if (!conversation || Object.keys(conversation).length === 0) return undefined;
  const turns = [
    ...new Set(Object.values(conversation).flatMap((each) => each.points.map((point) => point.turn))),
  ].sort((a, b) => a - b);
  const header = [
    'target',
    ...turns.map((turn) => `turn ${turn.toLocaleString('en-US')}`),
    'last ÷ first',
    'last ÷ first, net of GC pauses',
    "loop's pending work, untimed",
    'documents',
  ];
  const rows: string[][] = [];
  const row = (label: string, result: ConversationResult): string[] => {
    if (result.error) return [label, `failed: ${result.error}`, ...header.slice(2).map(() => '')];
    const byTurn = new Map(result.points.map((point) => [point.turn, point]));
    const first = result.points[0];
    const last = result.points[result.points.length - 1];
    const growth = first && last && first.storeMs.median > 0 ? last.storeMs.median / first.storeMs.median : undefined;
    const net = netGrowth(first, last);
    const documents = result.points
      .filter((point) => point.documentsRead)
      .map((point) => `${point.documentsRead?.median} at ${point.turn.toLocaleString('en-US')}`)
      .join(', ');
    return [
      label,
      ...turns.map((turn) => {
        const point = byTurn.get(turn);
        return point ? `${point.storeMs.median.toFixed(2)} ms` : '';
      }),
      growth === undefined ? '' : `${growth.toFixed(2)}×`,
      net === undefined
        ? ''
        : `${net.toFixed(2)}× (${first?.storeMsNetOfGc?.median.toFixed(2)} → ${last?.storeMsNetOfGc?.median.toFixed(2)} ms)`,
      first?.pendingMs && last?.pendingMs
        ? `${first.pendingMs.median.toFixed(2)} → ${last.pendingMs.median.toFixed(2)} ms`
        : '',
      documents,
    ];
  };
  for (const target of results.targets) {
    const result = conversation[target.id];
    if (result) rows.push(row(target.label, result));
    const shared = results.conversationShared?.[target.id];
    if (shared) rows.push(row(`${target.label}, shareReadEvents`, shared));
  }
  return { header, rows };
}

/** Store time at `last` ÷ at `first`, less the collector's pauses inside the store's calls; undefined without the figures. */
export function netGrowth(
  first: ConversationPoint | undefined,
  last: ConversationPoint | undefined,
): number | undefined {
  const from = first?.storeMsNetOfGc?.median;
  const to = last?.storeMsNetOfGc?.median;
  return from !== undefined && to !== undefined && from > 0 ? to / from : undefined;
}

/** Workload 10 as one line per target (appends per second, median and min – max), or none. */
export function shortAppendLines(results: Results): string[] {
  const figures = results.shortAppends;
  if (!figures) return [];
  return results.targets
    .filter((target) => figures[target.id])
    .map((target) => {
      const summary = figures[target.id];
      const range = summary ? `${Math.round(summary.min)} – ${Math.round(summary.max)}` : '';
      return `${target.label}: ${Math.round(summary?.median ?? 0)} appends/s (${range})`;
    });
}

export const SHORT_APPENDS_TITLE =
  '10. appendEvent on sessions that hold 10 events (5,000 sessions, --quick 1,000; one append each)';

export const CLIENT_CPU_TITLE =
  '11. client CPU per operation on the Redis store, beside the same round trips sent raw from the same process (µs of process CPU per call, median)';

/** Workload 11's rows, one per operation of every target that measured it, or undefined when none did. */
export function clientCpuTable(results: Results): { header: string[]; rows: string[][] } | undefined {
  const figures = results.clientCpu;
  if (!figures || Object.keys(figures).length === 0) return undefined;
  const header = ['operation', 'store CPU µs', 'raw CPU µs', 'store ÷ raw', 'store ms', 'raw ms', 'raw side'];
  const rows: string[][] = [];
  for (const target of results.targets) {
    const result = figures[target.id];
    if (!result) continue;
    if (result.error) {
      rows.push([`${target.label}: failed: ${result.error}`, '', '', '', '', '', '']);
      continue;
    }
    for (const row of result.rows) {
      const store = row.storeCpuMicros.median;
      const raw = row.rawCpuMicros.median;
      rows.push([
        row.operation,
        store.toFixed(0),
        raw.toFixed(0),
        raw > 0 ? `${(store / raw).toFixed(2)}×` : '',
        row.storeMs.median.toFixed(3),
        row.rawMs.median.toFixed(3),
        row.raw,
      ]);
    }
  }
  return { header, rows };
}
