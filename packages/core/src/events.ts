/**
 * Event rules: how an ADK event is checked, stripped of `temp:` keys, stored
 * as text, rebuilt as a real ADK event, and filtered on read.
 */
import * as adk from '@google/adk';
import { createEvent, type Event, type EventActions } from '@google/adk';
import { InvalidArgumentError, UnreadableDataError } from './errors.js';
import { defineEntry, encodeChecked, type JsonRules, MAX_VALUE_DEPTH } from './values.js';

/**
 * How an event is checked before it is stored: as `JSON.stringify` sees it,
 * refusing what it would drop or change silently, and deep enough for any
 * state value inside `actions.stateDelta` plus the event's own levels.
 */
const EVENT_RULES: JsonRules = { maxDepth: MAX_VALUE_DEPTH + 8, asStringified: true };

/** An event as a store keeps it: its id and timestamp beside its JSON text. */
export interface StoredEvent {
  id: string;
  timestamp: number;
  /** The whole event as JSON, `temp:` keys already removed. */
  json: string;
}

/**
 * Which events a read returns, in append order: those after the last event
 * whose timestamp is `<= afterTimestamp` (when set), then the last `limit` of
 * those (when set).
 */
export interface EventFilter {
  /** Always finite: the service turns `-Infinity` into no bound and `+Infinity` into `limit: 0`. */
  afterTimestamp?: number;
  limit?: number;
}

/** Checks the parts of an event that storage relies on. */
export function assertStorableEvent(event: Event): void {
  if (typeof event !== 'object' || event === null) {
    throw new InvalidArgumentError('event', 'an event object is required');
  }
  if (typeof event.id !== 'string' || event.id === '') {
    throw new InvalidArgumentError('event.id', 'must be a non-empty string (create events with createEvent())');
  }
  if (typeof event.timestamp !== 'number' || !Number.isFinite(event.timestamp)) {
    throw new InvalidArgumentError('event.timestamp', 'must be a finite number of milliseconds since the epoch');
  }
}

/**
 * Removes the `temp:` entries (as `splitState` picked them) from the event's
 * state delta, in place: the delta object keeps its identity, so ADK's
 * write-order marks on it stay valid.
 */
export function takeTempEntries(event: Event, temp: ReadonlyMap<string, unknown>): void {
  const delta = event.actions?.stateDelta as Record<string, unknown> | undefined;
  if (delta) for (const key of temp.keys()) delete delta[key];
}

/**
 * The stored form of an event. Refuses, with {@link InvalidArgumentError}
 * naming the path, an event that JSON cannot carry whole: functions, symbols,
 * BigInt, NaN/±Infinity, `undefined` or holes in arrays, cycles, or nesting
 * past the depth limit. An `undefined` property is left out, as JSON does.
 */
export function encodeEvent(event: Event): StoredEvent {
  let encoded: ReturnType<typeof encodeChecked>;
  try {
    encoded = encodeChecked(event, EVENT_RULES);
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new InvalidArgumentError('event', `cannot be stored as JSON (${reason})`);
  }
  if (!('json' in encoded)) {
    throw new InvalidArgumentError(`event at ${encoded.path}`, `${encoded.problem}; events are stored as JSON`);
  }
  return { id: event.id, timestamp: event.timestamp, json: encoded.json };
}

/**
 * ADK's `createEventActions`, read from the module's namespace so that an ADK
 * without it still loads (the decode then goes through `createEvent`).
 */
const createEventActions = (adk as { createEventActions?: (actions?: Partial<EventActions>) => EventActions })
  .createEventActions;

/** The marks `createEvent` puts on an event besides its data (ADK's own symbol keys), with their values. */
const MARK_VALUES = (() => {
  const marked = createEvent({}) as unknown as Record<symbol, unknown>;
  return new Map(Object.getOwnPropertySymbols(marked).map((mark) => [mark, marked[mark]]));
})();

/** The symbols of {@link MARK_VALUES}, as an array (a copy walks it without an iterator). */
const MARKS: readonly symbol[] = [...MARK_VALUES.keys()];

