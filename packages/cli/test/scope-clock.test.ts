/**
 * When a side last wrote a `user:` or `app:` scope (`lastWriteOf`), the
 * clock `migrate --on-conflict newer` decides a scope's conflicts by: the
 * latest event that wrote the scope, or a session's creation when the
 * scope's value on that side can only have come from the state a session
 * was created with.
 */
import { createEvent, type Event, type Session } from '@google/adk';
import { describe, expect, it } from 'vitest';
import { lastWriteOf } from '../src/migrate.js';

const at = (timestamp: number, stateDelta: Record<string, unknown>): Event =>
  createEvent({ author: 'agent', timestamp, actions: { stateDelta } });

function session(id: string, state: Record<string, unknown>, events: Event[], lastUpdateTime?: number): Session {
  return {
    id,
    appName: 'shop',
    userId: 'ada',
    state,
    events,
    lastUpdateTime: lastUpdateTime ?? events[events.length - 1]?.timestamp ?? 0,
  };
}

describe('lastWriteOf', () => {
  it('is the latest event that wrote a key of the scope when the events explain every value', () => {
    const copied = session('c', { 'user:plan': 'free', 'user:visits': 2 }, [
      at(1_000, { 'user:plan': 'free' }),
      at(2_000, { 'user:visits': 2, n: 1 }),
      at(2_500, { n: 2 }),
    ]);
    expect(lastWriteOf([copied], 'user')).toBe(2_000);
    expect(lastWriteOf([copied], 'app')).toBe(Number.NEGATIVE_INFINITY);
  });

  // Was a hole: a session's creation state counted only where no event of the side wrote the
  // scope, so a value given at creation after such an event lost to an older write of the
  // other side, and migrate wrote the older value over it, exit 0.
  it("counts a later session's creation when the scope's value is not what the last event wrote", () => {
    const copied = session('c', { 'user:plan': 'pro' }, [at(1_000, { 'user:plan': 'free' })]);
    const created = session('n', { 'user:plan': 'pro' }, [], 3_000);
    expect(lastWriteOf([copied, created], 'user')).toBe(3_000);
    // The side whose last event (2,000) wrote only another key of the scope is older.
    const source = session('c', { 'user:plan': 'free', 'user:visits': 2 }, [
      at(1_000, { 'user:plan': 'free' }),
      at(2_000, { 'user:visits': 2 }),
    ]);
    expect(lastWriteOf([source], 'user')).toBe(2_000);
  });

  it('takes the earliest session that began after the last write of the key, never a later guess', () => {
    const copied = session('c', { 'user:plan': 'pro' }, [at(1_000, { 'user:plan': 'free' })]);
    const before = session('b', { 'user:plan': 'pro' }, [at(500, { n: 1 })]);
    const first = session('f', { 'user:plan': 'pro' }, [], 4_000);
    const later = session('l', { 'user:plan': 'pro' }, [at(9_000, { n: 1 })]);
    expect(lastWriteOf([later, copied, before, first], 'user')).toBe(4_000);
  });

  it('a value no event wrote counts from the earliest session, as state given at creation', () => {
    const one = session('a', { 'app:x': 1 }, [], 5_000);
    const two = session('b', { 'app:x': 1 }, [at(7_000, { n: 1 })]);
    expect(lastWriteOf([two, one], 'app')).toBe(5_000);
  });
});
