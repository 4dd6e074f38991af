/**
 * The call's deadline reaches the driver: every command a call sends carries
 * the time left as `maxTimeMS` (the commit and `bulkWrite` too), through both
 * driver majors; without a deadline none does. A client made from `url` gets
 * timeouts bounded by the deadline, which the URL and `clientOptions`
 * override, and a client the application passes in is left as it is.
 */
import type { Session } from '@google/adk';
import { MongoClient } from 'mongodb';
import { MongoClient as LowestMongoClient } from 'mongodb-lowest';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_SESSION_TTL_SECONDS, MongoSessionService, urlClientDefaults } from '../src/index.js';
import { dropDatabase, event, mongoUrl, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('deadline');

afterAll(async () => {
  await dropDatabase(dbName);
});

interface Sent {
  name: string;
  maxTimeMS: unknown;
}

const drivers = [
  ['mongodb 7', (url: string) => new MongoClient(url, { monitorCommands: true })],
  ['mongodb 6.0.0', (url: string) => new LowestMongoClient(url, { monitorCommands: true }) as unknown as MongoClient],
] as const;

/** Every operation of the service once, on a client that records each command it sends. */
async function commandsOfEveryOperation(
  makeClient: (url: string) => MongoClient,
  timeoutMs: number,
): Promise<{ sent: Sent[]; bulk: boolean }> {
  const client = makeClient(mongoUrl());
  const sent: Sent[] = [];
  const service = new MongoSessionService({ client, dbName, timeoutMs });
  try {
    await service.ready();
    client.on('commandStarted', (started) => {
      if (started.commandName === 'endSessions') return;
      sent.push({ name: started.commandName, maxTimeMS: started.command.maxTimeMS });
    });
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    const session: Session = await service.createSession({ ...key, state: { a: 1, 'user:b': 1, 'app:c': 1 } });
    await service.appendEvent({ session, event: event({ a: 2, 'user:b': 2, 'app:c': 2 }) });
    await service.getSession(key);
    await service.getSession({ ...key, config: { numRecentEvents: 1 } });
    await service.listSessions({ appName });
    await service.getUserState(key);
    await service.getAppState({ appName });
    await service.importSession({ ...session, id: 's2', events: [event({ a: 3 })] });
    await service.deleteSession(key);
    return { sent, bulk: service.store.usesBulkWrite };
  } finally {
    await service.close();
    await client.close();
  }
}

describe.each(drivers)('the deadline reaches the driver (%s)', (_name, makeClient) => {
  it('every command of a call carries the time left as maxTimeMS, the commit included', async () => {
    const { sent, bulk } = await commandsOfEveryOperation(makeClient, 20_000);
    const names = new Set(sent.map((command) => command.name));
    const expected = bulk ? ['bulkWrite'] : ['insert', 'delete'];
    for (const name of ['update', 'aggregate', 'find', 'commitTransaction', ...expected]) {
      expect(names, name).toContain(name);
    }
    for (const command of sent) {
      expect(command.maxTimeMS, command.name).toBeGreaterThan(0);
      expect(command.maxTimeMS, command.name).toBeLessThanOrEqual(20_000);
    }
  });

  it('with timeoutMs: Infinity no command carries maxTimeMS', async () => {
    const { sent } = await commandsOfEveryOperation(makeClient, Number.POSITIVE_INFINITY);
    expect(sent.length).toBeGreaterThan(10);
    expect(sent.filter((command) => command.maxTimeMS !== undefined)).toEqual([]);
  });
});

describe('clients made from url', () => {
  const optionsOf = (service: MongoSessionService) => service.store.client.options;

  it('get timeouts bounded by the deadline', async () => {
    const cases = [
      [2_000, { serverSelectionTimeoutMS: 1_600, connectTimeoutMS: 1_600, socketTimeoutMS: 7_000 }],
      [undefined, { serverSelectionTimeoutMS: 24_000, connectTimeoutMS: 10_000, socketTimeoutMS: 35_000 }],
      [60_000, { serverSelectionTimeoutMS: 30_000, connectTimeoutMS: 10_000, socketTimeoutMS: 65_000 }],
      [Number.POSITIVE_INFINITY, { serverSelectionTimeoutMS: 30_000, connectTimeoutMS: 10_000, socketTimeoutMS: 0 }],
    ] as const;
    for (const [timeoutMs, expected] of cases) {
      const service = new MongoSessionService({ url: mongoUrl(), dbName, ...(timeoutMs ? { timeoutMs } : {}) });
      expect(optionsOf(service), String(timeoutMs)).toMatchObject(expected);
      expect(urlClientDefaults(timeoutMs)).toEqual(expected);
      await service.close();
    }
    // The longest finite deadline never makes a socket timeout a timer cannot hold.
    expect(urlClientDefaults(2 ** 31 - 1).socketTimeoutMS).toBe(2 ** 31 - 1);
  });

  it('clientOptions and options in the URL win over the defaults', async () => {
    const fromOptions = new MongoSessionService({
      url: mongoUrl(),
      dbName,
      timeoutMs: 2_000,
      clientOptions: { serverSelectionTimeoutMS: 5_000, socketTimeoutMS: 0 },
    });
    expect(optionsOf(fromOptions)).toMatchObject({
      serverSelectionTimeoutMS: 5_000,
      connectTimeoutMS: 1_600,
      socketTimeoutMS: 0,
    });
    const separator = mongoUrl().includes('?') ? '&' : '?';
    const fromUrl = new MongoSessionService({
      url: `${mongoUrl()}${separator}serverselectiontimeoutms=4321&connectTimeoutMS=1234`,
      dbName,
      timeoutMs: 2_000,
    });
    expect(optionsOf(fromUrl)).toMatchObject({
      serverSelectionTimeoutMS: 4_321,
      connectTimeoutMS: 1_234,
      socketTimeoutMS: 7_000,
    });
    // The service made from the URL with its own options works.
    const appName = uniqueApp();
    await fromUrl.createSession({ appName, userId: 'u1', sessionId: 's1' });
    expect((await fromOptions.getSession({ appName, userId: 'u1', sessionId: 's1' }))?.id).toBe('s1');
    await fromOptions.close();
    await fromUrl.close();
  });

  it("a client the application passes in keeps the application's options", async () => {
    const client = new MongoClient(mongoUrl());
    const before = { ...client.options };
    try {
      const service = new MongoSessionService({ client, dbName, timeoutMs: 2_000 });
      await service.createSession({ appName: uniqueApp(), userId: 'u1' });
      await service.close();
      expect(client.options.serverSelectionTimeoutMS).toBe(30_000);
      expect(client.options.socketTimeoutMS).toBe(before.socketTimeoutMS);
      expect(client.options.connectTimeoutMS).toBe(before.connectTimeoutMS);
    } finally {
      await client.close();
    }
  });
});

describe('numeric and client options are checked at construction', () => {
  function refusal(make: () => unknown): { code?: string; argument?: string; message?: string } {
    try {
      make();
    } catch (error) {
      return error as { code?: string; argument?: string };
    }
    throw new Error('expected the options to be refused');
  }

  it('refuses them with InvalidArgumentError', () => {
    const url = mongoUrl();
    for (const expireAfterCreateSeconds of [0, -1, Number.NaN, MAX_SESSION_TTL_SECONDS + 1, 1e16, '60' as never]) {
      expect(
        refusal(() => new MongoSessionService({ url, expireAfterCreateSeconds })),
        String(expireAfterCreateSeconds),
      ).toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'expireAfterCreateSeconds' });
    }
    for (const timeoutMs of [0, -5, Number.NaN, 2 ** 31, '100' as never]) {
      expect(
        refusal(() => new MongoSessionService({ url, timeoutMs })),
        String(timeoutMs),
      ).toMatchObject({
        code: 'INVALID_ARGUMENT',
        argument: 'timeoutMs',
      });
    }
    expect(refusal(() => new MongoSessionService({ url, clientOptions: 5 as never }))).toMatchObject({
      argument: 'clientOptions',
    });
    expect(refusal(() => new MongoSessionService({ url: 'http://not-mongo' }))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      argument: 'url',
    });
    expect(refusal(() => new MongoSessionService({ client: {} as never }))).toMatchObject({ argument: 'client' });
    expect(refusal(() => new MongoSessionService(null as never))).toMatchObject({ argument: 'options' });
  });

  it('takes the longest session time-to-live and the longest deadline', async () => {
    const service = new MongoSessionService({
      url: mongoUrl(),
      dbName,
      expireAfterCreateSeconds: MAX_SESSION_TTL_SECONDS,
      timeoutMs: 2 ** 31 - 1,
    });
    const appName = uniqueApp();
    const session = await service.createSession({ appName, userId: 'u1' });
    expect((await service.getSession({ appName, userId: 'u1', sessionId: session.id }))?.id).toBe(session.id);
    await service.close();
  });
});
