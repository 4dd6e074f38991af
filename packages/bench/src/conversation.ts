/**
 * Workload 9: a conversation through ADK's `Runner`, turn after turn on one
 * session. Each turn the Runner reads the whole session (`getSession` with no
 * filter), a scripted model calls a tool that writes a `user:` and a session
 * key through the tool context's state, and answers with text that
 * `outputKey` stores: four events appended per turn. The store time of a
 * turn is the time spent inside the session service's methods during it;
 * the model and the Runner's own work are left out, and so is the work the
 * event loop had waiting when a call began (see {@link timed}).
 */
import { PerformanceObserver } from 'node:perf_hooks';
import {
  BaseLlm,
  type BaseLlmConnection,
  type BaseSessionService,
  type Context,
  FunctionTool,
  LlmAgent,
  type LlmRequest,
  type LlmResponse,
  Runner,
} from '@google/adk';
import type { Summary } from './stats.js';
import { summarize } from './stats.js';

/** Figures at one turn number. */
export interface ConversationPoint {
  turn: number;
  /** Milliseconds inside the session service during a turn, over the turns just before and at `turn`. */
  storeMs: Summary;
  /**
   * The same, less the garbage collector's pauses that fell inside the
   * service's calls (the collector runs when the heap asks, whoever filled
   * it: the Runner's own work of a long conversation lands in the store's
   * calls too); absent in older results.
   */
  storeMsNetOfGc?: Summary;
  /**
   * Milliseconds per turn of the work the event loop had waiting when the
   * service's calls began (run before each call's clock starts, see
   * {@link timed}): mostly the collector's scavenge tasks. A store that put
   * work of its own off to a later turn of the loop would have it counted
   * here. Absent in older results, whose `storeMs` included it.
   */
  pendingMs?: Summary;
  /** Backend documents (Firestore) read per turn, over the same turns; absent when not counted. */
  documentsRead?: Summary;
  /** Events in the session at the start of the turn. */
  events: number;
}

export interface ConversationResult {
  turns: number;
  points: ConversationPoint[];
  error?: string;
}

/** How many turns before and at each checkpoint are summarized. */
const WINDOW = 5;

/** The model: a tool call on the user's message, text once the tool answered. */
class ConversationModel extends BaseLlm {
  constructor() {
    super({ model: 'bench-conversation-model' });
  }

  override async *generateContentAsync(request: LlmRequest): AsyncGenerator<LlmResponse, void> {
    const last = request.contents?.[request.contents.length - 1];
    const answered = last?.parts?.some((part) => part.functionResponse !== undefined) === true;
    if (answered) {
      yield { content: { role: 'model', parts: [{ text: 'Noted, thank you.' }] }, turnComplete: true };
    } else {
      const call = { name: 'take_note', args: { note: 'the user said something' } };
      yield { content: { role: 'model', parts: [{ functionCall: call }] }, turnComplete: true };
    }
  }

  override async connect(_request: LlmRequest): Promise<BaseLlmConnection> {
    throw new Error('the bench model has no live connection');
  }
}

/** Time spent in the service's calls during a turn, and when each call ran. */
interface Spent {
  ms: number;
  /** The work the event loop had waiting, run before each call's clock started. */
  pendingMs: number;
  /** Start and end (performance.now()) of each call of the turn. */
  calls: [number, number][];
}

/**
 * Resolves once the event loop has been through its I/O phase, so that the
 * tasks V8 posted to it (a scavenge the young generation asked for, say)
 * have run. From a callback of any phase, a second `setImmediate` is only
 * reached after a poll.
 */
async function loopTurn(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
}

/**
 * A view of `service` whose methods add the time they take to `spent`
 * (the Runner gets this view; the service itself is unchanged).
 *
 * Each call first lets the event loop turn, untimed (its time goes to
 * `spent.pendingMs`). The Runner's work between two calls (building a
 * request from every event, at turn 1,000 from 4,000) never yields to the
 * loop, so the tasks V8 posts meanwhile wait for the first call that does:
 * a store's wait on its round trip. Measured with `--trace-gc` on the Redis
 * store, every scavenge of the last turns of a 1,000-turn conversation was a
 * scavenge task, two a turn at about 1.7 ms each, moving the Runner's live
 * request, and all of them ran inside appendEvent's wait; the in-process
 * stores, which never yield, were never charged with them.
 */
function timed(service: BaseSessionService, spent: Spent): BaseSessionService {
  return new Proxy(service, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const settling = performance.now();
        await loopTurn();
        const started = performance.now();
        spent.pendingMs += started - settling;
        try {
          return await value.apply(target, args);
        } finally {
          const ended = performance.now();
          spent.ms += ended - started;
          spent.calls.push([started, ended]);
        }
      };
    },
  });
}

