/**
 * The conversation's targets (workload 9): a turn at turn 1,000 costs the
 * store about what it costs at turn 10, and on Firestore it reads about as
 * many documents.
 */
import type { ConversationPoint } from './conversation.js';
import { netGrowth } from './report/conversation.js';
import { formatRatio } from './report/format.js';
import type { Check, Results } from './results.js';

const STORES: Record<string, string> = {
  memory: 'memory',
  redis: 'Redis',
  mongodb: 'MongoDB',
  firestore: 'Firestore',
};

/** The copies' share of the growth, where the run shows it. */
const COPIES: Record<string, string> = {
  memory: 'The in-process store hands over only the new events; the whole growth is those copies. ',
};

/** What grows with the history besides the copies, where the run shows it. */
const GROWTH: Record<string, string> = {
  mongodb:
    "The bench runs the adapter's MongoDB stand-in, which serves the read's position and revision ranges from the session_seq and session_rev indexes in order, as a mongod does, and so examines only the new events. ",
  firestore:
    "Compare the documents read per turn (the next target): the store reads only the new event documents. Both emulators answer the read's query (event revision above the held one) by scanning the session's events, where Firestore walks its single-field index.",
};

function pointAt(results: Results, target: string, turn: number, shared = false): ConversationPoint | undefined {
  const source = shared ? results.conversationShared : results.conversation;
  return source?.[target]?.points.find((point) => point.turn === turn);
}

function notMeasured(results: Results, target: string, late: number, shared = false): string {
  const info = results.targets.find((each) => each.id === target);
  if (!info) return `${target} was not part of this run`;
  if (info.status === 'skipped') return `${info.label} was skipped: ${info.reason}`;
  const result = (shared ? results.conversationShared : results.conversation)?.[target];
  if (!result) return `no conversation ran on ${info.label}${shared ? ' with shareReadEvents' : ''}`;
  if (result.error) return `the conversation failed on ${info.label}: ${result.error}`;
  return `the conversation ran ${result.turns} turns, not ${late}`;
}

function evaluate(
  base: Omit<Check, 'status' | 'measured' | 'note'>,
  measured: number | undefined,
  why: () => string,
  missed: (value: number) => string,
): Check {
  if (measured === undefined || !Number.isFinite(measured)) return { ...base, status: 'not measured', note: why() };
  const met = base.comparison === '>=' ? measured >= base.bound : measured <= base.bound;
  return { ...base, status: met ? 'met' : 'missed', measured, ...(met ? {} : { note: missed(measured) }) };
}

function shortAppendsMissing(results: Results): string {
  const reasons = ['memory', 'adk-in-memory'].map((id) => {
    const info = results.targets.find((each) => each.id === id);
    if (!info) return `${id} was not part of this run`;
    if (info.status === 'skipped') return `${info.label} was skipped: ${info.reason}`;
    return results.shortAppends?.[id] ? undefined : `workload 10 failed on ${info.label} (see the run's log)`;
  });
  return reasons.filter((reason) => reason !== undefined).join('; ') || 'a figure is missing';
}

