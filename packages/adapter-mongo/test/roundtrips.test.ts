/**
 * Round trips per operation, counted by the driver's command monitoring (so
 * the same numbers hold against any server): each operation is one
 * transaction of as few commands as the layout allows. An append is 2 round
 * trips where the server has MongoDB 8's multi-collection `bulkWrite` command
 * and the driver has `MongoClient.bulkWrite`, and 3 otherwise, whatever its
 * delta holds.
 */

import { type StandIn, type StandInVersion, startStandIn } from '@adk-state/mongo-standin';
import type { Session } from '@google/adk';
import { MongoClient } from 'mongodb';
import { MongoClient as LowestMongoClient } from 'mongodb-lowest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MongoSessionService } from '../src/index.js';
import { dropDatabase, event, mongoUrl, uniqueApp, uniqueDbName, usingStandIn } from './support.js';

type MakeClient = (url: string) => MongoClient;

const driver7: MakeClient = (url) => new MongoClient(url, { monitorCommands: true });
const driver6: MakeClient = (url) => new LowestMongoClient(url, { monitorCommands: true }) as unknown as MongoClient;

/**
 * On the stand-in: the current driver on MongoDB 8.0 and 7.0, and driver
 * 6.0.0 (no `MongoClient.bulkWrite`) on 8.0. Against MONGODB_URL: both
 * drivers on that server, each expected on the path the store chose.
 */
const cases: Array<[string, MakeClient, StandInVersion | undefined, boolean | undefined]> = usingStandIn()
  ? [
      ['mongodb 7 on MongoDB 8.0: bulkWrite', driver7, '8.0', true],
      ['mongodb 7 on MongoDB 7.0: a command per collection', driver7, '7.0', false],
      ['mongodb 6.0.0 on MongoDB 8.0: a command per collection', driver6, '8.0', false],
    ]
  : [
      ['mongodb 7 on MONGODB_URL', driver7, undefined, undefined],
      ['mongodb 6.0.0 on MONGODB_URL: a command per collection', driver6, undefined, false],
    ];