/**
 * Runs `turns` turns of one conversation on `service` and summarizes the
 * store time (and, with `documents`, the documents read) of the turns at
 * each checkpoint. The agent's prompt holds only the last few events
 * (`includeContents: 'none'` would leave the model nothing to answer from).
 */
export async function runConversation(
  service: BaseSessionService,
  appName: string,
  turns: number,
  checkpoints: readonly number[],
  documents?: () => number,
): Promise<ConversationResult> {
  const spent: Spent = { ms: 0, pendingMs: 0, calls: [] };
  let turnNumber = 0;
  const tool = new FunctionTool({
    name: 'take_note',
    description: 'Keeps a note in the state.',
    execute: (_input: unknown, context?: Context) => {
      context?.state.set('user:notes', turnNumber);
      context?.state.set('turns', turnNumber);
      return { ok: true };
    },
  });
  const agent = new LlmAgent({
    name: 'bench_agent',
    model: new ConversationModel(),
    instruction: 'Take a note of what the user says.',
    tools: [tool],
    outputKey: 'last_reply',
    disallowTransferToParent: true,
    disallowTransferToPeers: true,
  });
  const runner = new Runner({ appName, agent, sessionService: timed(service, spent) });
  const userId = 'bench-user';
  const session = await service.createSession({ appName, userId });
  const wanted = new Set<number>();
  for (const checkpoint of checkpoints) {
    for (let turn = Math.max(1, checkpoint - WINDOW + 1); turn <= checkpoint; turn++) wanted.add(turn);
  }
  const store = new Map<number, number>();
  const storeNet = new Map<number, number>();
  const pending = new Map<number, number>();
  const docs = new Map<number, number>();
  const eventsAt = new Map<number, number>();
  let events = 0;
  const pauses = collectorPauses();
  try {
    for (turnNumber = 1; turnNumber <= turns; turnNumber++) {
      spent.ms = 0;
      spent.pendingMs = 0;
      spent.calls = [];
      const documentsBefore = documents?.() ?? 0;
      for await (const event of runner.runAsync({
        userId,
        sessionId: session.id,
        newMessage: { role: 'user', parts: [{ text: `message ${turnNumber}` }] },
      })) {
        if (event.partial !== true) events++;
      }
      events++; // the user's message
      const paused = await pauses.within(spent.calls);
      if (wanted.has(turnNumber)) {
        store.set(turnNumber, spent.ms);
        storeNet.set(turnNumber, spent.ms - paused);
        pending.set(turnNumber, spent.pendingMs);
        if (documents) docs.set(turnNumber, documents() - documentsBefore);
        eventsAt.set(turnNumber, events);
      }
    }
  } finally {
    pauses.stop();
  }
  const final = await service.getSession({ appName, userId, sessionId: session.id });
  if (final?.state.turns !== turns || final.state['user:notes'] !== turns || final.state.last_reply === undefined) {
    throw new Error('the conversation did not leave the state its tool and outputKey wrote');
  }
  const points = checkpoints
    .filter((checkpoint) => checkpoint <= turns)
    .map((turn): ConversationPoint => {
      const window = [...store.keys()].filter((each) => each <= turn && each > turn - WINDOW);
      const point: ConversationPoint = {
        turn,
        storeMs: summarize(window.map((each) => store.get(each) as number)),
        storeMsNetOfGc: summarize(window.map((each) => storeNet.get(each) as number)),
        pendingMs: summarize(window.map((each) => pending.get(each) as number)),
        events: eventsAt.get(turn) ?? 0,
      };
      if (documents) point.documentsRead = summarize(window.map((each) => docs.get(each) as number));
      return point;
    });
  return { turns, points };
}

/**
 * The garbage collector's pauses as they happen (`gc` performance entries),
 * and how much of them fell inside given intervals.
 */
function collectorPauses() {
  let pauses: [number, number][] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push([entry.startTime, entry.startTime + entry.duration]);
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    /** Milliseconds of pause inside `intervals`; forgets the pauses seen so far. */
    async within(intervals: readonly [number, number][]): Promise<number> {
      // Entries are delivered after the pause: let the last ones of the turn arrive.
      await new Promise((resolve) => setImmediate(resolve));
      for (const entry of observer.takeRecords()) pauses.push([entry.startTime, entry.startTime + entry.duration]);
      let inside = 0;
      for (const [from, to] of intervals) {
        for (const [start, end] of pauses) inside += Math.max(0, Math.min(to, end) - Math.max(from, start));
      }
      pauses = [];
      return inside;
    },
    stop(): void {
      observer.disconnect();
    },
  };
}
