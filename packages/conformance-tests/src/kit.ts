/**
 * The few helpers every group uses: a per-test kit that makes services,
 * unique names and sessions and reads sessions back, and exact assertions on
 * typed errors and ADK events.
 */
import { randomUUID } from 'node:crypto';
import type { StateSessionServiceOptions } from '@adk-state/core';
import { createEvent, type Event, type GetSessionConfig, type Session } from '@google/adk';
import { expect } from 'vitest';
import type {
  Capabilities,
  ConformanceService,
  ConformanceServiceOptions,
  DamageControl,
  LostWritesControl,
  OutageControl,
} from './target.js';

/** What one test gets. */
export interface TestKit {
  /** A fresh service from the target (destroyed after the test). */
  service(options?: ConformanceServiceOptions): Promise<ConformanceService>;
  /** An app name no other test uses; `label` makes failures easier to read. */
  app(label?: string): string;
  /**
   * The usual start of a test: a new service (as {@link TestKit.service})
   * and a new session in an app no other test uses, for user `'u1'` unless
   * `userId` says otherwise.
   */
  fresh(options?: FreshOptions): Promise<FreshStart>;
  /**
   * Reads `session` again, by its own `appName`, `userId` and `id`, and fails
   * the test when it is no longer stored or comes back under another key.
   * Reads through the test's service; a test that made more than one names
   * the reader with `service`. `numRecentEvents` and `afterTimestamp` go to
   * `getSession` as its config.
   */
  reload(session: SessionRef, options?: ReloadOptions): Promise<Session>;
  /** The target's outage control, in tests that require the `outage` capability. */
  outage?: OutageControl;
  /** The target's damage control, in tests that require the `damage` capability. */
  damage?: DamageControl;
  /** The target's control of lost writes, in tests that require the `lostWrites` capability. */
  lostWrites?: LostWritesControl;
}

/** How {@link TestKit.fresh} makes its session. */
export interface FreshOptions {
  /** The session's id; left out, the service generates one. */
  sessionId?: string;
  /** The session's initial state. */
  state?: Record<string, unknown>;
  /** The session's user; `'u1'` when left out (the app is the test's own anyway). */
  userId?: string;
  /** Shows in the app name, as with {@link TestKit.app}. */
  label?: string;
  /** Options of the new service (`onStale`, `timeoutMs`, ...). */
  serviceOptions?: StateSessionServiceOptions;
}

/** What {@link TestKit.fresh} gives back. */
export interface FreshStart {
  service: ConformanceService;
  /** The session as `createSession` returned it. */
  session: Session;
  appName: string;
  userId: string;
}

/** The key of a session to read again: a session itself will do. */
export type SessionRef = Pick<Session, 'appName' | 'userId' | 'id'>;

/** How {@link TestKit.reload} reads. */
export interface ReloadOptions extends GetSessionConfig {
  /** The service that reads; required once the test has made more than one. */
  service?: ConformanceService;
}

/**
 * The kit of one test over `create` (which makes a service from the target
 * and arranges its disposal).
 */
export function createKit(
  create: (options: ConformanceServiceOptions) => Promise<ConformanceService>,
  outage?: OutageControl,
  damage?: DamageControl,
  lostWrites?: LostWritesControl,
): TestKit {
  const made: ConformanceService[] = [];
  const kit: TestKit = {
    async service(options = {}) {
      const service = await create(options);
      made.push(service);
      return service;
    },
    app: (label) => uniqueName(label),
    async fresh(options = {}) {
      const { sessionId, state, label, serviceOptions } = options;
      const service = await kit.service(serviceOptions);
      const appName = kit.app(label);
      const userId = options.userId ?? 'u1';
      const session = await service.createSession({
        appName,
        userId,
        ...(sessionId === undefined ? {} : { sessionId }),
        ...(state === undefined ? {} : { state }),
      });
      return { service, session, appName, userId };
    },
    async reload(session, options = {}) {
      const { service = theOnly(made), ...config } = options;
      const key = { appName: session.appName, userId: session.userId, sessionId: session.id };
      const loaded = await service.getSession(Object.keys(config).length === 0 ? key : { ...key, config });
      const name = JSON.stringify([key.appName, key.userId, key.sessionId]);
      expect(loaded, `session ${name} must still be stored`).toBeDefined();
      const got = loaded as Session;
      expect([got.appName, got.userId, got.id], `session ${name} must come back under its own key`).toEqual([
        key.appName,
        key.userId,
        key.sessionId,
      ]);
      return got;
    },
    ...(outage ? { outage } : {}),
    ...(damage ? { damage } : {}),
    ...(lostWrites ? { lostWrites } : {}),
  };
  return kit;
}

/** The one service a test made, which `reload` reads through unless told otherwise. */
function theOnly(made: readonly ConformanceService[]): ConformanceService {
  const [only] = made;
  if (only === undefined) throw new Error('kit.reload: the test has made no service to read through');
  if (made.length > 1) {
    throw new Error(`kit.reload: the test made ${made.length} services; name the one that reads with { service }`);
  }
  return only;
}

