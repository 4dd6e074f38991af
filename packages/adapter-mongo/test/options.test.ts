/** Options: one of client or url, valid names, and close() that closes only a client the service made. */
import { MongoClient } from 'mongodb';
import { afterAll, describe, expect, it } from 'vitest';
import { MongoSessionService } from '../src/index.js';
import { dropDatabase, mongoUrl, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('options');

afterAll(async () => {
  await dropDatabase(dbName);
});

function refusal(make: () => unknown): { code?: string; argument?: string } {
  try {
    make();
  } catch (error) {
    return error as { code?: string; argument?: string };
  }
  throw new Error('expected the options to be refused');
}

describe('options', () => {
  it('refuses ambiguous or invalid options with InvalidArgumentError', () => {
    const client = new MongoClient(mongoUrl());
    // The types refuse these too; JavaScript callers meet the runtime check.
    // @ts-expect-error neither client nor url
    expect(refusal(() => new MongoSessionService({}))).toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'options' });
    // @ts-expect-error both client and url
    expect(refusal(() => new MongoSessionService({ client, url: mongoUrl() }))).toMatchObject({ argument: 'options' });
    expect(refusal(() => new MongoSessionService({ client, dbName: 'a.b' }))).toMatchObject({ argument: 'dbName' });
    expect(refusal(() => new MongoSessionService({ client, collectionPrefix: 'x$' }))).toMatchObject({
      argument: 'collectionPrefix',
    });
    expect(refusal(() => new MongoSessionService({ client, collectionPrefix: 'system.' }))).toMatchObject({
      argument: 'collectionPrefix',
    });
    for (const expireAfterCreateSeconds of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(refusal(() => new MongoSessionService({ client, expireAfterCreateSeconds }))).toMatchObject({
        argument: 'expireAfterCreateSeconds',
      });
    }
    // MongoDB cannot keep the idle clock: the option another store takes is refused, not ignored.
    const idle = { client, expireAfterIdleSeconds: 60 } as never;
    expect(refusal(() => new MongoSessionService(idle))).toMatchObject({
      argument: 'expireAfterIdleSeconds',
      message: expect.stringMatching(/expireAfterCreateSeconds/),
    });
    expect(refusal(() => new MongoSessionService({ client, onStale: 'never' as never }))).toMatchObject({
      argument: 'onStale',
    });
  });

  it("close() leaves the application's client open", async () => {
    const client = new MongoClient(mongoUrl());
    try {
      const service = new MongoSessionService({ client, dbName });
      const appName = uniqueApp();
      await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
      await service.close();
      expect(await client.db(dbName).collection('adk_sessions').countDocuments({ '_id.app': appName })).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('a service made from a url connects on first use and close() closes its client', async () => {
    const service = new MongoSessionService({ url: mongoUrl(), dbName });
    const appName = uniqueApp();
    await service.createSession({ appName, userId: 'u1', sessionId: 's1' });
    await service.close();
    const failure = await service.store.client
      .db(dbName)
      .collection('adk_sessions')
      .findOne({})
      .catch((error: Error) => error);
    expect(failure).toBeInstanceOf(Error);
    const reader = new MongoSessionService({ url: mongoUrl(), dbName });
    expect((await reader.getSession({ appName, userId: 'u1', sessionId: 's1' }))?.id).toBe('s1');
    await reader.close();
  });
});
