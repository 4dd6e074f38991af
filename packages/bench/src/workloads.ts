/**
 * The workloads, each a plain function on a `BaseSessionService`, so that the
 * same code measures adk-state stores and `@google/adk`'s own services. One
 * call is one sample; the runner repeats, interleaves and summarizes them.
 */
import type { BaseSessionService, Session } from '@google/adk';
import { runConcurrently } from './backends/process.js';
import type { Probe } from './backends/types.js';
import { benchEvent, benchEvents } from './events.js';
import { historyEvents, sessionState } from './seed-data.js';
import { nowMs } from './stats.js';
import type { RoundTripCounter, Seeder, SessionKey } from './targets/types.js';

/** One sample of an append workload. */
export interface AppendSample {
  eventsPerSecond: number;
  /** Events appended (fewer than asked when the sample hit its time limit). */
  events: number;
  /** Sequential only: the rate over the first and the last tenth of the events appended. */
  firstTenthPerSecond?: number;
  lastTenthPerSecond?: number;
  /** Sequential only: CPU time of this process (user + system) per event appended, in microseconds. */
  cpuMicrosPerEvent?: number;
}

export interface AppendParams {
  /** A name no other sample uses: every sample starts from empty sessions. */
  appName: string;
  events: number;
  /** Stop early after this long. */
  maxMs: number;
  /** Untimed appends first, for this long, on sessions of their own (see {@link warmUp}); default none. */
  warmMs?: number;
}

/**
 * Runs `step` untimed from `workers` loops at once, each at least once and
 * then until `ms` have passed. Every sample follows a forced collection,
 * which deoptimizes code the sample runs; this lets that code be optimized
 * again before the sample's clock starts.
 */
export async function warmUp(
  ms: number,
  workers: number,
  step: (worker: number, round: number) => Promise<unknown>,
): Promise<void> {
  if (ms <= 0) return;
  const end = nowMs() + ms;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      let round = 0;
      do await step(worker, round++);
      while (nowMs() < end);
    }),
  );
}

/**
 * Appends to `sessions` sessions of their own (users `warm-*`) for `ms`, so
 * that the sample's sessions start as they would have without it.
 */
async function warmAppends(service: BaseSessionService, appName: string, sessions: number, ms: number) {
  if (ms <= 0) return;
  const warm: Session[] = [];
  for (let index = 0; index < sessions; index++) {
    warm.push(await service.createSession({ appName, userId: `warm-${index}`, state: sessionState() }));
  }
  await warmUp(ms, sessions, (worker, round) =>
    service.appendEvent({ session: warm[worker] as Session, event: benchEvent(round, `${appName}-warm-${worker}`) }),
  );
}

/** Workload 1: one session, `events` appends one after the other. */
export async function appendSequential(service: BaseSessionService, params: AppendParams): Promise<AppendSample> {
  const session = await service.createSession({ appName: params.appName, userId: 'user-0', state: sessionState() });
  const events = benchEvents(params.events, `${params.appName}-invocation`);
  await warmAppends(service, params.appName, 1, params.warmMs ?? 0);
  const start = nowMs();
  const deadline = start + params.maxMs;
  /** When each event's append ended. */
  const ends: number[] = [];
  const cpuBefore = process.cpuUsage();
  for (const event of events) {
    await service.appendEvent({ session, event });
    ends.push(nowMs());
    if ((ends[ends.length - 1] as number) > deadline) break;
  }
  const cpu = process.cpuUsage(cpuBefore);
  const done = ends.length;
  const tenth = Math.max(1, Math.floor(done / 10));
  const rate = (count: number, from: number, to: number) => (count / (to - from)) * 1000;
  return {
    eventsPerSecond: rate(done, start, ends[done - 1] as number),
    events: done,
    firstTenthPerSecond: rate(tenth, start, ends[tenth - 1] as number),
    lastTenthPerSecond: rate(tenth, ends[done - tenth - 1] ?? start, ends[done - 1] as number),
    cpuMicrosPerEvent: (cpu.user + cpu.system) / done,
  };
}

/** Sessions the warm-up of workload 2 appends to at once. */
const WARM_SESSIONS = 8;

/** Workload 2: `sessions` sessions (one user each) appending at once through one service; `events` in all. */
export async function appendConcurrent(
  service: BaseSessionService,
  params: AppendParams & { sessions: number },
): Promise<AppendSample> {
  const sessions: Session[] = [];
  for (let index = 0; index < params.sessions; index++) {
    // One by one: DatabaseSessionService fails when two calls create the same app's first row at once.
    sessions.push(
      await service.createSession({ appName: params.appName, userId: `user-${index}`, state: sessionState() }),
    );
  }
  const batches = sessions.map((_, index) => {
    const share = Math.floor(params.events / params.sessions) + (index < params.events % params.sessions ? 1 : 0);
    return benchEvents(share, `${params.appName}-invocation-${index}`);
  });
  await warmAppends(service, params.appName, Math.min(WARM_SESSIONS, params.sessions), params.warmMs ?? 0);
  const start = nowMs();
  const deadline = start + params.maxMs;
  let done = 0;
  await Promise.all(
    sessions.map(async (session, index) => {
      for (const event of batches[index] as ReturnType<typeof benchEvents>) {
        if (nowMs() > deadline) return;
        await service.appendEvent({ session, event });
        done++;
      }
    }),
  );
  return { eventsPerSecond: (done / (nowMs() - start)) * 1000, events: done };
}