export interface TestOptions {
  /** The test runs only when the target has this capability (or each of these); otherwise it is skipped with the reason. */
  requires?: keyof Capabilities | ReadonlyArray<keyof Capabilities>;
}

/** What a group file receives to declare its tests. */
export interface GroupApi {
  test(name: string, body: (kit: TestKit) => Promise<void>, options?: TestOptions): void;
}

/** A group: a title that reads as the promise, and its tests. */
export interface Group {
  title: string;
  define(api: GroupApi): void;
}

export function uniqueName(label = 'app'): string {
  return `${label}-${randomUUID()}`;
}

/**
 * The control of a capability a test requires (`kit.outage`, `kit.damage`):
 * the suite hands it to every test that requires the capability, so a
 * missing one is the suite's own error.
 */
export function handed<T>(control: T | undefined, capability: string): T {
  if (!control) throw new Error(`the ${capability} capability was declared but not handed to the test`);
  return control;
}

/** Awaits `promise` and asserts it rejects with an adk-state error of `code` (and `name`). */
export async function expectCode(promise: Promise<unknown>, code: string, name?: string): Promise<Error> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected an error with code ${code}`).toBeInstanceOf(Error);
  expect((caught as { code?: unknown }).code).toBe(code);
  if (name) expect((caught as Error).name).toBe(name);
  return caught as Error;
}

let clock = 1_700_000_000_000;

/** A strictly increasing timestamp, so order assertions never depend on the wall clock. */
export function nextTime(): number {
  clock += 1000;
  return clock;
}

/** A real ADK event (marked by createEvent) with the given delta. */
export function makeEvent(
  stateDelta: Record<string, unknown> = {},
  fields: Partial<Event> & { text?: string } = {},
): Event {
  const { text, ...rest } = fields;
  return createEvent({
    invocationId: 'inv-1',
    author: 'agent',
    timestamp: nextTime(),
    content: { role: 'model', parts: [{ text: text ?? 'hello' }] },
    actions: { stateDelta, artifactDelta: {}, requestedAuthConfigs: {}, requestedToolConfirmations: {} },
    ...rest,
  });
}

/** Appends one event with the delta through `service` to `session`, returning the event. */
export async function put(
  service: ConformanceService,
  session: Session,
  stateDelta: Record<string, unknown> = {},
  fields: Partial<Event> & { text?: string } = {},
): Promise<Event> {
  return service.appendEvent({ session, event: makeEvent(stateDelta, fields) });
}

/**
 * How long, at most, a test that failed waits for the calls it still has in
 * flight before its error goes on (its services are destroyed after that).
 */
export const SETTLE_MS = 5_000;

/** Waits for `pending` to settle, for {@link SETTLE_MS} at the most; never rejects. */
async function settleBriefly(pending: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const cap = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, SETTLE_MS);
  });
  try {
    await Promise.race([pending.then(noop, noop), cap]);
  } finally {
    clearTimeout(timer);
  }
}

function noop(): void {}

/**
 * Runs `write` and `read` side by side: `read` is told whether `write` is
 * still going, `write` whether it should stop early. Resolves once both are
 * done. When `read` fails, `write` is told to stop and given up to
 * {@link SETTLE_MS} to end (its own failure then goes unreported) before
 * `read`'s error goes on, so that what it still has in flight ends before
 * the test's services are destroyed; when only `write` fails, its error goes
 * on once `read` is done.
 */
export async function whileWriting(
  write: (stopped: () => boolean) => Promise<void>,
  read: (writing: () => boolean) => Promise<void>,
): Promise<void> {
  let stop = false;
  let done = false;
  const writing = (async () => {
    try {
      await write(() => stop);
    } finally {
      done = true;
    }
  })();
  // Awaited below; a failure while `read` still runs must not count as unhandled meanwhile.
  writing.catch(noop);
  try {
    await read(() => !done);
  } catch (error) {
    stop = true;
    await settleBriefly(writing);
    throw error;
  }
  await writing;
}

/**
 * `Promise.all`, except that after the first failure it gives the other
 * calls up to {@link SETTLE_MS} to settle before it rejects with that
 * failure, so that they end before the test's services are destroyed.
 */
export async function allAwaited<const T extends readonly unknown[]>(
  calls: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  try {
    return (await Promise.all(calls)) as { -readonly [K in keyof T]: Awaited<T[K]> };
  } catch (error) {
    await settleBriefly(Promise.allSettled(calls));
    throw error;
  }
}

/** The ids of a session's events, in order. */
export function ids(session: Session | undefined): string[] {
  return (session?.events ?? []).map((event) => event.id);
}

/** The state as a plain object (own enumerable keys only), for exact comparisons. */
export function plain(state: Record<string, unknown> | undefined): Record<string, unknown> {
  return JSON.parse(JSON.stringify(state ?? {})) as Record<string, unknown>;
}

/** True when an object is an event marked by `@google/adk`'s createEvent. */
export function isAdkEvent(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<symbol, unknown>)[Symbol.for('google.adk.event')] === true
  );
}
