/**
 * Reading a session again: a service may keep the logs it read and ask the
 * store only for what follows (a store with `loadSessionSince`). Whatever it
 * keeps, a whole read is exactly what a service that keeps nothing reads:
 * writes through another instance, events appended again under their ids,
 * deletes, expiry and ids created again are all seen.
 */
import type { Event, Session } from '@google/adk';
import { expect } from 'vitest';
import {
  allAwaited,
  expectCode,
  type Group,
  handed,
  ids,
  nextTime,
  plain,
  put,
  type TestKit,
  whileWriting,
} from '../kit.js';
import type { ConformanceService, ConformanceServiceOptions } from '../target.js';

/** What a read shows, as plain data: the state and every event as JSON. */
function shown(session: Session | undefined): unknown {
  if (!session) return undefined;
  return {
    state: plain(session.state),
    events: session.events.map((event) => JSON.parse(JSON.stringify(event)) as unknown),
    lastUpdateTime: session.lastUpdateTime,
  };
}

/** Reads `key` whole through `reader` and through `plainReader` (no cache) and expects the same. */
async function expectSameRead(
  reader: ConformanceService,
  plainReader: ConformanceService,
  key: { appName: string; userId: string; sessionId: string },
  step: string,
): Promise<Session | undefined> {
  const read = await reader.getSession(key);
  const reference = await plainReader.getSession(key);
  expect(shown(read), `${step}: the read of a service that keeps logs against one that keeps none`).toEqual(
    shown(reference),
  );
  return read;
}

/**
 * The cast of a test: a writer, a reader that keeps the logs it reads (made
 * with `readerOptions`), a reader that keeps none (the reference), a new app
 * and the key `s1` of user `u1`.
 */
async function cast(kit: TestKit, readerOptions: ConformanceServiceOptions = {}) {
  const writer = await kit.service();
  const reader = await kit.service(readerOptions);
  const plainReader = await kit.service({ logCacheBytes: 0 });
  const appName = kit.app();
  return { writer, reader, plainReader, appName, key: { appName, userId: 'u1', sessionId: 's1' } };
}

/**
 * The readers the tests against another instance run with: the default one,
 * which copies every event it hands out, and one whose whole reads share the
 * cached events, frozen (`shareReadEvents`).
 */
const READERS: ReadonlyArray<{ suffix: string; options: ConformanceServiceOptions }> = [
  { suffix: '', options: {} },
  { suffix: ' (a reader sharing frozen events)', options: { shareReadEvents: true } },
];

function textOf(session: Session | undefined, index: number): string | undefined {
  return session?.events[index]?.content?.parts?.[0]?.text;
}

