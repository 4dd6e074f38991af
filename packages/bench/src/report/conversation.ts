/** Workload 9's figures as rows: store time per turn at each checkpoint, and Firestore's documents read. */
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
    'documents',
  ];
  const rows: string[][] = [];
  for (const target of results.targets) {
    const result = conversation[target.id];
    if (!result) continue;
    if (result.error) {
      rows.push([target.label, `failed: ${result.error}`, ...turns.map(() => ''), ''].slice(0, header.length));
      continue;
    }
    const byTurn = new Map(result.points.map((point) => [point.turn, point]));
    const first = result.points[0];
    const last = result.points[result.points.length - 1];
    const growth = first && last && first.storeMs.median > 0 ? last.storeMs.median / first.storeMs.median : undefined;
    const documents = result.points
      .filter((point) => point.documentsRead)
      .map((point) => `${point.documentsRead?.median} at ${point.turn.toLocaleString('en-US')}`)
      .join(', ');
    rows.push([
      target.label,
      ...turns.map((turn) => {
        const point = byTurn.get(turn);
        return point ? `${point.storeMs.median.toFixed(2)} ms` : '';
      }),
      growth === undefined ? '' : `${growth.toFixed(2)}×`,
      documents,
    ]);
  }
  return { header, rows };
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
