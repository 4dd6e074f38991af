/**
 * The service's cache of recently read logs: what it asks of a store that
 * reads incrementally, and that it never changes what a read returns.
 */
import { createEvent } from '@google/adk';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, StateSessionService } from '../src/index.js';
import { LogCache, logBytes } from '../src/log-cache.js';
import type {
  AppendInput,
  HeldSession,
  LoadResult,
  SessionKey,
  SessionStore,
  SinceResult,
  StoredEvent,
} from '../src/store-kit.js';

/** One session in memory, with an incremental read, counting what each read returned. */
function countingStore() {
  const events: StoredEvent[] = [];
  let revision = 7;
  let logMark = 'life-1';
  const calls: { method: string; held?: HeldSession; events: number }[] = [];
  const head = (): LoadResult['session'] => ({
    id: 's',
    appName: 'a',
    userId: 'u',
    lastUpdateTime: 1,
    revision,
    state: new Map([['n', String(events.length)]]),
  });
  const store = {
    async createSession() {
      return { status: 'created', userState: new Map(), appState: new Map() };
    },
    async appendEvent(input: AppendInput) {
      if (input.expectedRevision !== revision) return { status: 'stale', revision };
      events.push(input.event);
      revision++;
      return { status: 'ok' };
    },
    async loadSession(_key: SessionKey, filter: { limit?: number }): Promise<LoadResult> {
      const chosen = filter.limit === undefined ? events.slice() : events.slice(-filter.limit);
      calls.push({ method: 'loadSession', events: chosen.length });
      return { session: head(), userState: new Map(), appState: new Map(), events: chosen, logMark };
    },
    async loadSessionSince(_key: SessionKey, held: HeldSession): Promise<SinceResult> {
      const restart = held.logMark !== logMark;
      const chosen = restart ? events.slice() : events.slice(held.events);
      calls.push({ method: 'loadSessionSince', held, events: chosen.length });
      return { session: head(), userState: new Map(), appState: new Map(), events: chosen, logMark, restart };
    },
    async deleteSession() {},
  } as unknown as SessionStore;
  return {
    store,
    calls,
    newLife() {
      events.length = 0;
      logMark = 'life-2';
      revision = 100;
    },
  };
}

const key = { appName: 'a', userId: 'u', sessionId: 's' };
const event = (n: number) =>
  createEvent({ id: `e${n}`, invocationId: 'i', author: 'a', content: { parts: [{ text: `turn ${n}` }] } });

/** A second service on `store` that creates the session and holds it (read with a filter) for appends. */
async function writerOf(store: SessionStore) {
  const writer = new StateSessionService(store);
  await writer.createSession(key);
  const writing = await writer.getSession({ ...key, config: { numRecentEvents: 1 } });
  if (!writing) throw new Error('the session is stored');
  return { writer, writing };
}

