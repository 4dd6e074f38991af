/**
 * When a side last wrote a `user:` or `app:` key (`lastWriteOf`), the clock
 * `migrate --on-conflict newer` decides each conflicting key by: the latest
 * event that wrote the key, or a session's creation when the key's value on
 * that side can only have come from the state a session was created with.
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
  it('is the latest event that wrote the key when it explains the value', () => {
    const copied = session('c', { 'user:plan': 'free', 'user:visits': 2 }, [
      at(1_000, { 'user:plan': 'free' }),
      at(2_000, { 'user:visits': 2, n: 1 }),
      at(2_500, { n: 2 }),
    ]);
    expect(lastWriteOf([copied], 'user:plan')).toBe(1_000);
    expect(lastWriteOf([copied], 'user:visits')).toBe(2_000);
    expect(lastWriteOf([copied], 'app:none')).toBe(Number.NEGATIVE_INFINITY);
    expect(() => lastWriteOf([copied], 'plan')).toThrow(/user: or app:/);
  });

  // Was a hole: the scope's clock counted a session's creation state only where no event of
  // the side wrote the scope, so a value given at creation after such an event lost to an older
  // write of the other side, and migrate wrote the older value over it, exit 0.
  it("counts a later session's creation when the key's value is not what the last event wrote", () => {
    const copied = session('c', { 'user:plan': 'pro' }, [at(1_000, { 'user:plan': 'free' })]);
    const created = session('n', { 'user:plan': 'pro' }, [], 3_000);
    expect(lastWriteOf([copied, created], 'user:plan')).toBe(3_000);
  });

  // Was a hole: the decision was the scope's, so a later write of another key of the scope
  // (user:visits at 2,000) carried an older value of this one (user:plan, written at 1,000)
  // over a newer one of the other side (1,500).
  it("is the key's own: a later write of another key of the scope does not count", () => {
    const source = session('c', { 'user:plan': 'free', 'user:visits': 2 }, [
      at(1_000, { 'user:plan': 'free' }),
      at(2_000, { 'user:visits': 2 }),
    ]);
    const target = session('t', { 'user:plan': 'pro' }, [at(1_500, { 'user:plan': 'pro' })]);
    expect(lastWriteOf([source], 'user:plan')).toBe(1_000);
    expect(lastWriteOf([target], 'user:plan')).toBe(1_500);
  });

  it('takes the earliest a session after the last write of the key can have been created, never a later guess', () => {
    const copied = session('c', { 'user:plan': 'pro' }, [at(1_000, { 'user:plan': 'free' })]);
    const before = session('b', { 'user:plan': 'pro' }, [at(500, { n: 1 })]);
    const first = session('f', { 'user:plan': 'pro' }, [], 4_000);
    expect(lastWriteOf([copied, before, first], 'user:plan')).toBe(4_000);
    // A session with events can have been created any time before its first event: just after the write.
    const later = session('l', { 'user:plan': 'pro' }, [at(9_000, { n: 1 })]);
    expect(lastWriteOf([later, copied, before, first], 'user:plan')).toBe(1_000.001);
  });

  it('a value no event wrote counts from the earliest a session can have been created, as state given then', () => {
    const one = session('a', { 'app:x': 1 }, [], 5_000);
    expect(lastWriteOf([one], 'app:x')).toBe(5_000);
    const two = session('b', { 'app:x': 1 }, [at(7_000, { n: 1 })]);
    expect(lastWriteOf([two, one], 'app:x')).toBe(Number.NEGATIVE_INFINITY);
  });
});
