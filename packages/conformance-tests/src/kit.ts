/**
 * The few helpers every group uses: a per-test kit that makes services and
 * unique names, and exact assertions on typed errors and ADK events.
 */
import { randomUUID } from 'node:crypto';
import type { StateSessionServiceOptions } from '@adk-state/core';
import { createEvent, type Event, type Session } from '@google/adk';
import { expect } from 'vitest';
import type { Capabilities, ConformanceService, OutageControl } from './target.js';

/** What one test gets. */
export interface TestKit {
  /** A fresh service from the target (destroyed after the test). */
  service(options?: StateSessionServiceOptions): Promise<ConformanceService>;
  /** An app name no other test uses; `label` makes failures easier to read. */
  app(label?: string): string;
  /** The target's outage control, in tests that require the `outage` capability. */
  outage?: OutageControl;
}

export interface TestOptions {
  /** The test runs only when the target has this capability; otherwise it is skipped with the reason. */
  requires?: keyof Capabilities;
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