describe('the cache of recently read logs', () => {
  it('a whole read of a session read before asks the store only for the events after the held ones', async () => {
    const { store, calls } = countingStore();
    const service = new StateSessionService(store);
    await service.createSession(key);
    for (let n = 1; n <= 3; n++) {
      const session = (await service.getSession(key)) ?? (await service.createSession(key));
      await service.appendEvent({ session, event: event(n) });
    }
    const read = await service.getSession(key);
    expect(read?.events.map((e) => e.id)).toEqual(['e1', 'e2', 'e3']);
    expect(read?.state.n).toBe(3);
    expect(calls.map((c) => [c.method, c.events, c.held?.events])).toEqual([
      ['loadSession', 0, undefined],
      ['loadSessionSince', 1, 0],
      ['loadSessionSince', 1, 1],
      ['loadSessionSince', 1, 2],
    ]);
    // Filtered reads go to loadSession as before.
    await service.getSession({ ...key, config: { numRecentEvents: 1 } });
    expect(calls.at(-1)).toEqual({ method: 'loadSession', events: 1 });
  });

  it('a store that answers with another life replaces the held log', async () => {
    const { store, calls, newLife } = countingStore();
    const service = new StateSessionService(store);
    await service.createSession(key);
    const session = await service.getSession(key);
    if (!session) throw new Error('the session is stored');
    await service.appendEvent({ session, event: event(1) });
    expect((await service.getSession(key))?.events).toHaveLength(1);
    newLife();
    expect((await service.getSession(key))?.events).toEqual([]);
    expect(calls.at(-1)?.held).toEqual({
      revision: 8,
      logMark: 'life-1',
      events: 1,
      lastEventId: 'e1',
      lastEvent: expect.objectContaining({ id: 'e1' }),
    });
    // The log read as the new life is the one held now.
    expect((await service.getSession(key))?.events).toEqual([]);
    expect(calls.at(-1)?.held).toEqual({ revision: 100, logMark: 'life-2', events: 0 });
  });

  it.each([
    false,
    true,
  ])('overlapping reads answered out of order each get the log as the store answered them (shareReadEvents: %s)', async (shareReadEvents) => {
    const { store } = countingStore();
    // Incremental reads wait until the test lets each one through, then answer with the log as it is then.
    const gates: (() => void)[] = [];
    const since = store.loadSessionSince?.bind(store) as NonNullable<SessionStore['loadSessionSince']>;
    store.loadSessionSince = async (...args) => {
      await new Promise<void>((open) => gates.push(open));
      return since(...args);
    };
    const service = new StateSessionService(store, { shareReadEvents });
    const { writer, writing } = await writerOf(store);
    const ids = (session: { events: { id: string }[] } | undefined) => session?.events.map((each) => each.id);
    await writer.appendEvent({ session: writing, event: event(1) });
    await service.getSession(key); // the first read: a whole load, held from now on
    const [first, second] = [service.getSession(key), service.getSession(key)];
    await writer.appendEvent({ session: writing, event: event(2) });
    await writer.appendEvent({ session: writing, event: event(3) });
    while (gates.length < 2) await new Promise((done) => setImmediate(done));
    // The second read is answered first: it grows the held log.
    gates[1]?.();
    const secondRead = await second;
    expect(ids(secondRead)).toEqual(['e1', 'e2', 'e3']);
    // The first is answered after one more append, from the length it sent: its own copy, not the grown log.
    await writer.appendEvent({ session: writing, event: event(4) });
    gates[0]?.();
    const firstRead = await first;
    expect(ids(firstRead)).toEqual(['e1', 'e2', 'e3', 'e4']);
    expect(ids(secondRead)).toEqual(['e1', 'e2', 'e3']);
    // A later read, and one after another append, see the whole log once each; earlier reads keep their own.
    const third = service.getSession(key);
    gates[2]?.();
    expect(ids(await third)).toEqual(['e1', 'e2', 'e3', 'e4']);
    await writer.appendEvent({ session: writing, event: event(5) });
    const fourth = service.getSession(key);
    while (gates.length < 4) await new Promise((done) => setImmediate(done));
    gates[3]?.();
    expect(ids(await fourth)).toEqual(['e1', 'e2', 'e3', 'e4', 'e5']);
    expect(ids(firstRead)).toEqual(['e1', 'e2', 'e3', 'e4']);
    expect(ids(secondRead)).toEqual(['e1', 'e2', 'e3']);
  });

  it.each([
    false,
    true,
  ])('overlapping reads whose answers and continuations interleave each get exactly the events of the head they were answered with (shareReadEvents: %s)', async (shareReadEvents) => {
    const { store } = countingStore();
    // A small deterministic generator: the same interleavings on every run.
    let seed = 12345;
    const next = (below: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % below;
    };
    const hops = async (count: number) => {
      for (let hop = 0; hop < count; hop++) await null;
    };
    const since = store.loadSessionSince?.bind(store) as NonNullable<SessionStore['loadSessionSince']>;
    store.loadSessionSince = async (...args) => {
      await hops(next(6));
      const answer = await since(...args);
      await hops(next(6));
      return answer;
    };
    const service = new StateSessionService(store, { shareReadEvents });
    const { writer, writing } = await writerOf(store);
    await service.getSession(key);
    let appended = 0;
    let writes: Promise<unknown> = Promise.resolve();
    for (let round = 0; round < 300; round++) {
      const reads: Promise<unknown>[] = [];
      for (let reader = 0; reader < 4; reader++) {
        reads.push(hops(next(12)).then(() => service.getSession(key)));
        // One append at a time (the writer's session object is current after each).
        if (next(2) === 0) {
          const after = hops(next(8));
          writes = writes
            .then(() => after)
            .then(() => writer.appendEvent({ session: writing, event: event(++appended) }));
          reads.push(writes);
        }
      }
      for (const read of await Promise.all(reads)) {
        if (!read || !('events' in (read as object))) continue;
        const session = read as { state: Record<string, unknown>; events: { id: string }[] };
        // The head says how many events the store held when it answered: the read has exactly those.
        expect(session.events.map((each) => each.id)).toEqual(
          Array.from({ length: Number(session.state.n) }, (_, at) => `e${at + 1}`),
        );
      }
    }
    expect(appended).toBeGreaterThan(20);
  });

  it('every read through the cache gets its own events, equal to a fresh decode, whatever an earlier reader did to its copy', async () => {
    const { store } = countingStore();
    const cached = new StateSessionService(store);
    const uncached = new StateSessionService(store, { logCacheBytes: 0 });
    await cached.createSession(key);
    const session = await cached.getSession(key);
    if (!session) throw new Error('the session is stored');
    const odd = JSON.parse('{"__proto__": {"deep": [1, {"x": null}]}, "n": 1.5}');
    await cached.appendEvent({
      session,
      event: createEvent({
        id: 'e1',
        invocationId: 'i',
        author: 'a',
        content: { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'tool', args: odd } }] },
        actions: { stateDelta: { k: { list: [1, 2] } } },
      }),
    });
    const first = await cached.getSession(key);
    const fresh = await uncached.getSession(key);
    expect(first?.events).toEqual(fresh?.events);
    const [copy] = first?.events ?? [];
    if (!copy) throw new Error('the event is read back');
    // Marked as ADK marks its events (createEvent's symbol keys).
    expect(Object.getOwnPropertySymbols(copy)).toEqual(Object.getOwnPropertySymbols(createEvent({})));
    const args = copy.content?.parts?.[0]?.functionCall?.args as Record<string, unknown>;
    expect(Object.keys(args)).toEqual(['__proto__', 'n']);
    expect(Object.getPrototypeOf(args)).toBe(Object.prototype);
    // Change the first read's event everywhere; the next reads do not see it.
    (args.__proto__ as { deep: unknown[] }).deep.push('changed');
    (copy.actions.stateDelta.k as { list: number[] }).list[0] = 99;
    copy.actions.artifactDelta.added = 1;
    copy.longRunningToolIds?.push('x');
    for (const reader of [cached, cached]) {
      const again = await reader.getSession(key);
      expect(again?.events).toEqual(fresh?.events);
      expect(again?.events[0]).not.toBe(copy);
    }
  });

  it('a copy takes only the own keys of each object: an enumerable key on Object.prototype stays out of it', async () => {
    const { store } = countingStore();
    const cached = new StateSessionService(store);
    await cached.createSession(key);
    const session = await cached.getSession(key);
    if (!session) throw new Error('the session is stored');
    await cached.appendEvent({
      session,
      event: createEvent({ id: 'e1', invocationId: 'i', author: 'a', actions: { stateDelta: { k: { list: [1] } } } }),
    });
    await cached.getSession(key); // held by the cache from here on
    const prototype = Object.prototype as Record<string, unknown>;
    prototype.polluted = 'inherited';
    try {
      const copy = (await cached.getSession(key))?.events[0];
      expect(Object.hasOwn(copy ?? {}, 'polluted')).toBe(false);
      expect(Object.hasOwn(copy?.actions.stateDelta.k ?? {}, 'polluted')).toBe(false);
      expect(Object.keys(copy?.actions.stateDelta.k ?? {})).toEqual(['list']);
    } finally {
      delete prototype.polluted;
    }
  });

  it('shareReadEvents: whole reads through the cache hand out the same events, frozen through and through, equal to a fresh decode; other reads are as without it', async () => {
    const { store } = countingStore();
    const sharing = new StateSessionService(store, { shareReadEvents: true });
    const uncached = new StateSessionService(store, { logCacheBytes: 0, shareReadEvents: true });
    await sharing.createSession(key);
    const session = (await sharing.getSession(key)) as NonNullable<Awaited<ReturnType<typeof sharing.getSession>>>;
    await sharing.appendEvent({
      session,
      event: createEvent({
        id: 'e1',
        invocationId: 'i',
        author: 'a',
        content: { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'tool', args: { deep: [{ x: 1 }] } } }] },
        actions: { stateDelta: { k: { list: [1, 2] } } },
      }),
    });
    // The caller's own event is not frozen by its append.
    expect(Object.isFrozen(session.events[0])).toBe(false);
    await sharing.appendEvent({ session, event: event(2) });
    const first = await sharing.getSession(key);
    const second = await sharing.getSession(key);
    const fresh = await uncached.getSession(key);
    expect(first?.events).toEqual(fresh?.events);
    expect(second?.events).not.toBe(first?.events);
    const [shared] = first?.events ?? [];
    if (!shared) throw new Error('the event is read back');
    expect(second?.events[0]).toBe(shared);
    expect(Object.getOwnPropertySymbols(shared)).toEqual(Object.getOwnPropertySymbols(createEvent({})));
    const args = shared.content?.parts?.[0]?.functionCall?.args as { deep: { x: number }[] };
    for (const value of [
      shared,
      shared.content,
      shared.content?.parts,
      args,
      args.deep,
      args.deep[0],
      shared.actions,
    ]) {
      expect(Object.isFrozen(value)).toBe(true);
    }
    expect(Object.isFrozen(shared.actions.stateDelta.k)).toBe(true);
    expect(() => {
      (args.deep[0] as { x: number }).x = 2;
    }).toThrow(TypeError);
    // Without the cache, and for filtered reads, every read decodes its own events, as without the option.
    expect(Object.isFrozen(fresh?.events[0])).toBe(false);
    const recent = await sharing.getSession({ ...key, config: { numRecentEvents: 1 } });
    expect(Object.isFrozen(recent?.events[0])).toBe(false);
    // Appended again (to the session read), a shared event is placed as a copy: ADK's append writes to what it places.
    const reread = (await sharing.getSession(key)) as NonNullable<typeof first>;
    const placed = await sharing.appendEvent({ session: reread, event: shared });
    expect(placed).not.toBe(shared);
    expect(Object.isFrozen(placed)).toBe(false);
    expect(reread.events[0]).toBe(placed);
    expect(shared.actions.stateDelta).toEqual({ k: { list: [1, 2] } });
    expect(() => new StateSessionService(store, { shareReadEvents: 'yes' as unknown as boolean })).toThrow(
      InvalidArgumentError,
    );
  });

  it('logCacheBytes: 0 never reads incrementally; a bad size is refused', async () => {
    const { store, calls } = countingStore();
    const service = new StateSessionService(store, { logCacheBytes: 0 });
    await service.getSession(key);
    await service.getSession(key);
    expect(calls.map((c) => c.method)).toEqual(['loadSession', 'loadSession']);
    for (const logCacheBytes of [-1, 0.5, Number.NaN, '1']) {
      expect(() => new StateSessionService(store, { logCacheBytes: logCacheBytes as number })).toThrow(
        InvalidArgumentError,
      );
    }
  });
});

describe('LogCache', () => {
  const log = (id: string, length: number): StoredEvent[] => [{ id, timestamp: 1, json: 'x'.repeat(length) }];
  const entry = (events: StoredEvent[]) => ({
    revision: 1,
    logMark: 'm',
    events: [],
    positions: new Map(),
    bytes: logBytes(events),
  });

  it('keeps at most maxBytes, dropping the least recently used first, and never an entry larger than itself', () => {
    const size = logBytes(log('a', 100));
    const cache = new LogCache(size * 2);
    cache.set('a', entry(log('a', 100)));
    cache.set('b', entry(log('b', 100)));
    cache.get('a');
    cache.set('c', entry(log('c', 100)));
    expect([cache.get('a') !== undefined, cache.get('b') !== undefined, cache.get('c') !== undefined]).toEqual([
      true,
      false,
      true,
    ]);
    expect(cache.bytes).toBe(size * 2);
    cache.set('big', entry(log('big', 1000)));
    expect(cache.get('big')).toBeUndefined();
    expect(cache.bytes).toBeLessThanOrEqual(size * 2);
    cache.delete('a');
    cache.delete('c');
    expect(cache.bytes).toBe(0);
  });
});