describe.each(cases)('round trips per operation (%s)', (_label, makeClient, serverVersion, expectBulk) => {
  const dbName = uniqueDbName('roundtrips');
  let standIn: StandIn | undefined;
  let client: MongoClient;
  let service: MongoSessionService;
  const commands: string[] = [];
  let bulk = false;

  beforeAll(async () => {
    standIn = serverVersion ? await startStandIn({ serverVersion, ttlMonitorIntervalMs: 0 }) : undefined;
    client = makeClient(standIn?.url ?? mongoUrl());
    client.on('commandStarted', (started) => commands.push(started.commandName));
    service = new MongoSessionService({ client, dbName });
    await service.ready();
    bulk = service.store.usesBulkWrite;
  });

  afterAll(async () => {
    await client.close();
    if (standIn) await standIn.stop();
    else await dropDatabase(dbName);
  });

  async function sent(run: () => Promise<unknown>): Promise<string[]> {
    commands.length = 0;
    await run();
    return [...commands];
  }

  it('the store chose the path the server and the driver allow', () => {
    if (expectBulk !== undefined) expect(bulk).toBe(expectBulk);
  });

  it('an append is 2 round trips with bulkWrite and 3 without, whatever its delta holds', async () => {
    const appName = uniqueApp();
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
    const append = bulk ? ['bulkWrite', 'commitTransaction'] : ['update', 'update', 'commitTransaction'];
    const deltas = [{}, { a: 1 }, { 'user:b': 1 }, { 'app:c': 1 }, { a: 2, 'user:b': 2, 'app:c': 2, 'temp:d': 2 }];
    for (const delta of deltas) {
      const commandsSent = await sent(() => service.appendEvent({ session, event: event(delta) }));
      expect(commandsSent, JSON.stringify(delta)).toEqual(append);
      expect(commandsSent.length).toBeLessThanOrEqual(3);
    }
    const replaced = event({ a: 3 });
    await service.appendEvent({ session, event: replaced });
    expect(
      await sent(() => service.appendEvent({ session, event: { ...replaced, timestamp: replaced.timestamp + 1 } })),
    ).toEqual(append);
    const loaded = await service.getSession({ appName, userId: 'u1', sessionId: 's1' });
    expect(loaded?.state).toEqual({ a: 3, 'user:b': 2, 'app:c': 2 });
    expect(loaded?.events).toHaveLength(deltas.length + 1);
  });

  it('each operation sends the fewest commands its layout allows', async () => {
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    let session = undefined as unknown as Session;
    expect(
      await sent(async () => {
        session = await service.createSession({ ...key, state: { a: 1 } });
      }),
    ).toEqual(['update', 'find', 'commitTransaction']);
    expect(
      await sent(() => service.createSession({ appName, userId: 'u1', state: { 'user:b': 1, 'app:c': 1 } })),
    ).toEqual(['update', 'find', 'commitTransaction']);
    // An existing key: the upsert matched it, nothing was written; then the check for an expired session there.
    expect(await sent(() => service.createSession(key).catch((error) => error.code))).toEqual([
      'update',
      'abortTransaction',
      'delete',
    ]);
    await service.appendEvent({ session, event: event({ a: 2, 'user:b': 2, 'app:c': 2 }) });
    expect(await sent(() => service.getSession(key))).toEqual(['find', 'find', 'commitTransaction']);
    // Read again, nothing written since: the head says so, and no event is read.
    expect(await sent(() => service.getSession(key))).toEqual(['find', 'commitTransaction']);
    const created = { appName, userId: 'u1', sessionId: 'only-created' };
    await service.createSession(created);
    expect(await sent(() => service.getSession(created))).toEqual(['find', 'find', 'commitTransaction']);
    expect(await sent(() => service.getSession(created))).toEqual(['find', 'commitTransaction']);
    await service.appendEvent({ session, event: event({ a: 3 }) });
    expect(await sent(() => service.getSession(key))).toEqual(['find', 'find', 'commitTransaction']);
    expect(await sent(() => service.getSession({ ...key, config: { numRecentEvents: 1 } }))).toEqual([
      'find',
      'find',
      'commitTransaction',
    ]);
    expect(await sent(() => service.getSession({ ...key, config: { numRecentEvents: 0 } }))).toEqual([
      'find',
      'commitTransaction',
    ]);
    expect(await sent(() => service.listSessions({ appName, limit: 10 }))).toEqual([
      'aggregate',
      'find',
      'find',
      'commitTransaction',
    ]);
    expect(await sent(() => service.listSessions({ appName, limit: 0 }))).toEqual([
      'aggregate',
      'find',
      'commitTransaction',
    ]);
    expect(await sent(() => service.getUserState({ appName, userId: 'u1' }))).toEqual(['find']);
    expect(await sent(() => service.getAppState({ appName }))).toEqual(['find']);

    const copy = (await service.getSession(key)) as Session;
    await service.appendEvent({ session, event: event() });
    expect(
      await sent(() => service.appendEvent({ session: copy, event: event() }).catch((error) => error.code)),
    ).toEqual([bulk ? 'bulkWrite' : 'update', 'find', 'abortTransaction']);

    const imported = { ...(await service.getSession(key)), id: 'copied' } as Session;
    expect(await sent(() => service.importSession(imported))).toEqual(
      bulk ? ['bulkWrite', 'commitTransaction'] : ['update', 'insert', 'commitTransaction'],
    );
    expect(await sent(() => service.importSession(imported))).toEqual([
      bulk ? 'bulkWrite' : 'update',
      'abortTransaction',
      'delete',
    ]);

    expect(await sent(() => service.deleteSession(key))).toEqual(
      bulk ? ['bulkWrite', 'commitTransaction'] : ['delete', 'delete', 'commitTransaction'],
    );
    expect(await sent(() => service.deleteSession(key))).toEqual([bulk ? 'bulkWrite' : 'delete', 'abortTransaction']);
  });

  it('with a session time-to-live, creation also clears what an expired session of the key left', async () => {
    const ttl = new MongoSessionService({ client, dbName: `${dbName}_ttl`, expireAfterCreateSeconds: 3600 });
    await ttl.ready();
    try {
      expect(await sent(() => ttl.createSession({ appName: uniqueApp(), userId: 'u1' }))).toEqual(
        bulk ? ['bulkWrite', 'find', 'commitTransaction'] : ['update', 'delete', 'find', 'commitTransaction'],
      );
    } finally {
      if (!standIn) await client.db(`${dbName}_ttl`).dropDatabase();
    }
  });

  it('a read with numRecentEvents asks for exactly that many events, newest first', async () => {
    const appName = uniqueApp();
    const session = await service.createSession({ appName, userId: 'u1' });
    for (let i = 0; i < 30; i++) await service.appendEvent({ session, event: event({ i }) });
    const finds: Array<Record<string, unknown>> = [];
    const listener = (started: { commandName: string; command: Record<string, unknown> }) => {
      if (started.commandName === 'find' && started.command.find === service.store.names.events) {
        finds.push(started.command);
      }
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

  it("a traced call's round trips (its span's adk_state.round_trips) are the commands it sent", async () => {
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    const session = await service.createSession(key);
    await service.appendEvent({ session, event: event({ a: 1, 'user:b': 1, 'app:c': 1 }) });
    const traced = () => ({
      signal: new AbortController().signal,
      deadline: Date.now() + 30_000,
      usage: { roundTrips: 0, bytes: 0 },
    });
    const read = traced();
    const readSent = await sent(() => service.store.loadSession(key, {}, read));
    expect(read.usage.roundTrips).toBe(readSent.length);
    const list = traced();
    const listSent = await sent(() => service.store.listSessions({ appName, order: 'desc', offset: 0 }, list));
    expect(list.usage.roundTrips).toBe(listSent.length);
    const loaded = await service.store.loadSession(key, {}, traced());
    const write = traced();
    const input = {
      key,
      expectedRevision: loaded?.session.revision ?? 0,
      event: { id: 'e2', timestamp: 2_000, json: JSON.stringify({ id: 'e2', timestamp: 2_000 }) },
      sessionDelta: new Map([['a', '2']]),
      userDelta: new Map([['b', '2']]),
      appDelta: new Map([['c', '2']]),
      lastUpdateTime: 2_000,
    };
    const writeSent = await sent(() => service.store.appendEvent(input, write));
    expect(writeSent.length).toBeGreaterThan(0);
    expect(write.usage.roundTrips).toBe(writeSent.length);
  });
});

describe.skipIf(!usingStandIn())('a server that reports MongoDB 8 but refuses bulkWrite', () => {
  let standIn: StandIn;
  let client: MongoClient;

  beforeAll(async () => {
    standIn = await startStandIn({ serverVersion: '8.0', ttlMonitorIntervalMs: 0 });
    client = driver7(standIn.url);
  });

  afterAll(async () => {
    await client.close();
    await standIn.stop();
  });

  it('makes the store fall back to a command per collection, once, with nothing applied twice', async () => {
    const commands: string[] = [];
    client.on('commandStarted', (started) => commands.push(started.commandName));
    const service = new MongoSessionService({ client, dbName: 'fallback' });
    const session = await service.createSession({ appName: 'app', userId: 'u1', sessionId: 's1' });
    expect(service.store.usesBulkWrite).toBe(true);
    // As a deployment whose feature compatibility is still 7.0 answers the command.
    await client.db('admin').command({
      configureFailPoint: 'failCommand',
      mode: 'alwaysOn',
      data: { failCommands: ['bulkWrite'], errorCode: 59 },
    });
    commands.length = 0;
    await service.appendEvent({ session, event: event({ n: 1, 'user:u': 1 }) });
    // The refused transaction's session is ended (its abort goes in the background) and the append runs again.
    expect(commands.filter((name) => name !== 'abortTransaction')).toEqual([
      'bulkWrite',
      'update',
      'update',
      'commitTransaction',
    ]);
    expect(service.store.usesBulkWrite).toBe(false);
    commands.length = 0;
    await service.appendEvent({ session, event: event({ n: 2 }) });
    expect(commands).toEqual(['update', 'update', 'commitTransaction']);
    await client.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    const loaded = await service.getSession({ appName: 'app', userId: 'u1', sessionId: 's1' });
    expect(loaded?.events).toHaveLength(2);
    expect(loaded?.state).toEqual({ n: 2, 'user:u': 1 });
  });
});
