/**
 * The stand-in keeps MongoDB's promises that the adapter relies on, checked
 * through the official driver: transactions are isolated and all-or-nothing,
 * concurrent writers conflict as on MongoDB, unique and TTL indexes behave,
 * cursors page, and what it does not implement is refused, not faked.
 */
import { Binary, Long } from 'bson';
import { type ClientSession, MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIn, startStandIn } from './standin/index.js';

let standIn: StandIn;
let client: MongoClient;

beforeAll(async () => {
  standIn = await startStandIn({ ttlMonitorIntervalMs: 0 });
  client = new MongoClient(standIn.url);
  await client.connect();
});

afterAll(async () => {
  await client.close();
  await standIn.stop();
});

let counter = 0;
function fresh() {
  counter += 1;
  return client.db('standin_test').collection<{ _id: string; n?: number; k?: string; at?: Date }>(`c${counter}`);
}

interface Failure {
  code?: number;
  errorLabels?: string[];
  message: string;
  originalError?: { code?: number; message: string };
}

async function caught(promise: Promise<unknown>): Promise<Failure> {
  try {
    await promise;
  } catch (error) {
    const e = error as Failure & { errorLabelSet?: Set<string> };
    return {
      code: e.code,
      errorLabels: [...(e.errorLabelSet ?? [])],
      message: e.message,
      originalError: e.originalError,
    };
  }
  throw new Error('expected the operation to fail');
}