/** One sample of a read workload. */
export interface ReadSample {
  msPerOperation: number;
  iterations: number;
}

/** Repeats `read` for at least `minMs` (and at least `minIterations` times); the mean time of one. */
export async function timeRead(read: () => Promise<unknown>, minMs: number, minIterations = 3): Promise<ReadSample> {
  const start = nowMs();
  let iterations = 0;
  let elapsed = 0;
  do {
    await read();
    iterations++;
    elapsed = nowMs() - start;
  } while (elapsed < minMs || iterations < minIterations);
  return { msPerOperation: elapsed / iterations, iterations };
}

/** What the read workloads read, built once per target before they run. */
export interface ReadData {
  small: SessionKey;
  large: SessionKey;
  whole: SessionKey;
  /** The app with many sessions (workload 5). */
  listApp: string;
}

export interface ReadSizes {
  smallHistory: number;
  largeHistory: number;
  wholeHistory: number;
  listSessions: number;
  listUsers: number;
}

/**
 * Builds the read workloads' data under `appName`: three histories and an
 * app with many sessions, through the target's bulk seeder when it has one,
 * else through the service's own calls.
 */
export async function seedReads(
  service: BaseSessionService,
  seeder: Seeder | undefined,
  appName: string,
  sizes: ReadSizes,
): Promise<ReadData> {
  const key = (sessionId: string): SessionKey => ({ appName, userId: 'reader', sessionId });
  const data: ReadData = {
    small: key('history-small'),
    large: key('history-large'),
    whole: key('history-whole'),
    listApp: `${appName}-list`,
  };
  const histories: Array<[SessionKey, number]> = [
    [data.small, sizes.smallHistory],
    [data.large, sizes.largeHistory],
    [data.whole, sizes.wholeHistory],
  ];
  const users = Array.from({ length: sizes.listUsers }, (_, index) => `user-${index}`);
  // Through the service, the histories and the listed sessions are built
  // side by side: a history is appended one event after the other, but
  // nothing orders the four. A bulk seeder is quick and goes one at a time.
  const seedHistory = async ([sessionKey, count]: [SessionKey, number]) => {
    const events = historyEvents(count, `${sessionKey.sessionId}-invocation`);
    if (seeder) return seeder.history(sessionKey, events);
    const session = await service.createSession({ ...sessionKey, state: sessionState() });
    for (const event of events) {
      await service.appendEvent({ session, event });
      // The caller's copy of the history is not needed here, and the appendEvent
      // of @google/adk's own services searches it for the event id on every call.
      session.events.length = 0;
    }
  };
  const seedSessions = async () => {
    if (seeder) return seeder.sessions(data.listApp, users, sizes.listSessions);
    // The first session of each user alone (a store may create the user's records then), the rest 16 at a time.
    const create = (index: number) =>
      service.createSession({
        appName: data.listApp,
        userId: users[index % users.length] as string,
        sessionId: `s${index}`,
        state: sessionState(),
      });
    for (let index = 0; index < Math.min(users.length, sizes.listSessions); index++) await create(index);
    let next = users.length;
    await runConcurrently(Math.max(0, sizes.listSessions - users.length), 16, () => create(next++));
  };
  if (seeder) {
    for (const history of histories) await seedHistory(history);
    await seedSessions();
  } else {
    await Promise.all([...histories.map(seedHistory), seedSessions()]);
  }
  return data;
}

/** Workload 3: the last `recent` events of a session. Checks the answer, so a broken read cannot look fast. */
export async function readRecent(service: BaseSessionService, key: SessionKey, recent: number): Promise<void> {
  const session = await service.getSession({ ...key, config: { numRecentEvents: recent } });
  expectEvents(session, recent, key);
}

/** Workload 4: a session with its whole history. */
export async function readWhole(service: BaseSessionService, key: SessionKey, expected: number): Promise<void> {
  const session = await service.getSession(key);
  expectEvents(session, expected, key);
}

/** Workload 5: the first page of an app's sessions, most recently updated first. */
export async function listPage(service: BaseSessionService, appName: string, limit: number, total: number) {
  const page = await service.listSessions({ appName, limit, page: 1, order: 'desc' });
  const expected = Math.min(limit, total);
  if (page.sessions.length !== expected || page.totalItems !== total) {
    throw new Error(
      `listSessions gave ${page.sessions.length} sessions of ${page.totalItems}, expected ${expected} of ${total}`,
    );
  }
}

