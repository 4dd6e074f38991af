/** The event the adapter's own tests append: a state delta, optionally a model reply's text. */
import { createEvent, type Event } from '@google/adk';

export function testEvent(
  stateDelta: Record<string, unknown>,
  { timestamp = Date.now(), text }: { timestamp?: number; text?: string } = {},
): Event {
  return createEvent({
    invocationId: 'inv',
    author: 'agent',
    timestamp,
    ...(text === undefined ? {} : { content: { role: 'model', parts: [{ text }] } }),
    actions: { stateDelta, artifactDelta: {}, requestedAuthConfigs: {}, requestedToolConfirmations: {} },
  });
}
