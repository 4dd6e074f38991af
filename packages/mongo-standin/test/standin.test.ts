/**
 * The stand-in keeps MongoDB's promises that the adapter relies on, checked
 * through the official driver: transactions are isolated and all-or-nothing,
 * concurrent writers conflict as on MongoDB, unique and TTL indexes behave,
 * cursors page, and what it does not implement is refused, not faked.
 */
import { Binary, Long } from 'bson';
import { type ClientSession, MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIn, startStandIn } from '../src/index.js';

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
  return client
    .db('standin_test')
    .collection<{ _id: string; n?: number; k?: string; at?: Date; seq?: number; rev?: number; body?: string }>(
      `c${counter}`,
    );
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

  it('a find projection computes fields from expressions, and $$REMOVE leaves one out', async () => {
    const col = fresh();
    await col.insertMany([
      { _id: 'a', seq: 1, rev: 5, body: 'old' },
      { _id: 'b', seq: 6, rev: 6, body: 'new' },
    ]);
    const found = await col
      .find(
        {},
        {
          projection: {
            seq: 1,
            body: { $cond: [{ $gt: ['$seq', 5] }, '$body', '$$REMOVE'] },
            // biome-ignore lint/suspicious/noThenProperty: the object form of MongoDB's $cond names its branch 'then'.
            late: { $cond: { if: { $gte: ['$rev', 6] }, then: true, else: false } },
          },
          sort: { seq: 1 },
        },
      )
      .toArray();
    expect(found).toEqual([
      { _id: 'a', seq: 1, late: false },
      { _id: 'b', seq: 6, body: 'new', late: true },
    ]);
    // An operator the stand-in does not know is refused, never guessed.
    await expect(col.find({}, { projection: { x: { $concat: ['$body', '!'] } } }).toArray()).rejects.toThrow(
      /\$concat is not supported/,
    );
    await expect(col.find({}, { projection: { seq: 0, body: { $cond: [true, 1, 2] } } }).toArray()).rejects.toThrow(
      /Cannot do exclusion and inclusion/,
    );
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

  it('matches $type by BSON type (aliases, numbers, "number", arrays of them) and groups by $isNumber', async () => {
    const col = client.db('standin_test').collection<{ _id: string; t?: unknown }>(`typed${++counter}`);
    await col.insertMany([
      { _id: 'int', t: 3 },
      { _id: 'double', t: 1.5 },
      { _id: 'long', t: Long.fromNumber(7) },
      { _id: 'word', t: 'then' },
      { _id: 'date', t: new Date(0) },
      { _id: 'doc', t: { at: 1 } },
      { _id: 'flag', t: true },
      { _id: 'null', t: null },
      { _id: 'none' },
    ]);
    const ids = async (filter: object) =>
      (await col.find(filter as never, { sort: { _id: 1 } }).toArray()).map((doc) => doc._id);
    expect(await ids({ t: { $type: 'number' } })).toEqual(['double', 'int', 'long']);
    expect(await ids({ t: { $type: ['string', 'date', 'bool'] } })).toEqual(['date', 'flag', 'word']);
    expect(await ids({ t: { $type: 'object' } })).toEqual(['doc']);
    expect(await ids({ t: { $type: 10 } })).toEqual(['null']);
    expect(await ids({ t: { $not: { $type: 'number' } } })).toEqual(['date', 'doc', 'flag', 'none', 'null', 'word']);
    expect((await caught(col.find({ t: { $type: 'nothing' } } as never).toArray())).code).toBe(2);
    const groups = await col
      .aggregate([{ $group: { _id: { $isNumber: '$t' }, n: { $sum: 1 } } }, { $sort: { _id: 1 } }])
      .toArray();
    expect(groups).toEqual([
      { _id: false, n: 6 },
      { _id: true, n: 3 },
    ]);
  });

  it('a compound index answers ranges, $or of ranges and sorted limits of its last field as a scan of every document does', async () => {
    // Two collections with the same documents: one with the indexes (its finds walk their order), one
    // with none (its finds check every document). Seeded, so a failure replays.
    let seed = 20_261_126;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    const name = `ranged${++counter}`;
    const indexed = client.db('standin_test').collection<Record<string, unknown>>(name);
    const plain = client.db('standin_test').collection<Record<string, unknown>>(`${name}_plain`);
    await indexed.createIndexes([
      { name: 'a_b_seq', key: { a: 1, b: 1, seq: 1 } },
      { name: 'a_b_rev', key: { a: 1, b: 1, rev: 1 } },
    ]);
    const value = () => (random() < 0.1 ? pick(['x', null, [3, 4]]) : Math.floor(random() * 40) + pick([0, 0.5]));
    const fields = () => {
      const doc: Record<string, unknown> = { a: random() < 0.05 ? ['k', 'm'] : pick(['k', 'm']), b: pick([1, 'p']) };
      doc.seq = value();
      if (random() < 0.8) doc.rev = value();
      return doc;
    };
    let ids = 0;
    const write = async (collection: typeof indexed, op: number, id: string, doc: Record<string, unknown>) => {
      if (op === 0) await collection.insertOne({ _id: id, ...doc } as never);
      else if (op === 1) await collection.updateOne({ _id: id } as never, { $set: doc });
      else await collection.deleteOne({ _id: id } as never);
    };
    const queries = (): Array<[Record<string, unknown>, Record<string, 1 | -1> | undefined, number | undefined]> => {
      const pinned = { a: pick(['k', 'm']), b: pick([1, 'p']) };
      const bound = () => ({ [pick(['$gt', '$gte', '$lt', '$lte'])]: Math.floor(random() * 40) });
      return [
        [pinned, undefined, undefined],
        [{ ...pinned, seq: bound() }, undefined, undefined],
        [
          { ...pinned, seq: { $gt: Math.floor(random() * 20), $lte: 20 + Math.floor(random() * 20) } },
          undefined,
          undefined,
        ],
        [{ ...pinned, $or: [{ seq: bound() }, { rev: bound() }] }, undefined, undefined],
        [pinned, { seq: pick([1, -1]) }, 1 + Math.floor(random() * 5)],
        [{ ...pinned, rev: bound() }, { rev: pick([1, -1]) }, 1 + Math.floor(random() * 5)],
      ];
    };
    const answer = async (
      collection: typeof indexed,
      filter: object,
      sort?: Record<string, 1 | -1>,
      limit?: number,
      session?: ClientSession,
    ) => {
      const docs = await collection
        .find(filter as never, {
          ...(sort ? { sort } : {}),
          ...(limit ? { limit } : {}),
          ...(session ? { session } : {}),
        })
        .toArray();
      // Ties on the sorted field may come in any order (as on MongoDB): a sorted answer is compared by its values.
      if (sort) return docs.map((doc) => JSON.stringify(doc[Object.keys(sort)[0] as string]));
      return docs.map((doc) => JSON.stringify(doc)).sort();
    };
    for (let round = 0; round < 400; round++) {
      const op = ids < 5 || random() < 0.5 ? 0 : random() < 0.8 ? 1 : 2;
      const id = op === 0 ? `d${ids++}` : `d${Math.floor(random() * ids)}`;
      const doc = fields();
      for (const collection of [indexed, plain]) await write(collection, op, id, doc).catch(() => undefined);
      if (round % 10 !== 9) continue;
      for (const [filter, sort, limit] of queries()) {
        expect(await answer(indexed, filter, sort, limit), JSON.stringify({ round, filter, sort, limit })).toEqual(
          await answer(plain, filter, sort, limit),
        );
      }
      // Inside a transaction, its own writes count, in place of what they replace.
      const session = client.startSession();
      const session2 = client.startSession();
      try {
        session.startTransaction();
        session2.startTransaction();
        const target = `d${Math.floor(random() * ids)}`;
        const change = fields();
        await indexed.updateOne({ _id: target } as never, { $set: change }, { session });
        await indexed.insertOne({ _id: `t${round}`, ...change } as never, { session });
        await plain.updateOne({ _id: target } as never, { $set: change }, { session: session2 });
        await plain.insertOne({ _id: `t${round}`, ...change } as never, { session: session2 });
        for (const [filter, sort, limit] of queries()) {
          expect(await answer(indexed, filter, sort, limit, session), `in a transaction, round ${round}`).toEqual(
            await answer(plain, filter, sort, limit, session2),
          );
        }
      } finally {
        await session.abortTransaction();
        await session2.abortTransaction();
        await session.endSession();
        await session2.endSession();
      }
    }
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

/** The documents of every collection the bulkWrite tests write, for the driver's typed models. */
type Docs = Record<string, { _id: string; n?: number }>;

describe("MongoDB 8's multi-collection bulkWrite on the stand-in", () => {
  let eight: StandIn;
  let client8: MongoClient;
  let db = 0;

  beforeAll(async () => {
    eight = await startStandIn({ serverVersion: '8.0', ttlMonitorIntervalMs: 0 });
    client8 = new MongoClient(eight.url);
    await client8.connect();
  });

  afterAll(async () => {
    await client8.close();
    await eight.stop();
  });

  /** Two collections of a database no other test uses, and their namespaces. */
  function pair() {
    db += 1;
    const name = `bulk${db}`;
    return {
      a: client8.db(name).collection<{ _id: string; n?: number }>('a'),
      b: client8.db(name).collection<{ _id: string; n?: number }>('b'),
      nsA: `${name}.a`,
      nsB: `${name}.b`,
    };
  }

  const run = (command: Record<string, unknown>) => client8.db('admin').command(command);

  it('reports MongoDB 8.0 (wire version 25), where the 7.0 stand-in has no such command', async () => {
    const hello = await client8.db('admin').command({ hello: 1 });
    expect(hello.maxWireVersion).toBe(25);
    expect((await client8.db('admin').command({ buildInfo: 1 })).version).toBe('8.0.0');
    const refused = await caught(client.db('admin').command({ bulkWrite: 1, ops: [], nsInfo: [] }));
    expect(refused.code).toBe(59);
  });

  it('writes several collections in one command, and replies with totals and a cursor of results', async () => {
    const { a, b, nsA, nsB } = pair();
    await b.insertOne({ _id: 'kept', n: 1 });
    const reply = await run({
      bulkWrite: 1,
      ops: [
        { insert: 0, document: { _id: 'x', n: 1 } },
        { update: 1, filter: { _id: 'kept' }, updateMods: { $inc: { n: 1 } } },
        { update: 1, filter: { _id: 'new' }, updateMods: { $set: { n: 5 } }, upsert: true },
        { delete: 0, filter: { _id: 'absent' } },
      ],
      nsInfo: [{ ns: nsA }, { ns: nsB }],
    });
    expect(reply).toMatchObject({
      ok: 1,
      nErrors: 0,
      nInserted: 1,
      nMatched: 1,
      nModified: 1,
      nUpserted: 1,
      nDeleted: 0,
    });
    expect(reply.cursor.id.toString()).toBe('0');
    expect(reply.cursor.firstBatch).toEqual([
      { ok: 1, idx: 0, n: 1 },
      { ok: 1, idx: 1, n: 1, nModified: 1 },
      { ok: 1, idx: 2, n: 1, nModified: 0, upserted: { _id: 'new' } },
      { ok: 1, idx: 3, n: 0 },
    ]);
    expect(await a.find().toArray()).toEqual([{ _id: 'x', n: 1 }]);
    expect(await b.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 'kept', n: 2 },
      { _id: 'new', n: 5 },
    ]);
    const quiet = await run({
      bulkWrite: 1,
      errorsOnly: true,
      ops: [{ delete: 0, filter: {}, multi: true }],
      nsInfo: [{ ns: nsB }],
    });
    expect(quiet).toMatchObject({ nDeleted: 2, cursor: { firstBatch: [] } });
  });

  it('inside a transaction it is all or nothing: a failing operation fails the command and aborts the transaction', async () => {
    const { a, b, nsA, nsB } = pair();
    await b.insertOne({ _id: 'taken' });
    const session = client8.startSession();
    try {
      session.startTransaction();
      await a.insertOne({ _id: 'before' }, { session });
      // The driver wraps the server's error in a MongoClientBulkWriteError, as its cause.
      const failed = await client8
        .bulkWrite<Docs>(
          [
            { namespace: nsA, name: 'insertOne', document: { _id: 'x' } },
            { namespace: nsB, name: 'updateOne', filter: { _id: 'y' }, update: { $set: { n: 1 } }, upsert: true },
            { namespace: nsB, name: 'insertOne', document: { _id: 'taken' } },
          ],
          { session },
        )
        .catch((error: { name: string; cause?: { code?: number } }) => [error.name, error.cause?.code]);
      expect(failed).toEqual(['MongoClientBulkWriteError', 11000]);
      const commit = await caught(session.commitTransaction());
      expect(commit.code).toBe(251);
    } finally {
      await session.endSession();
    }
    expect(await a.find().toArray()).toEqual([]);
    expect(await b.find().toArray()).toEqual([{ _id: 'taken' }]);
  });

  it('in a transaction its writes are invisible until the commit, and meet write conflicts as other writes do', async () => {
    const { a, b, nsA, nsB } = pair();
    await a.insertOne({ _id: 'doc', n: 0 });
    const first = client8.startSession();
    const second = client8.startSession();
    try {
      first.startTransaction();
      second.startTransaction();
      await client8.bulkWrite<Docs>(
        [
          { namespace: nsA, name: 'updateOne', filter: { _id: 'doc' }, update: { $inc: { n: 1 } } },
          { namespace: nsB, name: 'insertOne', document: { _id: 'log' } },
        ],
        { session: first },
      );
      expect(await a.findOne({ _id: 'doc' })).toEqual({ _id: 'doc', n: 0 });
      expect(await b.countDocuments()).toBe(0);
      const conflict = await client8
        .bulkWrite<Docs>([{ namespace: nsA, name: 'updateOne', filter: { _id: 'doc' }, update: { $inc: { n: 10 } } }], {
          session: second,
        })
        .catch((error: { cause?: { code?: number; errorLabels?: string[] } }) => error.cause);
      expect(conflict).toMatchObject({ code: 112, errorLabels: ['TransientTransactionError'] });
      await first.commitTransaction();
    } finally {
      await first.endSession();
      await second.endSession();
    }
    expect(await a.findOne({ _id: 'doc' })).toEqual({ _id: 'doc', n: 1 });
    expect(await b.countDocuments()).toBe(1);
  });

  it('outside a transaction each operation stands alone: ordered stops at the first error, unordered goes on', async () => {
    const { a, nsA } = pair();
    await a.insertOne({ _id: 'taken' });
    const ops = [
      { insert: 0, document: { _id: 'one' } },
      { insert: 0, document: { _id: 'taken' } },
      { insert: 0, document: { _id: 'two' } },
    ];
    const ordered = await run({ bulkWrite: 1, ops, nsInfo: [{ ns: nsA }] });
    expect(ordered).toMatchObject({ ok: 1, nErrors: 1, nInserted: 1 });
    expect(ordered.cursor.firstBatch[1]).toMatchObject({ ok: 0, idx: 1, code: 11000 });
    expect((await a.find().toArray()).map((doc) => doc._id).sort()).toEqual(['one', 'taken']);
    const unordered = await run({
      bulkWrite: 1,
      ordered: false,
      ops: [{ insert: 0, document: { _id: 'taken' } }, ops[2]],
      nsInfo: [{ ns: nsA }],
    });
    expect(unordered).toMatchObject({ nErrors: 1, nInserted: 1 });
    expect((await a.find().toArray()).map((doc) => doc._id).sort()).toEqual(['one', 'taken', 'two']);
  });

  it("is refused outside the admin database, and with what it does not implement, with MongoDB's codes", async () => {
    const { nsA } = pair();
    const ops = [{ insert: 0, document: { _id: 'x' } }];
    expect((await caught(client8.db('other').command({ bulkWrite: 1, ops, nsInfo: [{ ns: nsA }] }))).code).toBe(13);
    expect((await caught(run({ bulkWrite: 1, ops: [{ insert: 3, document: {} }], nsInfo: [{ ns: nsA }] }))).code).toBe(
      2,
    );
    expect((await caught(run({ bulkWrite: 1, ops, nsInfo: [{ ns: 'nodot' }] }))).code).toBe(73);
    const arrayFilters = [{ update: 0, filter: {}, updateMods: { $set: { n: 1 } }, arrayFilters: [] }];
    expect((await caught(run({ bulkWrite: 1, ops: arrayFilters, nsInfo: [{ ns: nsA }] }))).code).toBe(2);
  });
});
