/** Event log: append order, exact fields, real ADK events, and the read filters. */
import { createEvent, type Event } from '@google/adk';
import { expect } from 'vitest';
import { expectCode, type Group, ids, isAdkEvent, makeEvent, plain, put } from '../kit.js';

export const events: Group = {
  title: 'events keep their order and filter exactly',
  define({ test }) {
    test('events come back in append order, never re-sorted by timestamp', async (kit) => {
      const { service, session } = await kit.fresh();
      // The log is the conversation ADK replays; timestamps come from callers' clocks and may go back.
      const stamps = [5_000, 1_000, 9_000, 1_000, 3_000];
      const appended = [];
      for (const timestamp of stamps) appended.push(await put(service, session, {}, { timestamp }));
      const loaded = await kit.reload(session);
      expect(ids(loaded)).toEqual(appended.map((event) => event.id));
      expect(loaded.events.map((event) => event.timestamp)).toEqual(stamps);
    });

    test('numRecentEvents takes the last events appended, whatever their timestamps', async (kit) => {
      const { service, session } = await kit.fresh();
      // As ADK's own tests append them: createEvent({ timestamp: 0 }) gets the current time.
      for (let index = 0; index < 5; index++) {
        await service.appendEvent({ session, event: createEvent({ timestamp: index }) });
      }
      const loaded = await kit.reload(session, { numRecentEvents: 2 });
      expect(loaded.events.map((event) => event.timestamp)).toEqual([3, 4]);
    });

    test('a bare event (createEvent() with nothing, or only a timestamp) reads back equal to itself', async (kit) => {
      const { service, session } = await kit.fresh();
      const bare = createEvent();
      const timed = createEvent({ timestamp: 1_234 });
      await service.appendEvent({ session, event: bare });
      await service.appendEvent({ session, event: timed });
      const loaded = await kit.reload(session);
      // Every enumerable field, the ADK event mark and the empty action maps included.
      expect(loaded.events[0]).toEqual(bare);
      expect(loaded.events[1]).toEqual(timed);
      expect(loaded.events.every(isAdkEvent)).toBe(true);
      expect(loaded.lastUpdateTime).toBe(1_234);
    });

    test('events are rebuilt as real ADK events with every field intact', async (kit) => {
      const { service, session } = await kit.fresh();
      const event = makeEvent(
        { k: { deep: [1] } },
        {
          author: 'planner',
          invocationId: 'inv-42',
          branch: 'root.planner',
          timestamp: 1_700_000_000_123.5,
          customMetadata: { 'a.b': 1, $c: [true] },
          content: {
            role: 'model',
            parts: [{ text: 'line1\nline2 🚀' }, { functionCall: { name: 'f', args: { x: 1 } } }],
          },
        },
      );
      await service.appendEvent({ session, event });
      const loaded = await kit.reload(session);
      const stored = loaded.events[0];
      expect(isAdkEvent(stored)).toBe(true);
      expect(stored?.id).toBe(event.id);
      expect(stored?.author).toBe('planner');
      expect(stored?.invocationId).toBe('inv-42');
      expect(stored?.branch).toBe('root.planner');
      expect(stored?.timestamp).toBe(1_700_000_000_123.5);
      expect(stored?.customMetadata).toEqual({ 'a.b': 1, $c: [true] });
      expect(stored?.content).toEqual(event.content);
      expect(plain(stored?.actions.stateDelta)).toEqual({ k: { deep: [1] } });
    });

    test('an event using every field of an ADK event reads back equal to the event the append returned', async (kit) => {
      const { service, session } = await kit.fresh();
      const event = makeEvent({}, {
        actions: {
          stateDelta: { k: 1 },
          artifactDelta: { 'report.md': 2 },
          transferToAgent: 'helper',
          escalate: true,
          skipSummarization: true,
          requestedAuthConfigs: { call1: { authScheme: { type: 'http', scheme: 'bearer' }, credentialKey: 'key1' } },
          requestedToolConfirmations: { call2: { hint: 'sure?', confirmed: false } },
        } as Event['actions'],
        longRunningToolIds: ['call3'],
        partial: false,
        turnComplete: true,
        interrupted: false,
        errorCode: 'SAFETY',
        errorMessage: 'blocked',
        usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 3, totalTokenCount: 13 },
        groundingMetadata: { webSearchQueries: ['adk'] },
      } as Partial<Event>);
      const returned = await service.appendEvent({ session, event });
      const loaded = await kit.reload(session);
      expect(loaded.events).toHaveLength(1);
      expect(JSON.parse(JSON.stringify(loaded.events[0]))).toEqual(JSON.parse(JSON.stringify(returned)));
      // An event without actions' optional parts, and one with an empty delta, are stored as they are.
      const bare = makeEvent({}, { actions: { stateDelta: {} } as Event['actions'] });
      await service.appendEvent({ session: loaded, event: bare });
      expect(plain((await kit.reload(session)).state)).toEqual({ k: 1 });
    });

    test('the stored lastUpdateTime is the timestamp of the last appended event, even an older one', async (kit) => {
      const { service, session } = await kit.fresh();
      // As in ADK's own services: the last event's timestamp, not the largest one.
      await put(service, session, {}, { timestamp: 2_000_000_000_000 });
      expect(session.lastUpdateTime).toBe(2_000_000_000_000);
      await put(service, session, {}, { timestamp: 1_000_000_000_000 });
      expect(session.lastUpdateTime).toBe(1_000_000_000_000);
      const loaded = await kit.reload(session);
      expect(loaded.lastUpdateTime).toBe(1_000_000_000_000);
    });

    test('numRecentEvents keeps the last n; 0 gives none; more than stored gives all', async (kit) => {
      const { service, session } = await kit.fresh();
      const appended = [];
      for (let i = 0; i < 7; i++) appended.push((await put(service, session, { i })).id);
      const read = (numRecentEvents: number) => kit.reload(session, { numRecentEvents });
      expect(ids(await read(3))).toEqual(appended.slice(4));
      expect(ids(await read(1))).toEqual(appended.slice(6));
      expect(ids(await read(0))).toEqual([]);
      expect(ids(await read(100))).toEqual(appended);
      expect(plain((await read(0)).state)).toEqual({ i: 6 });
    });

    test('a negative or fractional numRecentEvents is an InvalidArgumentError', async (kit) => {
      const { service, session, appName } = await kit.fresh();
      for (const numRecentEvents of [-1, 1.5, Number.NaN]) {
        const error = await expectCode(
          service.getSession({ appName, userId: 'u1', sessionId: session.id, config: { numRecentEvents } }),
          'INVALID_ARGUMENT',
          'InvalidArgumentError',
        );
        // A negative or fractional count has no meaning as a filter: refused, never guessed at.
        expect(error.message).toMatch(/greater than or equal to 0/);
      }
    });

    test('afterTimestamp keeps the events strictly after it', async (kit) => {
      const { service, session } = await kit.fresh();
      const appended = [];
      for (const timestamp of [1_000, 2_000, 3_000, 4_000])
        appended.push((await put(service, session, {}, { timestamp })).id);
      const read = (afterTimestamp: number, numRecentEvents?: number) =>
        kit.reload(session, numRecentEvents === undefined ? { afterTimestamp } : { afterTimestamp, numRecentEvents });
      expect(ids(await read(2_000))).toEqual(appended.slice(2));
      expect(ids(await read(2_500))).toEqual(appended.slice(2));
      expect(ids(await read(999))).toEqual(appended);
      expect(ids(await read(4_000))).toEqual([]);
      expect(ids(await read(1_000, 2))).toEqual(appended.slice(2));
      expect(ids(await read(1_000, 0))).toEqual([]);
    });

    test('afterTimestamp bounds to the millisecond, not to the second', async (kit) => {
      const { service, session } = await kit.fresh();
      const appended = [];
      for (const timestamp of [1_200, 1_400, 1_600]) appended.push((await put(service, session, {}, { timestamp })).id);
      const read = (afterTimestamp: number) => kit.reload(session, { afterTimestamp });
      expect(ids(await read(1_300))).toEqual(appended.slice(1));
      expect(ids(await read(1_400))).toEqual(appended.slice(2));
      expect(ids(await read(1_599))).toEqual(appended.slice(2));
      expect(ids(await read(1_000))).toEqual(appended);
    });

    test('an infinite afterTimestamp is a bound like any other: -Infinity keeps every event, +Infinity none', async (kit) => {
      const { service, session } = await kit.fresh();
      const appended = [];
      for (const timestamp of [1_000, 2_000, 3_000]) appended.push((await put(service, session, {}, { timestamp })).id);
      const read = (afterTimestamp: number, numRecentEvents?: number) =>
        kit.reload(session, numRecentEvents === undefined ? { afterTimestamp } : { afterTimestamp, numRecentEvents });
      expect(ids(await read(Number.NEGATIVE_INFINITY))).toEqual(appended);
      expect(ids(await read(Number.NEGATIVE_INFINITY, 2))).toEqual(appended.slice(1));
      expect(ids(await read(Number.POSITIVE_INFINITY))).toEqual([]);
      expect(ids(await read(Number.POSITIVE_INFINITY, 2))).toEqual([]);
      const loaded = await kit.reload(session, { afterTimestamp: Number.POSITIVE_INFINITY });
      expect(loaded.id).toBe(session.id);
    });

    test('afterTimestamp on a log whose timestamps go back keeps the tail after the last event at or before it', async (kit) => {
      const { service, session } = await kit.fresh();
      const appended = [];
      for (const timestamp of [5_000, 1_000, 7_000, 8_000])
        appended.push((await put(service, session, {}, { timestamp })).id);
      // Scanned back from the newest event, as ADK's InMemorySessionService scans, so the answer is always a tail of the log.
      const read = (afterTimestamp: number) => kit.reload(session, { afterTimestamp });
      expect(ids(await read(3_000))).toEqual(appended.slice(2));
      expect(ids(await read(6_000))).toEqual(appended.slice(2));
      expect(ids(await read(500))).toEqual(appended);
      expect(ids(await read(7_500))).toEqual(appended.slice(3));
    });

    test('the state is whole whatever the event filter', async (kit) => {
      const { service, session } = await kit.fresh();
      await put(service, session, { a: 1, 'user:b': 2 }, { timestamp: 1_000 });
      await put(service, session, { c: 3, 'app:d': 4 }, { timestamp: 2_000 });
      const loaded = await kit.reload(session, { afterTimestamp: 5_000, numRecentEvents: 0 });
      expect(plain(loaded.state)).toEqual({ a: 1, c: 3, 'user:b': 2, 'app:d': 4 });
      expect(loaded.events).toEqual([]);
    });

    test('a partial event is returned untouched and nothing is stored', async (kit) => {
      const { service, session } = await kit.fresh();
      // A partial event is a streamed chunk; ADK stores only the final event that follows it.
      const event = makeEvent({ 'temp:t': 1, a: 1 }, { partial: true });
      const returned = await service.appendEvent({ session, event });
      expect(returned).toBe(event);
      expect(plain(event.actions.stateDelta)).toEqual({ 'temp:t': 1, a: 1 });
      expect(session.events).toEqual([]);
      expect(plain(session.state)).toEqual({});
      const loaded = await kit.reload(session);
      expect(loaded.events).toEqual([]);
      expect(plain(loaded.state)).toEqual({});
      await put(service, session, { b: 1 });
      expect(plain(session.state)).toEqual({ b: 1 });
    });
  },
};
