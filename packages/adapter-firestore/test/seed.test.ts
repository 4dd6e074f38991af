/** The benchmark seeder writes what the service's own calls write, and it reads back so. */
import { randomUUID } from 'node:crypto';
import { createEvent, type Event } from '@google/adk';
import type { Firestore } from '@google-cloud/firestore';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FirestoreSessionService } from '../src/index.js';
import { seedHistory, seedSessions } from '../src/seed.js';
import { emulatorClient } from './support/client.js';

let firestore: Firestore;
let service: FirestoreSessionService;

beforeAll(() => {
  firestore = emulatorClient();
  service = new FirestoreSessionService({ firestore, rootCollection: `runs/${randomUUID()}/adk_state` });
});

afterAll(async () => {
  await firestore.terminate();
});

const app = () => `app-${randomUUID()}`;

function history(): Event[] {
  const deltas = [{ a: 1, 'user:u': 1 }, { 'app:x': [1] }, { a: 2, b: { c: true } }, {}, { 'user:u': 2 }];
  return deltas.map((stateDelta, index) =>
    createEvent({
      invocationId: 'inv',
      author: 'agent',
      timestamp: 1_700_000_000_000 + index * 1000,
      content: { role: 'model', parts: [{ text: `turn ${index}` }] },
      actions: { stateDelta, artifactDelta: {}, requestedAuthConfigs: {}, requestedToolConfirmations: {} },
    }),
  );
}

describe('the benchmark seeder', () => {
  it('leaves a session that reads, filters and appends as one built by appending', async () => {
    const events = history();
    const viaService = { appName: app(), userId: 'u1', sessionId: 's1' };
    const session = await service.createSession(viaService);
    for (const event of events) await service.appendEvent({ session, event: structuredClone(event) });
    const seeded = { appName: app(), userId: 'u1', sessionId: 's1' };
    await seedHistory(
      service.store,
      seeded,
      events.map((event) => structuredClone(event)),
    );

    const expected = await service.getSession(viaService);
    const actual = await service.getSession(seeded);
    expect(actual?.state).toEqual(expected?.state);
    expect(actual?.events).toEqual(expected?.events);
    expect(actual?.lastUpdateTime).toBe(expected?.lastUpdateTime);
    const recent = await service.getSession({ ...seeded, config: { numRecentEvents: 2 } });
    expect(recent?.events.map((event) => event.id)).toEqual(events.slice(-2).map((event) => event.id));
    const after = await service.getSession({ ...seeded, config: { afterTimestamp: events[2]?.timestamp } });
    expect(after?.events.map((event) => event.id)).toEqual(events.slice(3).map((event) => event.id));

    // The seeded head's revision and count are where the next append expects them.
    const next = createEvent({ author: 'agent', actions: { stateDelta: { a: 3 } } as never });
    await service.appendEvent({ session: actual as NonNullable<typeof actual>, event: next });
    const loaded = await service.getSession(seeded);
    expect(loaded?.events.map((event) => event.id)).toEqual([...events, next].map((event) => event.id));
    expect(loaded?.state.a).toBe(3);
  });

  it('keeps the user and app state already there when the seeded events after the first write none', async () => {
    const appName = app();
    const other = await service.createSession({ appName, userId: 'u1', sessionId: 'other' });
    await service.appendEvent({
      session: other,
      event: createEvent({ actions: { stateDelta: { 'app:kept': 1, 'user:kept': 2 } } as never }),
    });
    const events = [{ 'user:first': 1, 'app:first': 1 }, { a: 1 }, {}].map((stateDelta, index) =>
      createEvent({
        invocationId: 'inv',
        author: 'agent',
        timestamp: 1_700_000_000_000 + index,
        actions: { stateDelta } as never,
      }),
    );
    await seedHistory(service.store, { appName, userId: 'u1', sessionId: 's1' }, events);
    const seeded = await service.getSession({ appName, userId: 'u1', sessionId: 's1' });
    expect(seeded?.state).toEqual({ a: 1, 'app:kept': 1, 'app:first': 1, 'user:kept': 2, 'user:first': 1 });
  });

  it('seeds many sessions that list in update order, with per-user filtering', async () => {
    const appName = app();
    await seedSessions(service.store, appName, ['u1', 'u2'], 30, 1_000);
    const all = await service.listSessions({ appName });
    expect(all.totalItems).toBe(30);
    expect(all.sessions.map((session) => session.lastUpdateTime)).toEqual(
      Array.from({ length: 30 }, (_, index) => 1_000 + index),
    );
    const page = await service.listSessions({ appName, userId: 'u2', limit: 3, page: 2 });
    expect(page.totalItems).toBe(15);
    expect(page.sessions.map((session) => session.id)).toEqual(['s7', 's9', 's11']);
    const one = await service.getSession({ appName, userId: 'u2', sessionId: 's9' });
    expect(one?.events).toEqual([]);
  });
});
