/** The data the read workloads run on, the same for every target. */
import type { Event } from '@google/adk';
import { benchEvent } from './events.js';

/** The state every seeded session starts with. */
export function sessionState(): Record<string, unknown> {
  return { topic: 'weather', turns: 0 };
}

/**
 * A history of `count` events as a session would hold it after `count`
 * appends: timestamps one millisecond apart, ending now, no `temp:` keys.
 */
export function historyEvents(count: number, invocationId: string): Event[] {
  const start = Date.now() - count;
  return Array.from({ length: count }, (_, turn) => {
    const event = benchEvent(turn, invocationId, start + turn);
    const delta = event.actions.stateDelta as Record<string, unknown>;
    for (const key of Object.keys(delta)) if (key.startsWith('temp:')) delete delta[key];
    return event;
  });
}
