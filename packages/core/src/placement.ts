/**
 * Places an appended event into the caller's `session.events` as
 * `@google/adk` does (an event whose id is already there replaces it in
 * place, any other is pushed) without searching the whole array on every
 * append: an id index is kept per events array and brought up to date from
 * whatever the array gained at its end since the last append.
 *
 * Other code changes the array between appends: the Runner's flow and ADK's
 * compactors push events, remove a run of old ones, replace old events with
 * copies of the same id (thought pruning), or rewrite it as a summary event
 * followed by the newest events (the anchored compactor). Pushes are indexed
 * as they come; any other change that moves the first or last element or
 * shortens the array rebuilds the index; same-id replacements leave it valid;
 * and a summary event (`isScratchpad`), which the anchored compactor puts at
 * the front before the Runner appends it, is always looked up afresh.
 */
import type { Event } from '@google/adk';

interface EventIndex {
  /** The first position of each id, as `Array.prototype.findIndex` would find it. */
  positions: Map<string, number>;
  /**
   * First positions shared with the log the array was copied from (see
   * {@link adoptIndex}): read here, never written, and trusted only below
   * `sharedLength`, as the log may have grown since.
   */
  shared: ReadonlyMap<string, number> | undefined;
  sharedLength: number;
  /** How many elements were indexed, and the first and last of them, to notice changes made elsewhere. */
  length: number;
  first: Event | undefined;
  last: Event | undefined;
}

const indexes = new WeakMap<Event[], EventIndex>();

/** Replaces the event with the same id in `events`, or pushes it; returns `events`. */
export function placeEvent(events: Event[], event: Event): Event[] {
  let index = (event as { isScratchpad?: unknown }).isScratchpad === true ? rebuild(events) : currentIndex(events);
  let position = positionOf(index, event.id);
  if (position !== undefined && events[position]?.id !== event.id) {
    // An element was replaced by other code since it was indexed: start over.
    index = rebuild(events);
    position = positionOf(index, event.id);
  }
  if (position === undefined) {
    index.positions.set(event.id, events.length);
    events.push(event);
    index.length = events.length;
    index.first = events[0];
    index.last = event;
  } else {
    events[position] = event;
    if (position === 0) index.first = event;
    if (position === events.length - 1) index.last = event;
  }
  return events;
}

/** The index of `events`, extended by what was pushed since, or rebuilt when anything else changed at the ends. */
function currentIndex(events: Event[]): EventIndex {
  const index = indexes.get(events);
  if (!index || events.length < index.length || events[0] !== index.first || events[index.length - 1] !== index.last) {
    return rebuild(events);
  }
  for (let position = index.length; position < events.length; position++) {
    remember(index, events[position] as Event, position);
  }
  index.length = events.length;
  index.last = events[events.length - 1];
  return index;
}

/**
 * Gives `events`, a fresh copy of a log whose first position of each id is
 * in `positions`, an index without a pass over it: the map is shared (a
 * later log may add to it; only positions below the copy's length count).
 */
export function adoptIndex(events: Event[], positions: ReadonlyMap<string, number>): void {
  indexes.set(events, {
    positions: new Map(),
    shared: positions,
    sharedLength: events.length,
    length: events.length,
    first: events[0],
    last: events[events.length - 1],
  });
}

/**
 * The first position of each id in `events` (offset by `from`), added to
 * `into` where it has none yet; an element without a string id is passed over.
 */
export function firstPositions(
  events: readonly Event[],
  into = new Map<string, number>(),
  from = 0,
): Map<string, number> {
  for (let position = 0; position < events.length; position++) {
    const id = events[position]?.id;
    if (typeof id === 'string' && !into.has(id)) into.set(id, from + position);
  }
  return into;
}

function positionOf(index: EventIndex, id: string): number | undefined {
  const own = index.positions.get(id);
  if (own !== undefined || !index.shared) return own;
  const shared = index.shared.get(id);
  return shared !== undefined && shared < index.sharedLength ? shared : undefined;
}

function rebuild(events: Event[]): EventIndex {
  const index: EventIndex = {
    positions: firstPositions(events),
    shared: undefined,
    sharedLength: 0,
    length: events.length,
    first: events[0],
    last: events[events.length - 1],
  };
  indexes.set(events, index);
  return index;
}

function remember(index: EventIndex, event: Event, position: number): void {
  const id = event?.id;
  if (typeof id === 'string' && positionOf(index, id) === undefined) index.positions.set(id, position);
}
