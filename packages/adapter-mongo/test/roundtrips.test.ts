/**
 * Round trips per operation, counted by the driver's command monitoring (so
 * the same numbers hold against any server): each operation is one
 * transaction of as few statements as the layout allows.
 */
import type { Session } from '@google/adk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoSessionService } from '../src/index.js';
import { dropDatabase, event, recordingClient, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('roundtrips');
const { client, commands } = recordingClient();
const service = new MongoSessionService({ client, dbName });

beforeAll(async () => {
  await service.ready();
});

afterAll(async () => {
  await client.close();
  await dropDatabase(dbName);
});

async function sent(run: () => Promise<unknown>): Promise<string[]> {
  commands.length = 0;
  await run();
  return [...commands];
}

describe('round trips per operation', () => {
  it('each operation sends the fewest commands its layout allows', async () => {
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    let session = undefined as unknown as Session;
    expect(
      await sent(async () => {
        session = await service.createSession({ ...key, state: { a: 1 } });
      }),
    ).toEqual(['insert', 'aggregate', 'commitTransaction']);
    expect(
      await sent(() => service.createSession({ appName, userId: 'u1', state: { 'user:b': 1, 'app:c': 1 } })),
    ).toEqual(['insert', 'findAndModify', 'findAndModify', 'commitTransaction']);
    expect(await sent(() => service.appendEvent({ session, event: event({ a: 2 }) }))).toEqual([
      'findAndModify',
      'update',
      'commitTransaction',
    ]);
    expect(await sent(() => service.appendEvent({ session, event: event({ 'user:b': 2, 'app:c': 2 }) }))).toEqual([
      'findAndModify',
      'update',
      'update',
      'update',
      'commitTransaction',
    ]);
    expect(await sent(() => service.getSession(key))).toEqual(['aggregate', 'find', 'commitTransaction']);
    expect(await sent(() => service.getSession({ ...key, config: { numRecentEvents: 1 } }))).toEqual([
      'aggregate',
      'find',
      'commitTransaction',
    ]);
    expect(await sent(() => service.getSession({ ...key, config: { numRecentEvents: 0 } }))).toEqual([
      'aggregate',
      'commitTransaction',
    ]);
    expect(await sent(() => service.listSessions({ appName, limit: 10 }))).toEqual([
      'aggregate',
      'find',
      'find',
      'commitTransaction',
    ]);
    expect(await sent(() => service.getUserState({ appName, userId: 'u1' }))).toEqual(['find']);
    const copy = (await service.getSession(key)) as Session;
    await service.appendEvent({ session, event: event() });
    expect(
      await sent(() => service.appendEvent({ session: copy, event: event() }).catch((error) => error.code)),
    ).toEqual(['findAndModify', 'find', 'abortTransaction']);
    expect(await sent(() => service.deleteSession(key))).toEqual(['findAndModify', 'delete', 'commitTransaction']);
    expect(await sent(() => service.deleteSession(key))).toEqual(['findAndModify', 'abortTransaction']);
  });

  it('a read with numRecentEvents asks for exactly that many events, newest first', async () => {
    const appName = uniqueApp();
    const session = await service.createSession({ appName, userId: 'u1' });
    for (let i = 0; i < 30; i++) await service.appendEvent({ session, event: event({ i }) });
    const finds: Array<Record<string, unknown>> = [];
    const listener = (started: { commandName: string; command: Record<string, unknown> }) => {
      if (started.commandName === 'find') finds.push(started.command);
    };
    client.on('commandStarted', listener);
    try {
      const loaded = await service.getSession({
        appName,
        userId: 'u1',
        sessionId: session.id,
        config: { numRecentEvents: 3 },
      });
      expect(loaded?.events.map((e) => e.actions.stateDelta.i)).toEqual([27, 28, 29]);
    } finally {
      client.off('commandStarted', listener);
    }
    expect(finds).toHaveLength(1);
    expect(finds[0]?.limit).toBe(3);
    expect(Object.fromEntries(finds[0]?.sort as Map<string, number>)).toEqual({ seq: -1 });
  });
});
