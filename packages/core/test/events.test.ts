import { describe, expect, it } from 'vitest';
import { selectEvents } from '../src/store-kit.js';

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
