import { createEvent, type Event } from '@google/adk';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DECODE_MODE, decodeEvent } from '../src/events.js';
import { type StoredEvent, selectEvents, UnreadableDataError } from '../src/store-kit.js';

const log = [5, 1, 7, 8, 3, 9].map((timestamp, i) => ({ id: `e${i}`, timestamp }));
const ids = (events: Array<{ id: string }>) => events.map((e) => e.id);

describe('selectEvents', () => {
  it('keeps the tail after the last event at or before afterTimestamp', () => {
    expect(ids(selectEvents(log, { afterTimestamp: 4 }))).toEqual(['e5']);
    expect(ids(selectEvents(log, { afterTimestamp: 2 }))).toEqual(['e2', 'e3', 'e4', 'e5']);
    expect(ids(selectEvents(log, { afterTimestamp: 0 }))).toEqual(ids(log));
    expect(ids(selectEvents(log, { afterTimestamp: 9 }))).toEqual([]);
  });

  it('then keeps the last n', () => {
    expect(ids(selectEvents(log, { limit: 2 }))).toEqual(['e4', 'e5']);
    expect(ids(selectEvents(log, { limit: 0 }))).toEqual([]);
    expect(ids(selectEvents(log, { limit: 99 }))).toEqual(ids(log));
    expect(ids(selectEvents(log, { afterTimestamp: 0, limit: 3 }))).toEqual(['e3', 'e4', 'e5']);
  });
});

/** An event as a tree of [key, value] pairs in key order, `undefined` values and ADK's symbol marks included. */
function shape(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(shape);
  const record = value as Record<string | symbol, unknown>;
  return [
    ...Object.keys(record).map((name) => [name, shape(record[name])]),
    ...Object.getOwnPropertySymbols(record).map((mark) => [String(mark), record[mark]]),
  ];
}

/** What ADK's createEvent builds from the stored text, with the stored id and timestamp. */
function throughCreateEvent(stored: StoredEvent): Event {
  const event = createEvent(JSON.parse(stored.json));
  event.id = stored.id;
  event.timestamp = stored.timestamp;
  return event;
}

const json = fc.jsonValue({ maxDepth: 3 });
const storedEvents = fc
  .record(
    {
      id: fc.string(),
      invocationId: fc.oneof(fc.string(), fc.constant(null)),
      author: fc.string(),
      branch: fc.string(),
      timestamp: fc.double({ noNaN: true, noDefaultInfinity: true }),
      content: json,
      actions: fc.record(
        { skipSummarization: fc.boolean(), stateDelta: fc.dictionary(fc.string(), json), transferToAgent: fc.string() },
        { requiredKeys: [] },
      ),
      longRunningToolIds: fc.oneof(fc.array(fc.string()), fc.constant(null)),
      partial: fc.boolean(),
      __proto__: json,
      extra: json,
    },
    { requiredKeys: [] },
  )
  .chain((fields) =>
    fc.shuffledSubarray(Object.keys(fields), { minLength: Object.keys(fields).length }).map((order) => {
      // The same fields in any order, `__proto__` as an own key, as JSON.parse makes it.
      const text = `{${order.map((name) => `${JSON.stringify(name)}:${JSON.stringify((fields as Record<string, unknown>)[name])}`).join(',')}}`;
      return { id: 'stored-id', timestamp: 17.5, json: text } satisfies StoredEvent;
    }),
  );

describe('decodeEvent', () => {
  it('builds on the parsed text itself with @google/adk 2.x (its check against createEvent passed)', () => {
    expect(DECODE_MODE).toBe('in place');
  });

  it("gives exactly what ADK's createEvent builds from the text: the same keys in the same order, values and marks", () => {
    fc.assert(
      fc.property(storedEvents, (stored) => {
        expect(shape(decodeEvent(stored))).toEqual(shape(throughCreateEvent(stored)));
      }),
      { numRuns: 500 },
    );
  });

  it('decodes a text that is not an object as createEvent does', () => {
    for (const json of ['5', '"text"', '[1,{"a":2}]', 'true']) {
      const stored = { id: 'e', timestamp: 1, json };
      expect(shape(decodeEvent(stored))).toEqual(shape(throughCreateEvent(stored)));
    }
    expect(() => decodeEvent({ id: 'e', timestamp: 1, json: 'null' })).toThrow(UnreadableDataError);
  });

  it('shares nothing between two decodes of one text', () => {
    const stored = { id: 'e', timestamp: 1, json: '{"actions":{"stateDelta":{"k":[1]}},"longRunningToolIds":[]}' };
    const first = decodeEvent(stored);
    const second = decodeEvent(stored);
    (first.actions.stateDelta.k as number[]).push(2);
    first.longRunningToolIds?.push('x');
    first.actions.artifactDelta.a = 1;
    expect(second).toEqual(throughCreateEvent(stored));
  });
});