describe('the MongoDB stand-in', () => {
  it('advertises a replica-set primary of a supported wire version', async () => {
    const hello = await client.db('admin').command({ hello: 1 });
    expect(hello.setName).toBe('rs0');
    expect(hello.isWritablePrimary).toBe(true);
    expect(hello.maxWireVersion).toBe(21);
    expect(hello.logicalSessionTimeoutMinutes).toBe(30);
  });

  it('a write inside an aborted transaction is never visible', async () => {
    const col = fresh();
    await col.insertOne({ _id: 'a', n: 1 });
    const session = client.startSession();
    session.startTransaction();
    await col.insertOne({ _id: 'b', n: 1 }, { session });
    await col.updateOne({ _id: 'a' }, { $set: { n: 2 } }, { session });
    expect(await col.findOne({ _id: 'a' }, { session })).toEqual({ _id: 'a', n: 2 });
    expect(await col.find().toArray()).toEqual([{ _id: 'a', n: 1 }]);
    await session.abortTransaction();
    await session.endSession();
    expect(await col.find().toArray()).toEqual([{ _id: 'a', n: 1 }]);
  });

  it('a committed transaction becomes visible whole', async () => {
    const col = fresh();
    await client.withSession((session) =>
      session.withTransaction(async () => {
        await col.insertMany(
          [
            { _id: 'a', n: 1 },
            { _id: 'b', n: 2 },
          ],
          { session },
        );
        expect(await col.countDocuments()).toBe(0);
      }),
    );
    expect(await col.countDocuments()).toBe(2);
  });

  it('a transaction reads one snapshot, taken at its first statement', async () => {
    const col = fresh();
    await col.insertOne({ _id: 'a', n: 1 });
    const session = client.startSession();
    session.startTransaction();
    expect((await col.findOne({ _id: 'a' }, { session }))?.n).toBe(1);
    await col.updateOne({ _id: 'a' }, { $set: { n: 2 } });
    expect((await col.findOne({ _id: 'a' }, { session }))?.n).toBe(1);
    expect((await col.findOne({ _id: 'a' }))?.n).toBe(2);
    await session.commitTransaction();
    await session.endSession();
  });

  it('the second of two transactions writing one document gets WriteConflict, labelled transient, and is aborted', async () => {
    const col = fresh();
    await col.insertOne({ _id: 'a', n: 0 });
    const first = client.startSession();
    const second = client.startSession();
    first.startTransaction();
    second.startTransaction();
    await col.updateOne({ _id: 'a' }, { $inc: { n: 1 } }, { session: first });
    const conflict = await caught(col.updateOne({ _id: 'a' }, { $inc: { n: 10 } }, { session: second }));
    expect(conflict.code).toBe(112);
    expect(conflict.errorLabels).toContain('TransientTransactionError');
    await first.commitTransaction();
    const gone = await caught(second.commitTransaction());
    expect(gone.code).toBe(251);
    await first.endSession();
    await second.endSession();
    expect((await col.findOne({ _id: 'a' }))?.n).toBe(1);
  });

  it('a transaction writing a document changed after its snapshot gets WriteConflict', async () => {
    const col = fresh();
    await col.insertMany([
      { _id: 'a', n: 0 },
      { _id: 'b', n: 0 },
    ]);
    const session = client.startSession();
    session.startTransaction();
    await col.findOne({ _id: 'b' }, { session });
    await col.updateOne({ _id: 'a' }, { $inc: { n: 1 } });
    const conflict = await caught(col.updateOne({ _id: 'a' }, { $inc: { n: 1 } }, { session }));
    expect(conflict.code).toBe(112);
    await session.endSession();
    expect((await col.findOne({ _id: 'a' }))?.n).toBe(1);
  });

  it('withTransaction retries a conflicted transaction until it applies once', async () => {
    const col = fresh();
    await col.insertOne({ _id: 'a', n: 0 });
    const increment = (session: ClientSession) =>
      session.withTransaction(async () => {
        const doc = await col.findOne({ _id: 'a' }, { session });
        await col.updateOne({ _id: 'a' }, { $set: { n: (doc?.n ?? 0) + 1 } }, { session });
      });
    await Promise.all(Array.from({ length: 8 }, () => client.withSession(increment)));
    expect((await col.findOne({ _id: 'a' }))?.n).toBe(8);
  });

  it('a write outside any transaction waits for the transaction that holds the document', async () => {
    const col = fresh();
    await col.insertOne({ _id: 'a', n: 0 });
    const session = client.startSession();
    session.startTransaction();
    await col.updateOne({ _id: 'a' }, { $inc: { n: 1 } }, { session });
    let settled = false;
    const outside = col.updateOne({ _id: 'a' }, { $inc: { n: 10 } }).then((result) => {
      settled = true;
      return result;
    });
    await col.findOne({ _id: 'a' });
    expect(settled).toBe(false);
    await session.commitTransaction();
    await session.endSession();
    expect((await outside).modifiedCount).toBe(1);
    expect((await col.findOne({ _id: 'a' }))?.n).toBe(11);
  });

  it('unique indexes refuse duplicates with E11000, inside and outside transactions', async () => {
    const col = fresh();
    await col.createIndex({ k: 1 }, { unique: true, name: 'k_unique' });
    await col.insertOne({ _id: 'a', k: 'x' });
    expect((await caught(col.insertOne({ _id: 'b', k: 'x' }))).code).toBe(11000);
    expect((await caught(col.insertOne({ _id: 'a', k: 'y' }))).code).toBe(11000);
    const session = client.startSession();
    session.startTransaction();
    await col.insertOne({ _id: 'c', k: 'z' }, { session });
    const duplicate = await caught(col.insertOne({ _id: 'd', k: 'x' }, { session }));
    expect(duplicate.code).toBe(11000);
    // The failed statement aborted the transaction: its earlier insert is gone too.
    expect((await caught(session.commitTransaction())).code).toBe(251);
    await session.endSession();
    expect((await col.find().toArray()).map((d) => d._id)).toEqual(['a']);
    const other = fresh();
    await other.insertMany([
      { _id: 'a', k: 'same' },
      { _id: 'b', k: 'same' },
    ]);
    expect((await caught(other.createIndex({ k: 1 }, { unique: true }))).code).toBe(11000);
  });

  it('an upsert seeds the new document from the equality conditions of the filter', async () => {
    const col = client
      .db('standin_test')
      .collection<{ _id: { a: string; b: string }; state?: Record<string, string> }>('upserts');
    await col.updateOne({ _id: { a: 'x', b: 'y' } }, { $set: { 'state.k': '1' } }, { upsert: true });
    await col.updateOne({ _id: { a: 'x', b: 'y' } }, { $set: { 'state.j': '2' } }, { upsert: true });
    expect(await col.find().toArray()).toEqual([{ _id: { a: 'x', b: 'y' }, state: { k: '1', j: '2' } }]);
    expect(await col.findOne({ _id: { b: 'y', a: 'x' } })).toBeNull();
  });

  it('TTL indexes keep their metadata and the monitor removes expired documents', async () => {
    const col = fresh();
    await col.createIndex({ at: 1 }, { expireAfterSeconds: 30, name: 'ttl' });
    const indexes = await col.listIndexes().toArray();
    expect(indexes.find((index) => index.name === 'ttl')).toMatchObject({ key: { at: 1 }, expireAfterSeconds: 30 });
    const now = Date.now();
    await col.insertMany([
      { _id: 'old', at: new Date(now - 31_000) },
      { _id: 'new', at: new Date(now - 29_000) },
      { _id: 'none' },
    ]);
    const result = await client.db('admin').command({ standInRunTtlMonitor: 1, now: new Date(now) });
    expect(result.deleted).toBe(1);
    expect((await col.find().toArray()).map((d) => d._id).sort()).toEqual(['new', 'none']);
  });

  it('cursors page through getMore, and batches stay under 16 MB', async () => {
    const col = fresh();
    const big = 'x'.repeat(1024 * 1024);
    await col.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `d${String(i).padStart(2, '0')}`, k: big })));
    standIn.resetCommandCount();
    const all = await col.find().sort({ _id: 1 }).toArray();
    expect(all).toHaveLength(20);
    expect(standIn.commandCounts()).toEqual({ find: 1, getMore: 1 });
  });

  it('counts the commands it serves, handshake and monitoring excluded', async () => {
    const col = fresh();
    standIn.resetCommandCount();
    await col.insertOne({ _id: 'a' });
    await col.findOne({ _id: 'a' });
    expect(standIn.commandCount()).toBe(2);
    const stats = await client.db('admin').command({ standInStats: 1 });
    expect(stats.byName).toEqual({ insert: 1, find: 1 });
  });

  it('a retried write with the same session and txnNumber is applied once', async () => {
    const lsid = { id: new Binary(Buffer.alloc(16, 7), 4) };
    const command = {
      insert: 'retried',
      documents: [{ _id: 'a' }],
      lsid,
      txnNumber: Long.fromNumber(1),
      $db: 'standin_test',
    };
    const first = await standIn.server.dispatch(command);
    const again = await standIn.server.dispatch(command);
    expect(first).toMatchObject({ n: 1, ok: 1 });
    expect(again).toEqual(first);
    expect(await client.db('standin_test').collection('retried').countDocuments()).toBe(1);
  });

  it("refuses what it does not implement with MongoDB's error codes", async () => {
    const col = fresh();
    expect((await caught(col.find({ $where: 'true' } as never).toArray())).code).toBe(2);
    expect((await caught(col.aggregate([{ $facet: {} }]).toArray())).code).toBe(40324);
    expect((await caught(client.db('standin_test').command({ noSuchCommand: 1 }))).code).toBe(59);
    expect((await caught(col.updateOne({ _id: 'a' }, { $set: { a: 1, 'a.b': 2 } } as never))).code).toBe(40);
  });

  it('a standalone stand-in has no transactions', async () => {
    const standalone = await startStandIn({ replicaSet: false, ttlMonitorIntervalMs: 0 });
    const direct = new MongoClient(standalone.url);
    try {
      const hello = await direct.db('admin').command({ hello: 1 });
      expect(hello.setName).toBeUndefined();
      const col = direct.db('standin_test').collection<{ _id: string }>('tx');
      const failure = await caught(
        direct.withSession((session) =>
          session.withTransaction(async () => {
            await col.insertOne({ _id: 'a' }, { session });
          }),
        ),
      );
      // The server refuses transaction numbers (code 20); the driver rewords that as it does for a real standalone.
      expect(failure.originalError?.code).toBe(20);
      expect(failure.originalError?.message).toContain('Transaction numbers are only allowed on a replica set member');
      expect(await col.countDocuments()).toBe(0);
    } finally {
      await direct.close();
      await standalone.stop();
    }
  });

  it('stops as a restarted server would and starts again on the same port with its committed data', async () => {
    const restartable = await startStandIn({ ttlMonitorIntervalMs: 0 });
    const direct = new MongoClient(restartable.url, { serverSelectionTimeoutMS: 1_000 });
    try {
      const col = direct.db('standin_test').collection<{ _id: string; n: number }>('restart');
      await col.insertOne({ _id: 'kept', n: 1 });
      const open = direct.startSession();
      open.startTransaction();
      await col.insertOne({ _id: 'uncommitted', n: 1 }, { session: open });
      const address = restartable.address;
      await restartable.stop();
      expect((await caught(col.findOne({ _id: 'kept' }))).message).toMatch(/ECONNREFUSED|closed|Server selection/);
      await restartable.start();
      expect(restartable.address).toBe(address);
      let found: unknown;
      for (let attempt = 0; attempt < 40 && found === undefined; attempt++) {
        found = await col
          .find()
          .toArray()
          .catch(() => undefined);
        if (found === undefined) await new Promise((resolve) => setTimeout(resolve, 250));
      }
      // The open transaction died with the old process; what was committed is there.
      expect(found).toEqual([{ _id: 'kept', n: 1 }]);
      await open.endSession();
    } finally {
      await direct.close();
      await restartable.stop();
    }
  });

  it("has MongoDB's failCommand fail point: an error with labels, a closed connection, a delay, a count", async () => {
    const adminDb = client.db('admin');
    const col = fresh();
    await col.insertOne({ _id: 'a', n: 1 });
    await adminDb.command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['find'], errorCode: 112, errorLabels: ['TransientTransactionError'] },
    });
    const failed = await caught(col.findOne({ _id: 'a' }));
    expect(failed.code).toBe(112);
    expect(failed.errorLabels).toContain('TransientTransactionError');
    expect((await col.findOne({ _id: 'a' }))?.n).toBe(1);
    await adminDb.command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['find'], closeConnection: true },
    });
    // A read is retried once by the driver on a new connection.
    expect((await col.findOne({ _id: 'a' }))?.n).toBe(1);
    await adminDb.command({
      configureFailPoint: 'failCommand',
      mode: 'alwaysOn',
      data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 300 },
    });
    const started = Date.now();
    expect((await col.findOne({ _id: 'a' }))?.n).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await adminDb.command({ configureFailPoint: 'failCommand', mode: 'off' });
    expect((await caught(client.db('x').command({ configureFailPoint: 'failCommand', mode: 'off' }))).code).toBe(13);
    expect(
      (
        await caught(
          adminDb.command({
            configureFailPoint: 'failCommand',
            mode: 'alwaysOn',
            data: { failCommands: ['find'], x: 1 },
          }),
        )
      ).code,
    ).toBe(2);
  });
});
