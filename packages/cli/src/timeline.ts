/**
 * How a session's state got where it is: one entry per stored event, with
 * the delta it carried and the state after it. Shared by `adk-state inspect`
 * (text and JSON) and its web page.
 */
import { scopeOf } from '@adk-state/core/store';
import type { Event, Session } from '@google/adk';

/** One change of one key by one event. */
export interface KeyChange {
  key: string;
  /** Absent when the key was not in state before. */
  before?: unknown;
  after: unknown;
}

/** One stored event of the session, in append order. */
export interface TimelineEntry {
  /** 1-based position in the session. */
  index: number;
  id: string;
  author: string;
  /** Milliseconds since the epoch, as stored. */
  timestamp: number;
  /** The same moment as an ISO-8601 string. */
  time: string;
  /** The first text of the event's content (shortened), for a glance at what was said. */
  text?: string;
  /** The function calls and responses the event carries, by name. */
  calls: string[];
  /** The stored state delta (`temp:` keys are never stored). */
  delta: Record<string, unknown>;
  /** The keys whose value this event changed, with the value before and after. */
  changes: KeyChange[];
  /** The state after this event: the initial state with every delta so far applied. */
  stateAfter: Record<string, unknown>;
}

/** A session's state by scope and its timeline. */
export interface Timeline {
  appName: string;
  userId: string;
  sessionId: string;
  lastUpdateTime: number;
  /** The state now, split by scope; prefixes are kept on the keys. */
  scopes: { session: Record<string, unknown>; user: Record<string, unknown>; app: Record<string, unknown> };
  /**
   * Keys of the current state that no event of this session wrote: state given
   * when the session was created, and `user:`/`app:` keys written elsewhere.
   * The timeline starts from these.
   */
  initial: Record<string, unknown>;
  events: TimelineEntry[];
}

const TEXT_LIMIT = 120;

function firstText(event: Event): string | undefined {
  for (const part of event.content?.parts ?? []) {
    if (typeof part.text === 'string' && part.text !== '') {
      const text = part.text.replace(/\s+/g, ' ').trim();
      return text.length > TEXT_LIMIT ? `${text.slice(0, TEXT_LIMIT - 1)}…` : text;
    }
  }
  return undefined;
}

function callsOf(event: Event): string[] {
  const calls: string[] = [];
  for (const part of event.content?.parts ?? []) {
    if (part.functionCall?.name) calls.push(`call ${part.functionCall.name}`);
    if (part.functionResponse?.name) calls.push(`response ${part.functionResponse.name}`);
  }
  return calls;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Builds the timeline of a session loaded with all its events. */
export function buildTimeline(session: Session): Timeline {
  const written = new Set<string>();
  for (const event of session.events) {
    for (const key of Object.keys(event.actions?.stateDelta ?? {})) written.add(key);
  }
  const scopes: Timeline['scopes'] = { session: {}, user: {}, app: {} };
  const initial: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(session.state)) {
    const scope = scopeOf(key);
    if (scope === 'temp') continue;
    scopes[scope][key] = value;
    if (!written.has(key)) initial[key] = value;
  }
  let state: Record<string, unknown> = { ...initial };
  const events = session.events.map((event, position): TimelineEntry => {
    const delta = { ...(event.actions?.stateDelta ?? {}) };
    const changes: KeyChange[] = [];
    const next = { ...state };
    for (const [key, after] of Object.entries(delta)) {
      if (scopeOf(key) === 'temp') continue;
      const had = Object.hasOwn(state, key);
      if (had && sameJson(state[key], after)) continue;
      changes.push(had ? { key, before: state[key], after } : { key, after });
      next[key] = after;
    }
    state = next;
    const text = firstText(event);
    return {
      index: position + 1,
      id: event.id,
      author: event.author ?? '',
      timestamp: event.timestamp,
      time: new Date(event.timestamp).toISOString(),
      ...(text === undefined ? {} : { text }),
      calls: callsOf(event),
      delta,
      changes,
      stateAfter: state,
    };
  });
  return {
    appName: session.appName,
    userId: session.userId,
    sessionId: session.id,
    lastUpdateTime: session.lastUpdateTime,
    scopes,
    initial,
    events,
  };
}

function show(value: unknown): string {
  const text = JSON.stringify(value);
  return text === undefined ? 'undefined' : text;
}

/** The timeline as text for a terminal: state by scope, then one block per event. */
export function formatTimeline(timeline: Timeline): string {
  const lines: string[] = [];
  lines.push(`session ${timeline.sessionId} (app ${timeline.appName}, user ${timeline.userId})`);
  lines.push(`last update ${new Date(timeline.lastUpdateTime).toISOString()}, ${timeline.events.length} events`);
  for (const scope of ['session', 'user', 'app'] as const) {
    const entries = Object.entries(timeline.scopes[scope]);
    lines.push('', `${scope} state (${entries.length} keys)`);
    for (const [key, value] of entries) lines.push(`  ${key} = ${show(value)}`);
  }
  lines.push('', 'timeline');
  const initial = Object.entries(timeline.initial);
  lines.push(`  #0 initial: ${initial.length === 0 ? '{}' : initial.map(([k, v]) => `${k}=${show(v)}`).join(', ')}`);
  for (const entry of timeline.events) {
    const what = [entry.text === undefined ? '' : `"${entry.text}"`, ...entry.calls].filter(Boolean).join('; ');
    lines.push(`  #${entry.index} ${entry.time} ${entry.author}${what ? `: ${what}` : ''}`);
    for (const change of entry.changes) {
      const before = Object.hasOwn(change, 'before') ? show(change.before) : '(unset)';
      lines.push(`      ${change.key}: ${before} -> ${show(change.after)}`);
    }
  }
  return lines.join('\n');
}

/** A table of sessions for a terminal. */
export function formatSessionTable(sessions: readonly Session[]): string {
  const rows = sessions.map((session) => [
    session.userId,
    session.id,
    new Date(session.lastUpdateTime).toISOString(),
    String(Object.keys(session.state).filter((key) => scopeOf(key) === 'session').length),
  ]);
  const header = ['user', 'session', 'last update', 'session keys'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]?.length ?? 0)));
  const line = (row: string[]) =>
    row
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n');
}
