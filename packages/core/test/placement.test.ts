import { createEvent, type Event } from '@google/adk';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { adoptIndex, firstPositions, placeEvent } from '../src/placement.js';

/** What @google/adk's BaseSessionService.appendEvent does with the events array. */
function adkPlacement(events: Event[], event: Event): void {
  const index = events.findIndex((each) => each.id === event.id);
  if (index >= 0) events[index] = event;
  else events.push(event);
}

const event = (id: string, text = id) =>
  createEvent({ id, author: 'test', content: { role: 'model', parts: [{ text }] } });

/** True when both arrays hold the very same objects in the same order. */
const same = (left: Event[], right: Event[]) =>
  left.length === right.length && left.every((each, position) => each === right[position]);

/** A summary event as ADK's anchored compactor builds it. */
const scratchpad = (id: string) => ({ ...event(id, 'summary'), isScratchpad: true, author: 'system' }) as Event;

/** Rewrites `events` in place as ADK's AnchoredContextCompactor does: the summary, then all but the first `k`. */
function anchor(events: Event[], summary: Event, k: number): void {
  const rewritten = [summary, ...events.slice(k)];
  events.length = 0;
  events.push(...rewritten);
}

type Step =
  | { kind: 'place'; id: string }
  | { kind: 'push'; id: string }
  | { kind: 'truncate'; length: number }
  | { kind: 'removeAt'; position: number }
  | { kind: 'removeRun'; position: number; count: number }
  | { kind: 'replaceLast'; id: string }
  | { kind: 'prune'; position: number }
  | { kind: 'anchor'; id: string; k: number }
  | { kind: 'placeSummary'; id: string };

const ids = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h');
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('place' as const), id: ids }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('push' as const), id: ids }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncate' as const), length: fc.nat(6) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('removeAt' as const), position: fc.nat(8) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('replaceLast' as const), id: ids }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('removeRun' as const),
      position: fc.nat(8),
      count: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('prune' as const), position: fc.nat(8) }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('anchor' as const), id: ids, k: fc.integer({ min: 1, max: 4 }) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('placeSummary' as const), id: ids }) },
);

/** Runs `steps` on both arrays, ours through placeEvent and theirs through ADK's placement, comparing after each. */
function runSteps(ours: Event[], theirs: Event[], steps: readonly Step[]): void {
  let version = 0;
  for (const each of steps) {
    if (each.kind === 'place') {
      const appended = event(each.id, `version ${version++}`);
      placeEvent(ours, appended);
      adkPlacement(theirs, appended);
    } else if (each.kind === 'push') {
      const pushed = event(each.id);
      ours.push(pushed);
      theirs.push(pushed);
    } else if (each.kind === 'truncate') {
      ours.length = Math.min(ours.length, each.length);
      theirs.length = Math.min(theirs.length, each.length);
    } else if (each.kind === 'removeAt') {
      ours.splice(each.position, 1);
      theirs.splice(each.position, 1);
    } else if (each.kind === 'removeRun') {
      ours.splice(each.position, each.count);
      theirs.splice(each.position, each.count);
    } else if (each.kind === 'prune') {
      const pruned = ours[each.position];
      if (pruned) {
        const copy = event(pruned.id, 'pruned');
        ours[each.position] = copy;
        theirs[each.position] = copy;
      }
    } else if (each.kind === 'anchor') {
      if (ours.length > each.k) {
        const summary = scratchpad(each.id);
        anchor(ours, summary, each.k);
        anchor(theirs, summary, each.k);
      }
    } else if (each.kind === 'placeSummary') {
      const summary = scratchpad(each.id);
      placeEvent(ours, summary);
      adkPlacement(theirs, summary);
    } else if (ours.length > 0) {
      const replacement = event(each.id);
      ours[ours.length - 1] = replacement;
      theirs[theirs.length - 1] = replacement;
    }
    expect(same(ours, theirs)).toBe(true);
  }
}

describe('placeEvent', () => {
  it('replaces an event with the same id in place and pushes any other', () => {
    const events = [event('a'), event('b'), event('c')];
    const newer = event('b', 'newer');
    placeEvent(events, newer);
    expect(events.map((each) => each.id)).toEqual(['a', 'b', 'c']);
    expect(events[1]).toBe(newer);
    placeEvent(events, event('d'));
    expect(events.map((each) => each.id)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('replaces the first of duplicate ids, as findIndex finds it', () => {
    const events = [event('a'), event('x'), event('a')];
    const newer = event('a', 'newer');
    placeEvent(events, newer);
    expect(events[0]).toBe(newer);
    expect(events[2]).not.toBe(newer);
  });

  it('sees events pushed by other code between appends', () => {
    const events: Event[] = [];
    placeEvent(events, event('a'));
    events.push(event('compaction'));
    const again = event('compaction', 'again');
    placeEvent(events, again);
    expect(events.map((each) => each.id)).toEqual(['a', 'compaction']);
    expect(events[1]).toBe(again);
  });

  it('starts over when other code replaced an indexed element', () => {
    const events: Event[] = [];
    for (const id of ['a', 'b', 'c']) placeEvent(events, event(id));
    events[0] = event('z');
    const b = event('b', 'newer');
    placeEvent(events, b);
    const a = event('a', 'back');
    placeEvent(events, a);
    expect(events.map((each) => each.id)).toEqual(['z', 'b', 'c', 'a']);
    expect(events[1]).toBe(b);
  });

  it('places the summary the anchored compactor put in front of the retained events in place', () => {
    const events: Event[] = [];
    for (const id of ['e1', 'e2', 'e3', 'u']) placeEvent(events, event(id));
    // One event since the last compaction: the summary takes e1's place; same length, same last event.
    const summary = scratchpad('summary');
    anchor(events, summary, 1);
    placeEvent(events, summary);
    expect(events.map((each) => each.id)).toEqual(['summary', 'e2', 'e3', 'u']);
    expect(events[0]).toBe(summary);
  });

  it("matches @google/adk on any mix of appends and the changes the Runner and ADK's compactors make", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => runSteps([], [], steps)),
      { numRuns: 500 },
    );
  });

  it("does the same on a copy of a log given the log's first positions, which may also hold later ids", () => {
    const logIds = fc.array(ids, { maxLength: 12 });
    const later = fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'z'), fc.nat(20)), {
      maxLength: 4,
    });
    fc.assert(
      fc.property(logIds, later, fc.array(step, { maxLength: 40 }), (log, grown, steps) => {
        const events = log.map((id, position) => event(id, `logged ${position}`));
        const positions = firstPositions(events);
        // The log grew after the copy was made: ids it lacks, at positions past the copy or (wrongly) inside it.
        for (const [id, position] of grown) if (!positions.has(id)) positions.set(id, position);
        const ours = [...events];
        adoptIndex(ours, positions);
        runSteps(ours, [...events], steps);
      }),
      { numRuns: 500 },
    );
  });
});
