/**
 * Imports through a store without its own `importSession`: the service
 * creates the session and appends the events one by one, and an event that
 * fails removes what the import wrote of the session.
 */
import { createEvent, type Session } from '@google/adk';
import { describe, expect, it } from 'vitest';
import { BackendError, InvalidArgumentError, StateSessionService } from '../src/index.js';
import type { AppendInput, CreateInput, LoadResult, SessionKey, SessionStore, StoredEvent } from '../src/store.js';

/** A store of one session at a time, whose append refuses the event `bad` as the Firestore store refuses one too large. */
function storeRefusing(options: { deleteFails?: boolean; interloper?: boolean } = {}) {
  let stored: { input: CreateInput; revision: number; events: StoredEvent[] } | undefined;
  const deletes: SessionKey[] = [];
  const store = {
    async createSession(input: CreateInput) {
      stored = { input, revision: input.revision, events: [] };
      return { status: 'created', userState: new Map(), appState: new Map() };
    },
    async appendEvent(input: AppendInput) {
      if (!stored) return { status: 'missing' };
      if (input.expectedRevision !== stored.revision) return { status: 'stale', revision: stored.revision };
      if (input.event.id === 'bad') {
        // Another writer's append lands while this one fails (its outcome unknown to the importer).
        if (options.interloper) {
          stored.events.push({ id: 'theirs', timestamp: 99, json: '{}' });
          stored.revision++;
        }
        throw new InvalidArgumentError('event', 'too large for this store; nothing was written');
      }
      if (input.event.id === 'down') throw new Error('connection reset');
      const at = stored.events.findIndex((event) => event.id === input.event.id);
      if (at >= 0) {
        // An id appended again replaces its event in place.
        stored.events[at] = input.event;
        stored.revision++;
        return { status: 'ok' };
      }
      stored.events.push(input.event);
      stored.revision++;
      return { status: 'ok' };
    },
    async loadSession(_key: SessionKey, filter: { limit?: number }): Promise<LoadResult | undefined> {
      if (!stored) return undefined;
      const { input, revision, events } = stored;
      return {
        session: { ...input.key, id: input.key.sessionId, lastUpdateTime: 1, revision, state: input.state },
        userState: new Map(),
        appState: new Map(),
        events: filter.limit === undefined ? events.slice() : events.slice(-filter.limit),
      };
    },
    async deleteSession(key: SessionKey) {
      deletes.push(key);
      if (options.deleteFails) throw new Error('connection reset');
      stored = undefined;
    },
  } as unknown as SessionStore;
  return { store, deletes, stored: () => stored };
}

function source(ids: string[]): Session {
  return {
    id: 's',
    appName: 'a',
    userId: 'u',
    state: { k: 1 },
    lastUpdateTime: ids.length + 1,
    events: ids.map((id, at) => createEvent({ id, invocationId: 'i', author: 'a', timestamp: at + 1 })),
  };
}

describe('an import through createSession and appendEvent', () => {
  it('stores every event in order', async () => {
    const { store } = storeRefusing();
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    expect(await service.importSession(source(['e1', 'e2', 'e3']))).toBe('imported');
    const read = await service.getSession({ appName: 'a', userId: 'u', sessionId: 's' });
    expect(read?.events.map((event) => event.id)).toEqual(['e1', 'e2', 'e3']);
  });

  it('that fails at an event removes the session it created, and throws the event’s own error', async () => {
    const { store, deletes, stored } = storeRefusing();
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    const failure = await service.importSession(source(['e1', 'e2', 'bad', 'e4'])).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(InvalidArgumentError);
    expect(deletes).toEqual([{ appName: 'a', userId: 'u', sessionId: 's' }]);
    expect(stored()).toBeUndefined();
    expect(await service.getSession({ appName: 'a', userId: 'u', sessionId: 's' })).toBeUndefined();
  });

  it('that fails after an id appended again (replaced in place) removes the session all the same', async () => {
    const { store, deletes, stored } = storeRefusing();
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    const failure = await service.importSession(source(['e1', 'e2', 'e1', 'bad'])).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(InvalidArgumentError);
    expect(deletes).toHaveLength(1);
    expect(stored()).toBeUndefined();
  });

  it('that fails because the backend failed does not try to remove it (each try would wait out timeoutMs again), and says so', async () => {
    const { store, deletes, stored } = storeRefusing();
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    const failure = await service.importSession(source(['e1', 'down'])).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BackendError);
    expect(failure).toMatchObject({ operation: 'importSession', mayHaveApplied: true });
    expect((failure as Error).message).toContain('event 2 of 2 failed (connection reset)');
    expect((failure as Error).message).toContain('removing what was imported was not tried');
    expect(deletes).toEqual([]);
    expect(stored()?.events.map((event) => event.id)).toEqual(['e1']);
  });

  it('leaves the session alone when another writer wrote to it meanwhile, and says so', async () => {
    const { store, deletes, stored } = storeRefusing({ interloper: true });
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    const failure = await service.importSession(source(['e1', 'bad'])).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BackendError);
    expect(failure).toMatchObject({ operation: 'importSession', mayHaveApplied: true });
    expect((failure as Error).message).toContain('another writer has written to it since');
    expect(deletes).toEqual([]);
    expect(stored()?.events.map((event) => event.id)).toEqual(['e1', 'theirs']);
  });

  it('whose removal fails too says that part of the session may remain', async () => {
    const { store, stored } = storeRefusing({ deleteFails: true });
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    const failure = await service.importSession(source(['e1', 'bad'])).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BackendError);
    expect(failure).toMatchObject({ operation: 'importSession', mayHaveApplied: true });
    expect((failure as Error).message).toContain('event 2 of 2 failed');
    expect((failure as Error).message).toContain('may remain with its first 1 event(s) or more');
    expect((failure as Error).message).toContain('removing it failed too (connection reset)');
    expect(stored()?.events.map((event) => event.id)).toEqual(['e1']);
  });
});

describe('an import with replace', () => {
  /** A store with its own importSession, which refuses having written nothing (as one that finds a record it cannot read). */
  function refusingImport() {
    const calls: string[] = [];
    const store = {
      async deleteSession() {
        calls.push('delete');
      },
      async importSession() {
        calls.push('import');
        throw new BackendError('importSession', new Error('a stored record is not what adk-state writes'), {
          kind: 'unreadable-data',
          mayHaveApplied: false,
        });
      },
    } as unknown as SessionStore;
    return { store, calls };
  }

  it('whose import fails after the delete says the call may have applied (the stored session may be gone)', async () => {
    const { store, calls } = refusingImport();
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    const failure = await service.importSession(source(['e1']), { replace: true }).catch((error: unknown) => error);
    expect(calls).toEqual(['delete', 'import']);
    expect(failure).toBeInstanceOf(BackendError);
    expect((failure as BackendError).mayHaveApplied).toBe(true);
    expect((failure as BackendError).kind).toBe('unreadable-data');
    expect((failure as Error).message).toContain('the stored session was deleted (replace), then the import failed');
    expect((failure as Error).message).toContain('a stored record is not what adk-state writes');
  });

  it('without replace, the same failure says nothing was written', async () => {
    const { store, calls } = refusingImport();
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    const failure = await service.importSession(source(['e1'])).catch((error: unknown) => error);
    expect(calls).toEqual(['import']);
    expect((failure as BackendError).mayHaveApplied).toBe(false);
  });
});