/**
 * Rebuilds a real ADK event (marked by `createEvent`) from its stored form.
 * A stored form whose text is not text or whose timestamp is not a number
 * (a record changed outside adk-state) is unreadable data, whatever the store.
 */
export function decodeEvent(stored: StoredEvent): Event {
  if (typeof stored.json !== 'string' || !Number.isFinite(stored.timestamp)) {
    throw new UnreadableDataError(
      `the stored event ${JSON.stringify(stored.id)} has ${typeof stored.json === 'string' ? 'a timestamp that is not a number' : 'no JSON text'}`,
    );
  }
  try {
    return decodeWith(stored);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new UnreadableDataError(`the stored text of event ${JSON.stringify(stored.id)} is not an event (${why})`, {
      cause: error,
    });
  }
}

/** The decode through `createEvent` itself: a copy of the parsed object with ADK's defaults. */
function decodeThroughCreateEvent(stored: StoredEvent): Event {
  return createdFrom(JSON.parse(stored.json), stored);
}

function createdFrom(data: unknown, stored: StoredEvent): Event {
  const event = createEvent(data as Partial<Event>);
  // createEvent replaces a falsy timestamp with "now"; the stored one is exact.
  event.id = stored.id;
  event.timestamp = stored.timestamp;
  return event;
}

/**
 * The same result built on the object JSON.parse made, without copying it:
 * ADK's marks, then each field `createEvent` sets, in its order (a field the
 * text lacks is added after the others, as createEvent's copy adds it), the
 * actions through ADK's own `createEventActions`. About three times cheaper.
 */
function decodeInPlace(stored: StoredEvent): Event {
  const parsed: unknown = JSON.parse(stored.json);
  // A text that is not an object (never written by a store) goes through createEvent as it always did.
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return createdFrom(parsed, stored);
  const event = parsed as Record<string | symbol, unknown>;
  for (const [mark, value] of MARK_VALUES) event[mark] = value;
  event.id = stored.id;
  event.invocationId = event.invocationId || '';
  // biome-ignore lint/correctness/noSelfAssign: makes the key an own property where the text lacks it, as createEvent does.
  event.author = event.author;
  event.actions = (createEventActions as NonNullable<typeof createEventActions>)(
    event.actions as Partial<EventActions> | undefined,
  );
  event.longRunningToolIds = event.longRunningToolIds || [];
  // biome-ignore lint/correctness/noSelfAssign: as above.
  event.branch = event.branch;
  event.timestamp = stored.timestamp;
  return event as unknown as Event;
}

/**
 * Whether two events are the same tree: own string keys in the same order
 * with the same values (`undefined` ones included), and the same own symbol
 * keys and values.
 */
function sameTree(left: unknown, right: unknown): boolean {
  if (typeof left !== 'object' || left === null || typeof right !== 'object' || right === null) {
    return Object.is(left, right);
  }
  if (Array.isArray(left) !== Array.isArray(right) || Object.getPrototypeOf(left) !== Object.getPrototypeOf(right)) {
    return false;
  }
  const names = Object.keys(left);
  const others = Object.keys(right);
  const marks = Object.getOwnPropertySymbols(left);
  const otherMarks = Object.getOwnPropertySymbols(right);
  if (names.length !== others.length || marks.length !== otherMarks.length) return false;
  const a = left as Record<string | symbol, unknown>;
  const b = right as Record<string | symbol, unknown>;
  return (
    names.every((name, at) => name === others[at] && sameTree(a[name], b[name])) &&
    marks.every((mark, at) => mark === otherMarks[at] && Object.is(a[mark], b[mark]))
  );
}

/**
 * Stored events of every shape that matters to `createEvent`: empty, every
 * field set, fields missing or falsy, actions with a field of their own
 * first, and a `__proto__` key.
 */