export const incremental: Group = {
  title: 'a session read again shows every change, whatever the service keeps of earlier reads',
  define({ test }) {
    test('whole reads after appends through the same service show every event and the state; filtered reads are unchanged', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1', state: { n: 0 } });
      const key = { appName, userId: 'u1', sessionId: 's1' };
      const appended: string[] = [];
      for (let n = 1; n <= 6; n++) {
        appended.push((await put(service, session, { n, 'user:n': n, 'app:n': n }, { text: `turn ${n}` })).id);
        const read = await service.getSession(key);
        expect(ids(read)).toEqual(appended);
        expect(plain(read?.state)).toEqual({ n, 'user:n': n, 'app:n': n });
        expect(textOf(read, n - 1)).toBe(`turn ${n}`);
      }
      const tail = await service.getSession({ ...key, config: { numRecentEvents: 2 } });
      expect(ids(tail)).toEqual(appended.slice(-2));
      // Each read is a copy of its own: changing one changes no later read.
      const first = await service.getSession(key);
      (first?.events[0]?.content?.parts?.[0] as { text?: string }).text = 'changed by the caller';
      first?.events.pop();
      expect(textOf(await service.getSession(key), 0)).toBe('turn 1');
      expect(ids(await service.getSession(key))).toEqual(appended);
    });

    test('an event appended again under its id is read with its new content, in its place', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1' });
      const key = { appName, userId: 'u1', sessionId: 's1' };
      const first = await put(service, session, { n: 1 }, { text: 'first version' });
      await put(service, session, { n: 2 }, { text: 'second' });
      expect(textOf(await service.getSession(key), 0)).toBe('first version');
      await put(service, session, { n: 3 }, { id: first.id, text: 'first, rewritten' });
      const read = await service.getSession(key);
      expect(read?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual(['first, rewritten', 'second']);
      expect(plain(read?.state)).toEqual({ n: 3 });
    });

    test('a session deleted and created again through the same service reads as its new life only', async (kit) => {
      const { service, session, appName } = await kit.fresh({ sessionId: 's1', state: { life: 1 } });
      const key = { appName, userId: 'u1', sessionId: 's1' };
      await put(service, session, { n: 1 }, { id: 'e1', text: 'old 1' });
      await put(service, session, { n: 2 }, { id: 'e2', text: 'old 2' });
      expect(ids(await service.getSession(key))).toEqual(['e1', 'e2']);
      await service.deleteSession(key);
      expect(await service.getSession(key)).toBeUndefined();
      const reborn = await service.createSession({ ...key, state: { life: 2 } });
      await put(service, reborn, { n: 10 }, { id: 'x1', text: 'new 1' });
      await put(service, reborn, { n: 11 }, { id: 'e2', text: 'new 2' });
      const read = await service.getSession(key);
      expect(read?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual(['new 1', 'new 2']);
      expect(plain(read?.state)).toEqual({ life: 2, n: 11 });
    });

    test('a cache too small for one session, and no cache at all, read the same; a bad size is refused', async (kit) => {
      const appName = kit.app();
      const tiny = await kit.service({ logCacheBytes: 1 });
      const none = await kit.service({ logCacheBytes: 0 });
      for (const service of [tiny, none]) {
        const key = { appName, userId: service === tiny ? 'tiny' : 'none', sessionId: 's1' };
        const session = await service.createSession(key);
        const appended: string[] = [];
        for (let n = 1; n <= 4; n++) {
          appended.push((await put(service, session, { n })).id);
          const read = await service.getSession(key);
          expect(ids(read)).toEqual(appended);
          expect(read?.state.n).toBe(n);
        }
      }
      for (const logCacheBytes of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1000']) {
        await expectCode(
          kit.service({ logCacheBytes: logCacheBytes as number }),
          'INVALID_ARGUMENT',
          'InvalidArgumentError',
        );
      }
    });

    test('with shareReadEvents, what one whole read does to its session never reaches another read: shared events are frozen, the array and the state are its own; a bad value is refused', async (kit) => {
      const { service, session, appName } = await kit.fresh({
        sessionId: 's1',
        state: { n: 0 },
        serviceOptions: { shareReadEvents: true },
      });
      const key = { appName, userId: 'u1', sessionId: 's1' };
      const appended: string[] = [];
      for (let n = 1; n <= 3; n++) appended.push((await put(service, session, { n }, { text: `turn ${n}` })).id);
      const first = (await service.getSession(key)) as Session;
      const second = (await service.getSession(key)) as Session;
      expect(ids(first)).toEqual(appended);
      expect(second.events).not.toBe(first.events);
      expect(second.state).not.toBe(first.state);
      // A service may hand both reads one event object only if nothing can change it in place.
      const target = first.events[0] as Event;
      const part = target.content?.parts?.[0] as { text?: string };
      const shared = target === second.events[0];
      if (shared) {
        expect(Object.isFrozen(target) && Object.isFrozen(part) && Object.isFrozen(target.actions.stateDelta)).toBe(
          true,
        );
        expect(() => {
          part.text = 'changed by the caller';
        }).toThrow(TypeError);
        expect(() => {
          target.actions.stateDelta.n = 'changed';
        }).toThrow(TypeError);
      } else {
        part.text = 'changed by the caller';
        target.actions.stateDelta.n = 'changed';
      }
      first.events.pop();
      first.events.push(first.events[0] as Event);
      first.state.n = 'changed';
      const third = (await service.getSession(key)) as Session;
      expect(ids(third)).toEqual(appended);
      expect(textOf(third, 0)).toBe('turn 1');
      expect(third.events[0]?.actions.stateDelta).toEqual({ n: 1 });
      expect(plain(third.state)).toEqual({ n: 3 });
      // Appends through a read session, a new event and one under an id already there, go on as with copies.
      await put(service, second, { n: 4 }, { text: 'turn 4' });
      await put(service, second, { n: 5 }, { id: appended[0] as string, text: 'turn 1, rewritten' });
      expect(second.events.map((event) => event.content?.parts?.[0]?.text)).toEqual([
        'turn 1, rewritten',
        'turn 2',
        'turn 3',
        'turn 4',
      ]);
      const fourth = await service.getSession(key);
      expect(fourth?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual([
        'turn 1, rewritten',
        'turn 2',
        'turn 3',
        'turn 4',
      ]);
      expect(plain(fourth?.state)).toEqual({ n: 5 });
      // The reads made before hold what they read.
      expect(textOf(third, 0)).toBe('turn 1');
      // An event of a read appended again, to another session: stored there, the read's own unchanged.
      const other = await service.createSession({ ...key, sessionId: 's2' });
      const copied = third.events[1] as Event;
      await put(service, other, {}, {});
      await service.appendEvent({ session: other, event: copied });
      const otherRead = await service.getSession({ ...key, sessionId: 's2' });
      expect(textOf(otherRead, 1)).toBe('turn 2');
      expect(plain(otherRead?.state)).toEqual({ n: 2 });
      expect(third.events[1]).toBe(copied);
      expect(copied.actions.stateDelta).toEqual({ n: 2 });
      for (const shareReadEvents of ['yes', 1, null]) {
        await expectCode(
          kit.service({ shareReadEvents: shareReadEvents as unknown as boolean }),
          'INVALID_ARGUMENT',
          'InvalidArgumentError',
        );
      }
    });

    for (const { suffix, options } of READERS) {
      test(
        'writes through another instance are in the next whole read, state, buckets and events, turn after turn' +
          suffix,
        async (kit) => {
          const { writer, reader, plainReader, key } = await cast(kit, options);
          const session = await writer.createSession({ ...key, state: { n: 0 } });
          const other = await writer.createSession({ ...key, sessionId: 's2' });
          await expectSameRead(reader, plainReader, key, 'before any append');
          for (let n = 1; n <= 8; n++) {
            await put(writer, session, { n, 'user:n': n, 'app:n': n }, { text: `turn ${n}` });
            // A write to the buckets through another session changes no revision of this one.
            if (n % 3 === 0) await put(writer, other, { 'user:other': n, 'app:other': n });
            const read = await expectSameRead(reader, plainReader, key, `after append ${n}`);
            expect(read?.events).toHaveLength(n);
          }
          // Appends made by the reader's own service go on from there.
          const loaded = (await reader.getSession(key)) as Session;
          await put(reader, loaded, { n: 9 });
          const read = await expectSameRead(reader, plainReader, key, 'after the reader appended');
          expect(read?.events).toHaveLength(9);
        },
        { requires: 'sharedBackend' },
      );

      test(
        `an event appended again under its id through another instance is read with its new content${suffix}`,
        async (kit) => {
          const { writer, reader, plainReader, key } = await cast(kit, options);
          const session = await writer.createSession(key);
          const first = await put(writer, session, { n: 1 }, { text: 'first version' });
          await put(writer, session, { n: 2 }, { text: 'second' });
          await put(writer, session, { n: 3 }, { text: 'third' });
          await expectSameRead(reader, plainReader, key, 'before the rewrite');
          await put(writer, session, { n: 4 }, { id: first.id, text: 'first, rewritten' });
          const read = await expectSameRead(reader, plainReader, key, 'after the rewrite');
          expect(textOf(read, 0)).toBe('first, rewritten');
          await put(writer, session, { n: 5 }, { text: 'fourth' });
          const later = await expectSameRead(reader, plainReader, key, 'after one more append');
          expect(later?.events).toHaveLength(4);
        },
        { requires: 'sharedBackend' },
      );

      test(
        'deleted through another instance, the session is gone for the reader; created again with the same event ids, the reader reads the new life only' +
          suffix,
        async (kit) => {
          const { writer: other, reader, plainReader, key } = await cast(kit, options);
          const old = await other.createSession({ ...key, state: { life: 1 } });
          for (const id of ['e1', 'e2', 'e3']) await put(other, old, { last: id }, { id, text: `old ${id}` });
          await expectSameRead(reader, plainReader, key, 'the first life');

          await other.deleteSession(key);
          expect(await reader.getSession(key)).toBeUndefined();

          // The new life: as many events, the same ids at the same places, other content; then one more.
          const reborn = await other.createSession({ ...key, state: { life: 2 } });
          for (const id of ['e1', 'e2', 'e3']) await put(other, reborn, { last: id }, { id, text: `new ${id}` });
          await put(other, reborn, { last: 'e4' }, { id: 'e4', text: 'new e4' });
          const read = await expectSameRead(reader, plainReader, key, 'the second life');
          expect(read?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual([
            'new e1',
            'new e2',
            'new e3',
            'new e4',
          ]);
          expect(plain(read?.state)).toEqual({ life: 2, last: 'e4' });

          // Deleted and created again between two reads with nothing appended: an empty log.
          await other.deleteSession(key);
          await other.createSession({ ...key, state: { life: 3 } });
          const empty = await expectSameRead(reader, plainReader, key, 'the third life');
          expect(empty?.events).toEqual([]);
        },
        { requires: 'sharedBackend' },
      );

      test(
        'writes the backend lost, and others it took since at the same revisions, are seen: lost appends, a lost write in place' +
          suffix,
        async (kit) => {
          const { writer, reader, plainReader, key } = await cast(kit, options);
          const control = handed(kit.lostWrites, 'lostWrites');
          const session = await writer.createSession({ ...key, state: { n: 0 } });
          for (let n = 1; n <= 3; n++) await put(writer, session, { n }, { text: `turn ${n}` });
          let restore = await control.snapshot(key);
          await put(writer, session, { n: 4 }, { text: 'turn 4, lost' });
          await put(writer, session, { n: 5 }, { text: 'turn 5, lost' });
          expect((await reader.getSession(key))?.events).toHaveLength(5);
          await restore();
          // After the loss, writes from a session read anew: the same revisions again, other events.
          let current = (await plainReader.getSession(key)) as Session;
          for (let n = 4; n <= 6; n++) await put(plainReader, current, { n }, { text: `turn ${n}, after the loss` });
          let read = await expectSameRead(reader, plainReader, key, 'after lost appends and three others');
          expect(read?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual([
            'turn 1',
            'turn 2',
            'turn 3',
            'turn 4, after the loss',
            'turn 5, after the loss',
            'turn 6, after the loss',
          ]);

          // An event written again in place, lost; then another written again in place at the same revision.
          current = (await plainReader.getSession(key)) as Session;
          restore = await control.snapshot(key);
          const second = current.events[1] as Event;
          await put(plainReader, current, { n: 7 }, { id: second.id, text: 'turn 2, rewritten and lost' });
          expect(textOf(await reader.getSession(key), 1)).toBe('turn 2, rewritten and lost');
          await restore();
          current = (await plainReader.getSession(key)) as Session;
          const third = current.events[2] as Event;
          await put(plainReader, current, { n: 7 }, { id: third.id, text: 'turn 3, rewritten after the loss' });
          read = await expectSameRead(reader, plainReader, key, 'after a lost write in place and another');
          expect(textOf(read, 1)).toBe('turn 2');
          expect(textOf(read, 2)).toBe('turn 3, rewritten after the loss');
          current = (await plainReader.getSession(key)) as Session;
          await put(plainReader, current, { n: 8 }, { text: 'turn 7' });
          await expectSameRead(reader, plainReader, key, 'after one more append');

          // An id the caller derives, appended, lost, and appended again with other content at the same instant.
          restore = await control.snapshot(key);
          current = (await plainReader.getSession(key)) as Session;
          const derived = { id: 'step-8', timestamp: nextTime() };
          await put(plainReader, current, { n: 9 }, { ...derived, text: 'step 8, lost' });
          expect(textOf(await reader.getSession(key), 7)).toBe('step 8, lost');
          await restore();
          current = (await plainReader.getSession(key)) as Session;
          await put(plainReader, current, { n: 10 }, { ...derived, text: 'step 8, after the loss' });
          read = await expectSameRead(reader, plainReader, key, 'after a lost append and another under its id');
          expect(textOf(read, 7)).toBe('step 8, after the loss');
        },
        { requires: ['sharedBackend', 'lostWrites'] },
      );

      test(
        'whole reads while another instance appends each show a state that matches their events, and end where a plain read ends' +
          suffix,
        async (kit) => {
          const { writer, reader, plainReader, key } = await cast(kit, options);
          const session = await writer.createSession({ ...key, state: { n: 0 } });
          await whileWriting(
            async (stopped) => {
              for (let n = 1; n <= 30 && !stopped(); n++) await put(writer, session, { n, 'user:n': n });
            },
            async (writing) => {
              while (writing()) {
                const reads = await allAwaited([
                  reader.getSession(key),
                  reader.getSession(key),
                  reader.getSession(key),
                ]);
                for (const read of reads) {
                  expect(read?.events, 'the events against the state').toHaveLength(read?.state.n as number);
                  expect(read?.state['user:n'] ?? 0).toBe(read?.state.n);
                }
              }
            },
          );
          const read = await expectSameRead(reader, plainReader, key, 'after the appends');
          expect(read?.events).toHaveLength(30);
        },
        { requires: 'sharedBackend' },
      );

      test(
        'a session read before it expired is gone for the reader, and its id created again reads as the new life only' +
          suffix,
        async (kit) => {
          const other = await kit.service({ expireAfterCreateSeconds: 1 });
          const reader = await kit.service({ expireAfterCreateSeconds: 1, ...options });
          const plainReader = await kit.service({ expireAfterCreateSeconds: 1, logCacheBytes: 0 });
          const appName = kit.app();
          const key = { appName, userId: 'u1', sessionId: 's1' };
          const old = await other.createSession({ ...key, state: { life: 1 } });
          for (const id of ['e1', 'e2']) await put(other, old, { last: id }, { id, text: `old ${id}` });
          await expectSameRead(reader, plainReader, key, 'before expiry');
          let gone = false;
          for (let attempt = 0; attempt < 300 && !gone; attempt++) {
            await new Promise((resolve) => setTimeout(resolve, 50));
            gone = (await plainReader.getSession(key)) === undefined;
          }
          expect(gone, 'the session expires within 15 s of a 1 s time to live').toBe(true);
          expect(await reader.getSession(key)).toBeUndefined();
          const reborn = await other.createSession({ ...key, state: { life: 2 } });
          for (const id of ['e1', 'e2', 'e3']) await put(other, reborn, { last: id }, { id, text: `new ${id}` });
          const read = await expectSameRead(reader, plainReader, key, 'the new life');
          expect(read?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual(['new e1', 'new e2', 'new e3']);
        },
        { requires: ['sharedBackend', 'expiry'] },
      );
    }
  },
};