function expectEvents(session: Session | undefined, expected: number, key: SessionKey): void {
  if (!session) throw new Error(`getSession found no session ${key.sessionId}`);
  if (session.events.length !== expected) {
    throw new Error(`getSession(${key.sessionId}) gave ${session.events.length} events, expected ${expected}`);
  }
}

/** Workload 6: round trips of each operation, counted where the counter counts them. */
export async function countRoundTrips(
  counter: RoundTripCounter,
  data: ReadData,
  sizes: ReadSizes & { recentEvents: number; listPage: number },
  appName: string,
): Promise<Record<string, number>> {
  const service = counter.service;
  const counts: Record<string, number> = {};
  counts.createSession = await counter.count(() =>
    service.createSession({ appName, userId: 'counted', sessionId: 'counted-create', state: sessionState() }),
  );
  const session = await service.createSession({
    appName,
    userId: 'counted',
    sessionId: 'counted-append',
    state: sessionState(),
  });
  await service.appendEvent({ session, event: benchEvent(0, 'counted') });
  counts.appendEvent = await counter.count(() => service.appendEvent({ session, event: benchEvent(1, 'counted') }));
  counts.getSessionRecent = await counter.count(() => readRecent(service, data.large, sizes.recentEvents));
  counts.getSessionWhole = await counter.count(() => readWhole(service, data.whole, sizes.wholeHistory));
  counts.listSessions = await counter.count(() => listPage(service, data.listApp, sizes.listPage, sizes.listSessions));
  return counts;
}

/** One sample of workload 7. */
export interface HeapSample {
  /** Heap growth per stored event, after garbage collection. */
  bytesPerEvent: number;
  /** The mean size of the stored events as JSON (UTF-8 bytes). */
  jsonBytesPerEvent: number;
}

type GarbageCollector = () => void;

export function garbageCollector(): GarbageCollector | undefined {
  return (globalThis as { gc?: GarbageCollector }).gc;
}

/**
 * Workload 7: heap bytes per stored event of an in-process service. Stores
 * `events` events in one new session of a new service and compares the heap
 * before and after, with garbage collection; the caller's copy of the events
 * is dropped first, so what remains is what the service keeps.
 */
export async function heapPerEvent(makeService: () => BaseSessionService, events: number): Promise<HeapSample> {
  const gc = garbageCollector();
  if (!gc) throw new Error('the heap workload needs node --expose-gc');
  // Collect until the heap stops shrinking: V8 may release compiled code or
  // caches a few collections late, which would otherwise land in the figure.
  const collect = () => {
    let last = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 12; round++) {
      gc();
      const used = process.memoryUsage().heapUsed;
      if (round >= 2 && last - used < 1024) break;
      last = used;
    }
  };
  const service = makeService();
  const key = { appName: 'heap', userId: 'user-0', sessionId: 'heap' };
  const session = await service.createSession({ ...key, state: sessionState() });
  await service.appendEvent({ session, event: benchEvent(-1, 'heap') });
  session.events.length = 0;
  collect();
  const before = process.memoryUsage().heapUsed;
  let jsonBytes = 0;
  for (let turn = 0; turn < events; turn++) {
    const stored = await service.appendEvent({ session, event: benchEvent(turn, 'heap') });
    jsonBytes += Buffer.byteLength(JSON.stringify(stored));
    if (session.events.length >= 1_000) session.events.length = 0;
  }
  session.events.length = 0;
  collect();
  const after = process.memoryUsage().heapUsed;
  // Keeps the service (and what it stores) alive until after the measurement.
  const check = await service.getSession({ ...key, config: { numRecentEvents: 1 } });
  if (check?.events.length !== 1) throw new Error('the heap workload lost its session');
  return { bytesPerEvent: (after - before) / events, jsonBytesPerEvent: jsonBytes / events };
}

/** The physical limit: `ops` trivial requests one after the other, per second. */
export async function probeSequential(probe: Probe, ops: number, maxMs: number, warmMs = 0): Promise<number> {
  await warmUp(warmMs, 1, () => probe.run());
  const start = nowMs();
  const deadline = start + maxMs;
  let done = 0;
  while (done < ops) {
    await probe.run();
    done++;
    if (nowMs() > deadline) break;
  }
  return (done / (nowMs() - start)) * 1000;
}

/** The same with `workers` requests in flight at once, per second. */
export async function probeConcurrent(
  probe: Probe,
  ops: number,
  workers: number,
  maxMs: number,
  warmMs = 0,
): Promise<number> {
  await warmUp(warmMs, workers, () => probe.run());
  const start = nowMs();
  const deadline = start + maxMs;
  let done = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (done < ops && nowMs() <= deadline) {
        done++;
        await probe.run();
      }
    }),
  );
  return (done / (nowMs() - start)) * 1000;
}
