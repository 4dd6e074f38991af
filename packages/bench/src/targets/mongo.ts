/**
 * `@adk-state/adapter-mongo` on the stand-in server, round trips counted by
 * the driver's command monitoring: on MongoDB 8.0 (an append is one
 * `bulkWrite` command and the commit) and on MongoDB 7.0 (the session and
 * bucket writes, the event write, the commit).
 */
import { MongoClient } from 'mongodb';
import { type MongoBackend, mongo7Backend, mongoBackend } from '../backends/mongo.js';
import type { BackendSpec } from '../backends/types.js';
import { adapterSeeder, defineTarget, type OpenTarget } from './types.js';

/** Connection handshakes, not requests of an operation. */
const HANDSHAKES = new Set(['hello', 'isMaster', 'ismaster']);

async function openMongo(backend: MongoBackend): Promise<OpenTarget> {
  const { MongoSessionService } = await import('@adk-state/adapter-mongo');
  const seeding = await import('@adk-state/adapter-mongo/seed');
  const client = new MongoClient(backend.url, { monitorCommands: true });
  let commands = 0;
  client.on('commandStarted', (event) => {
    if (!HANDSHAKES.has(event.commandName)) commands++;
  });
  const service = new MongoSessionService({ client, dbName: 'adk_state_bench' });
  await service.ready();
  const sharingReads = new MongoSessionService({ client, dbName: 'adk_state_bench', shareReadEvents: true });
  await sharingReads.ready();
  const bulk = service.store.usesBulkWrite;
  return {
    service,
    sharingReads,
    // The adapter's own bulk seeder writes the documents its appends would write.
    seed: adapterSeeder(seeding, service.store),
    details: bulk
      ? 'appends as one bulkWrite command (MongoDB 8) and the commit'
      : 'appends as an update of the sessions collection (revision check and buckets), an update of the events collection and the commit',
    roundTrips: {
      unit: `commands sent by the mongodb driver (command monitoring)${bulk ? ', bulkWrite' : ''}`,
      service,
      async count(operation) {
        commands = 0;
        await operation();
        return commands;
      },
    },
    async close() {
      await client.close();
    },
  };
}

function mongoTarget(id: string, label: string, backend: BackendSpec<MongoBackend>) {
  return defineTarget<MongoBackend>({ id, label, kind: 'store', backend, open: openMongo });
}

export const mongoStore = mongoTarget('mongodb', 'adk-state MongoDB', mongoBackend);

export const mongo7Store = mongoTarget('mongodb-7', 'adk-state MongoDB 7.0', mongo7Backend);