const SAMPLES: readonly StoredEvent[] = [
  { id: 'a', timestamp: 1, json: '{}' },
  {
    id: 'b',
    timestamp: 2.5,
    json: JSON.stringify(
      createEvent({
        id: 'b',
        invocationId: 'i',
        author: 'model',
        branch: 'root.child',
        timestamp: 2.5,
        content: { role: 'model', parts: [{ text: 't' }] },
        actions: { stateDelta: { k: [1, { n: null }] }, transferToAgent: 'x' },
        longRunningToolIds: ['c'],
        partial: false,
      }),
    ),
  },
  {
    id: 'c',
    timestamp: 3,
    json: '{"invocationId":"","longRunningToolIds":null,"actions":{"skipSummarization":true,"stateDelta":{"k":1}},"author":"u","__proto__":{"x":1}}',
  },
];

/**
 * The decode in use: in place when ADK has `createEventActions` and it gives
 * exactly what `createEvent` gives on every sample (checked once, with the
 * `@google/adk` this module runs with), else through `createEvent`, so an ADK whose events are built
 * differently still gets events exactly as its own function builds them.
 */
const decodeWith: (stored: StoredEvent) => Event =
  typeof createEventActions === 'function' &&
  SAMPLES.every((sample) => sameTree(decodeInPlace(sample), decodeThroughCreateEvent(sample)))
    ? decodeInPlace
    : decodeThroughCreateEvent;

/** Which decode is in use: `'in place'` or `'createEvent'` (for tests). */
export const DECODE_MODE: 'in place' | 'createEvent' = decodeWith === decodeInPlace ? 'in place' : 'createEvent';

/**
 * A deep copy of a decoded event (one {@link decodeEvent} made), equal to a
 * fresh decode of the same text and sharing nothing with `master`: its
 * values are copied key by key, ADK's marks set again. Several times cheaper
 * than a decode, so a long log held decoded is copied for each reader.
 */
export function copyEvent(master: Event): Event {
  const event = copyJson(master) as Event & Record<symbol, unknown>;
  for (let index = 0; index < MARKS.length; index++) {
    const mark = MARKS[index] as symbol;
    event[mark] = (master as unknown as Record<symbol, unknown>)[mark];
  }
  return event;
}

/**
 * Freezes a decoded event and every object and array in it, so that a read
 * handing it out shared cannot change it for the next (see
 * `StateSessionServiceOptions.shareReadEvents`). Returns `event`.
 */
export function freezeEvent(event: Event): Event {
  return freezeJson(event) as Event;
}

function freezeJson(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) freezeJson(value[index]);
  } else {
    const source = value as Record<string, unknown>;
    const names = Object.keys(source);
    for (let index = 0; index < names.length; index++) freezeJson(source[names[index] as string]);
  }
  return Object.freeze(value);
}

/** A deep copy of a tree JSON.parse built (plain objects and dense arrays; `undefined` as it is). */
function copyJson(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const copy = new Array<unknown>(value.length);
    for (let index = 0; index < value.length; index++) copy[index] = copyJson(value[index]);
    return copy;
  }
  const source = value as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  // for-in walks V8's cached key list of the object's shape, where Object.keys
  // allocates an array per object; the own check passes over anything
  // enumerable a prototype might carry.
  for (const name in source) {
    if (!Object.hasOwn(source, name)) continue;
    const child = copyJson(source[name]);
    if (name === '__proto__') defineEntry(copy, name, child);
    else copy[name] = child;
  }
  return copy;
}

/**
 * The reference implementation of {@link EventFilter} over a whole log held
 * in append order. Walks back from the end, so it costs O(events returned).
 */
export function selectEvents<T extends { timestamp: number }>(log: readonly T[], filter: EventFilter = {}): T[] {
  let start = 0;
  if (filter.afterTimestamp !== undefined) {
    const after = filter.afterTimestamp;
    let index = log.length - 1;
    while (index >= 0 && (log[index] as T).timestamp > after) index--;
    start = index + 1;
  }
  if (filter.limit !== undefined) start = Math.max(start, log.length - filter.limit);
  return log.slice(start);
}