export function conversationChecks(results: Results): Check[] {
  const checks: Check[] = [];
  const early = 10;
  const late = 1_000;
  for (const shared of [false, true]) {
    for (const [target, name] of Object.entries(STORES)) {
      const first = pointAt(results, target, early, shared);
      const last = pointAt(results, target, late, shared);
      const ratio = first && last && first.storeMs.median > 0 ? last.storeMs.median / first.storeMs.median : undefined;
      const net = netGrowth(first, last);
      const netFigures =
        net === undefined
          ? ''
          : `; less the garbage collector's pauses that fell inside the store's calls, ${first?.storeMsNetOfGc?.median.toFixed(2)} ms and ${last?.storeMsNetOfGc?.median.toFixed(2)} ms (${formatRatio(net)}): the collector runs when the heap asks, and at turn ${late} the Runner's own work on ${last?.events} events fills it`;
      const pendingFigures =
        first?.pendingMs && last?.pendingMs
          ? `. Not in these figures, the work the event loop had waiting when the calls began (run first, untimed: mostly the collector's scavenge tasks, whose cost grows with all that is young and alive, the Runner's request and the store's own copies alike; they would otherwise run inside the first call that waits on the loop): ${first.pendingMs.median.toFixed(2)} ms a turn at turn ${early}, ${last.pendingMs.median.toFixed(2)} ms at turn ${late}`
          : '';
      const figures = `${first?.storeMs.median.toFixed(2)} ms at turn ${early} (${first?.events} events), ${last?.storeMs.median.toFixed(2)} ms at turn ${late} (${last?.events} events)${netFigures}${pendingFigures}`;
      checks.push(
        evaluate(
          {
            id: `conversation-growth-${target}${shared ? '-shared' : ''}`,
            target: `${name}${shared ? ' with shareReadEvents' : ''}: store time per turn at turn 1,000 ≤ 1.5× turn 10 (conversation through ADK's Runner)`,
            bound: 1.5,
            comparison: '<=',
            formula: `median ms inside the session service per turn, each call timed once the event loop has turned (the work it had waiting runs first, untimed), turns ${late - 4}–${late} ÷ turns ${early - 4}–${early} (workload 9${shared ? ', a service made with shareReadEvents: true' : ''})`,
          },
          ratio,
          () => notMeasured(results, target, late, shared),
          (value) =>
            shared
              ? `${formatRatio(value)}: ${figures}. Whole reads hand out the cached events themselves (frozen): no copy grows with the history. Timed alone, without the Runner, the memory store's own read and appends do not grow with the history (packages/bench/README.md, "The conversation"); what grows here comes with the heap the Runner fills (the collector's work done inside the store's own allocations, which is not reported as a pause, and colder caches). ${GROWTH[target] ?? ''}`
              : `${formatRatio(value)}: ${figures}. The store reads only the new events of a session it read before, and the service keeps that log decoded, but by default every whole getSession hands out its own deep copy of every event (no two reads share an object): those copies, and the garbage they leave, grow with the history. With shareReadEvents (the target below) reads share the cached events, frozen. ${COPIES[target] ?? ''}${GROWTH[target] ?? ''}`,
        ),
      );
    }
  }
  const first = pointAt(results, 'firestore', early)?.documentsRead;
  const last = pointAt(results, 'firestore', late)?.documentsRead;
  checks.push(
    evaluate(
      {
        id: 'conversation-documents-firestore',
        target: 'Firestore: documents read per turn at turn 1,000 ≤ 2× turn 10',
        bound: 2,
        comparison: '<=',
        formula: `median documents the client received per turn, turns ${late - 4}–${late} ÷ turns ${early - 4}–${early} (workload 9)`,
      },
      first && last && first.median > 0 ? last.median / first.median : undefined,
      () => notMeasured(results, 'firestore', late),
      (value) =>
        `${formatRatio(value)}: ${first?.median} documents per turn at turn ${early}, ${last?.median} at turn ${late}.`,
    ),
  );
  const memory = results.shortAppends?.memory?.median;
  const adk = results.shortAppends?.['adk-in-memory']?.median;
  checks.push(
    evaluate(
      {
        id: 'memory-append-vs-adk-in-memory',
        target: "Memory store: appendEvent on a 10-event session ≥ 1.0× ADK's InMemorySessionService",
        bound: 1,
        comparison: '>=',
        formula:
          'adk-state memory appends/s ÷ InMemorySessionService appends/s, one append on each of 5,000 sessions (--quick: 1,000) holding 10 events (workload 10)',
      },
      memory !== undefined && adk !== undefined && adk > 0 ? memory / adk : undefined,
      () => shortAppendsMissing(results),
      (value) =>
        `${formatRatio(value)}: the memory store checks every value and encodes the event as JSON text (what it keeps, and what a read hands out copies of), and applies ADK's write-order rules to its record of stored writes; InMemorySessionService keeps the event object itself. See "Core's cost per call" in packages/bench/README.md for the profile.`,
    ),
  );
  return checks;
}
