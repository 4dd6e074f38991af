/**
 * Core with an `@google/adk` that has no `createEventActions` (the module
 * still loads, and events are decoded through `createEvent` itself).
 */
import { createEvent } from '@google/adk';
import { describe, expect, it, vi } from 'vitest';
import { DECODE_MODE, decodeEvent } from '../src/events.js';

vi.mock('@google/adk', async (original) => {
  // Undefined, as a real module namespace gives for a name it lacks (vitest's mock would throw instead).
  return { ...(await original<typeof import('@google/adk')>()), createEventActions: undefined };
});

describe('decodeEvent with an ADK without createEventActions', () => {
  it('decodes through createEvent', () => {
    expect(DECODE_MODE).toBe('createEvent');
    const stored = { id: 'e', timestamp: 2, json: '{"author":"a","actions":{"stateDelta":{"k":1}}}' };
    const expected = createEvent(JSON.parse(stored.json));
    expected.id = 'e';
    expected.timestamp = 2;
    expect(decodeEvent(stored)).toEqual(expected);
  });
});
