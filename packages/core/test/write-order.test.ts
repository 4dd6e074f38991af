/**
 * ADK's write-order marks decide what an append stores: a write that an
 * already stored one supersedes is left out; a failed append forgets what it
 * would have stored, so it never hides a later write.
 */
import { createEvent, type Event, State } from '@google/adk';
import { describe, expect, it } from 'vitest';
import { BackendError, StateSessionService } from '../src/index.js';
import type { AppendInput, SessionStore } from '../src/store-kit.js';

/** A store that takes every append (or fails the ones `fail` picks) and keeps what each was asked to write. */
function recordingStore(fail: (input: AppendInput) => boolean) {
  const appended: AppendInput[] = [];
  const store = {
    async createSession() {
      return { status: 'created', userState: new Map(), appState: new Map() };
    },
    async appendEvent(input: AppendInput) {
      if (fail(input)) throw new Error('the backend is down');
      appended.push(input);
      return { status: 'ok' };
    },
  } as unknown as SessionStore;
  return { store, appended };
}

function eventWith(delta: Record<string, unknown>): Event {
  return createEvent({ invocationId: 'i', author: 'agent', actions: { stateDelta: delta } as Event['actions'] });
}

describe('what an append stores under ADK write order', () => {
  it('leaves out the keys a stored newer write supersedes, in every scope, and keeps the rest', async () => {
    const { store, appended } = recordingStore(() => false);
    const service = new StateSessionService(store);
    const session = await service.createSession({ appName: 'a', userId: 'u', sessionId: 's' });
    const older: Record<string, unknown> = {};
    const newer: Record<string, unknown> = {};
    new State(session.state, older).update({ x: 1, 'user:x': 1, 'app:x': 1, only: 1 });
    new State(session.state, newer).update({ x: 2, 'user:x': 2, 'app:x': 2 });
    await service.appendEvent({ session, event: eventWith(newer) });
    await service.appendEvent({ session, event: eventWith(older) });
    const last = appended[1] as AppendInput;
    expect([...last.sessionDelta]).toEqual([['only', '1']]);
    expect(last.userDelta.size).toBe(0);
    expect(last.appDelta.size).toBe(0);
  });

  it('after a failed append, an older write is stored again: the failed one was never stored', async () => {
    let down = false;
    const { store, appended } = recordingStore(() => down);
    const service = new StateSessionService(store);
    const session = await service.createSession({ appName: 'a', userId: 'u', sessionId: 's' });
    const older: Record<string, unknown> = {};
    const newer: Record<string, unknown> = {};
    new State(session.state, older).set('x', 1);
    new State(session.state, newer).set('x', 2);
    down = true;
    await expect(service.appendEvent({ session, event: eventWith(newer) })).rejects.toBeInstanceOf(BackendError);
    down = false;
    await service.appendEvent({ session, event: eventWith(older) });
    expect([...(appended[0] as AppendInput).sessionDelta]).toEqual([['x', '1']]);
    // The retried newer write is stored over it.
    await service.appendEvent({ session, event: eventWith(newer) });
    expect([...(appended[1] as AppendInput).sessionDelta]).toEqual([['x', '2']]);
  });
});
