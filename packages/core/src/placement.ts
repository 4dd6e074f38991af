/**
 * Places an appended event into the caller's `session.events` as
 * `@google/adk` does (an event whose id is already there replaces it in
 * place, any other is pushed) without searching the whole array on every
 * append: an id index is kept per events array and brought up to date from
 * whatever the array gained at its end since the last append.
 */
import type { Event } from '@google/adk';

interface EventIndex {
  /** The first position of each id, as `Array.prototype.findIndex` would find it. */
  positions: Map<string, number>;
  /** How many elements were indexed, and the last of them, to notice changes made elsewhere. */
  length: number;
  last: Event | undefined;
}

const indexes = new WeakMap<Event[], EventIndex>();

/** Replaces the event with the same id in `events`, or pushes it; returns `events`. */
export function placeEvent(events: Event[], event: Event): Event[] {
  let index = currentIndex(events);
  let position = index.positions.get(event.id);
  if (position !== undefined && events[position]?.id !== event.id) {
    // An element was replaced by other code since it was indexed: start over.
    index = rebuild(events);
    position = index.positions.get(event.id);
  }
  if (position === undefined) {
    index.positions.set(event.id, events.length);
    events.push(event);
    index.length = events.length;
    index.last = event;
  } else {
    events[position] = event;
    if (position === events.length - 1) index.last = event;
  }
  return events;
}

/**
 * The index of `events`, valid as long as other code only pushes to the
 * array (ADK itself pushes, e.g. compaction events); anything else found
 * (a shorter array, another element where the last indexed one was) rebuilds it.
 */
function currentIndex(events: Event[]): EventIndex {
  const index = indexes.get(events);
  if (!index || events.length < index.length || events[index.length - 1] !== index.last) return rebuild(events);
  for (let position = index.length; position < events.length; position++) {
    remember(index, events[position] as Event, position);
  }
  index.length = events.length;
  index.last = events[events.length - 1];
  return index;
}

function rebuild(events: Event[]): EventIndex {
  const index: EventIndex = { positions: new Map(), length: events.length, last: events[events.length - 1] };
  for (let position = 0; position < events.length; position++) remember(index, events[position] as Event, position);
  indexes.set(events, index);
  return index;
}

function remember(index: EventIndex, event: Event, position: number): void {
  const id = event?.id;
  if (typeof id === 'string' && !index.positions.has(id)) index.positions.set(id, position);
}
