/**
 * Random deltas in random scopes, applied through the memory store, always
 * equal a reference model that implements the scope rules in the plainest way.
 */
import type { Session } from '@google/adk';
import { createEvent } from '@google/adk';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemorySessionService } from '../src/index.js';

type Model = {
  app: Map<string, unknown>;
  users: Map<string, Map<string, unknown>>;
  sessions: Map<string, { userId: string; state: Map<string, unknown>; events: string[] }>;
};

const USERS = ['u1', 'u2', 'u:3'];
const SESSIONS = ['s1', 's2', 's3', 's:4'];
const KEYS = ['a', 'b', '__proto__', 'x.y', '$z'];
const PREFIXES = ['', 'user:', 'app:', 'temp:'];

const stateKey = fc.tuple(fc.constantFrom(...PREFIXES), fc.constantFrom(...KEYS)).map(([p, k]) => p + k);
// Values as JSON gives them back: fc.jsonValue can produce -0, which JSON (and so storage) writes as 0.
const jsonValue = fc.jsonValue({ maxDepth: 2 }).map((value) => JSON.parse(JSON.stringify(value)) as unknown);
const delta = fc.array(fc.tuple(stateKey, jsonValue), { maxLength: 6 });

const operation = fc.oneof(
  fc.record({
    kind: fc.constant('create' as const),
    userId: fc.constantFrom(...USERS),
    sessionId: fc.constantFrom(...SESSIONS),
    delta,
  }),
  fc.record({
    kind: fc.constant('append' as const),
    userId: fc.constantFrom(...USERS),
    sessionId: fc.constantFrom(...SESSIONS),
    delta,
  }),
  fc.record({
    kind: fc.constant('delete' as const),
    userId: fc.constantFrom(...USERS),
    sessionId: fc.constantFrom(...SESSIONS),
  }),
);

function toObject(entries: Array<[string, unknown]>): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const [key, value] of entries)
    Object.defineProperty(result, key, { value, enumerable: true, writable: true, configurable: true });
  return result;
}

function applyToModel(
  model: Model,
  userId: string,
  sessionState: Map<string, unknown>,
  entries: Array<[string, unknown]>,
): void {
  for (const [key, value] of entries) {
    if (key.startsWith('app:')) model.app.set(key.slice(4), value);
    else if (key.startsWith('user:')) {
      const user = model.users.get(userId) ?? new Map();
      user.set(key.slice(5), value);
      model.users.set(userId, user);
    } else if (!key.startsWith('temp:')) sessionState.set(key, value);
  }
}

function expectedState(model: Model, id: string): Array<[string, unknown]> {
  const stored = model.sessions.get(id);
  if (!stored) return [];
  const entries: Array<[string, unknown]> = [...stored.state];
  for (const [k, v] of model.app) entries.push([`app:${k}`, v]);
  for (const [k, v] of model.users.get(stored.userId) ?? new Map()) entries.push([`user:${k}`, v]);
  return entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function sortedEntries(state: Record<string, unknown> | undefined): Array<[string, unknown]> {
  return Object.keys(state ?? {})
    .sort()
    .map((key) => [key, Object.getOwnPropertyDescriptor(state, key)?.value]);
}

describe('the memory store against a reference model', () => {
  it('random deltas in random scopes give the state the scope rules define', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 25 }), async (operations) => {
        const service = new MemorySessionService();
        const model: Model = { app: new Map(), users: new Map(), sessions: new Map() };
        const live = new Map<string, Session>();
        for (const op of operations) {
          const id = JSON.stringify([op.userId, op.sessionId]);
          if (op.kind === 'create') {
            const exists = model.sessions.has(id);
            const created = await service
              .createSession({ appName: 'app', userId: op.userId, sessionId: op.sessionId, state: toObject(op.delta) })
              .then(
                (session) => session,
                (error: { code?: string }) => error.code,
              );
            if (exists) {
              expect(created).toBe('ALREADY_EXISTS');
            } else {
              const state = new Map<string, unknown>();
              model.sessions.set(id, { userId: op.userId, state, events: [] });
              applyToModel(model, op.userId, state, op.delta);
              live.set(id, created as Session);
            }
          } else if (op.kind === 'append') {
            const stored = model.sessions.get(id);
            const session = live.get(id);
            if (!stored || !session) continue;
            const event = createEvent({ author: 'x', actions: { stateDelta: toObject(op.delta) } as never });
            await service.appendEvent({ session, event });
            applyToModel(model, op.userId, stored.state, op.delta);
            stored.events.push(event.id);
          } else {
            await service.deleteSession({ appName: 'app', userId: op.userId, sessionId: op.sessionId });
            model.sessions.delete(id);
            live.delete(id);
          }
          for (const [key, stored] of model.sessions) {
            const [userId, sessionId] = JSON.parse(key) as [string, string];
            const loaded = await service.getSession({ appName: 'app', userId, sessionId });
            expect(sortedEntries(loaded?.state)).toEqual(expectedState(model, key));
            expect(loaded?.events.map((e) => e.id)).toEqual(stored.events);
          }
          const appState = await service.getAppState({ appName: 'app' });
          expect(sortedEntries(appState)).toEqual([...model.app].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
        }
      }),
      { numRuns: 150 },
    );
  });
});
