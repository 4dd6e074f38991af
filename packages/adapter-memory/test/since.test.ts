/** The memory store's incremental read, called directly (a service of its own drops what it deletes). */
import type { StoredEvent } from '@adk-state/core/store';
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../src/index.js';

const key = { appName: 'a', userId: 'u', sessionId: 's' };
const none = new Map<string, string>();
const event = (id: string, json = `{"id":"${id}"}`): StoredEvent => ({ id, timestamp: 1, json });

async function create(store: MemoryStore, revision: number): Promise<void> {
  await store.createSession({ key, state: none, userDelta: none, appDelta: none, createTime: 1, revision });
}

async function append(store: MemoryStore, expectedRevision: number, stored: StoredEvent): Promise<void> {
  const input = { key, expectedRevision, event: stored, sessionDelta: none, userDelta: none, appDelta: none };
  expect(await store.appendEvent({ ...input, lastUpdateTime: 2 })).toEqual({ status: 'ok' });
}

describe('MemoryStore.loadSessionSince', () => {
  it('gives the events after the held ones, and the whole log when the held copy is not its beginning', async () => {
    const store = new MemoryStore();
    await create(store, 10);
    await append(store, 10, event('e1'));
    await append(store, 11, event('e2'));
    const first = await store.loadSession(key, {});
    const logMark = first?.logMark as string;
    expect(logMark).toEqual(expect.any(String));
    const held = { revision: 12, logMark, events: 2 };
    await append(store, 12, event('e3'));
    const since = await store.loadSessionSince(key, held);
    expect([since?.restart, since?.events.map((e) => e.id), since?.session.revision]).toEqual([false, ['e3'], 13]);

    // An event written again in place: the held copy is stale.
    await append(store, 13, event('e1', '{"v":2}'));
    const rewritten = await store.loadSessionSince(key, { ...held, revision: 13, events: 3 });
    expect([rewritten?.restart, rewritten?.events.map((e) => e.json)]).toEqual([
      true,
      ['{"v":2}', '{"id":"e2"}', '{"id":"e3"}'],
    ]);

    // Deleted: nothing. Created again, even at a higher revision with the same ids: another life.
    await store.deleteSession(key);
    expect(await store.loadSessionSince(key, held)).toBeUndefined();
    await create(store, 100);
    await append(store, 100, event('e1'));
    await append(store, 101, event('e2'));
    await append(store, 102, event('e3'));
    const reborn = await store.loadSessionSince(key, held);
    expect(reborn?.restart).toBe(true);
    expect(reborn?.events.map((e) => e.id)).toEqual(['e1', 'e2', 'e3']);
    expect(reborn?.logMark).not.toBe(logMark);
  });
});
