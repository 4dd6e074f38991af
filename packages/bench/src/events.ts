/**
 * The event every workload appends: a short model reply whose state delta
 * touches one key in each scope (session, `user:`, `app:`, `temp:`).
 */
import { createEvent, createEventActions, type Event } from '@google/adk';

export function benchEvent(turn: number, invocationId: string, timestamp?: number): Event {
  const event = createEvent({
    invocationId,
    author: 'assistant',
    content: {
      role: 'model',
      parts: [{ text: `Turn ${turn}: the forecast for Lisbon is sunny with a high of 24 degrees.` }],
    },
    actions: createEventActions({
      stateDelta: {
        turn,
        'user:last_turn': turn,
        'app:turns_seen': turn,
        'temp:draft': `draft of turn ${turn}`,
      },
    }),
  });
  if (timestamp !== undefined) event.timestamp = timestamp;
  return event;
}

/** `count` events, built ahead of a timed loop so building them is not timed. */
export function benchEvents(count: number, invocationId: string): Event[] {
  return Array.from({ length: count }, (_, turn) => benchEvent(turn, invocationId));
}
