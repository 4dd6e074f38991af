/** `@adk-state/adapter-mongo` on the stand-in server, round trips counted by the driver's command monitoring. */
import { MongoClient } from 'mongodb';
import { type MongoBackend, mongoBackend } from '../backends/mongo.js';
import { adapterSeeder, defineTarget, type OpenTarget } from './types.js';

/** Connection handshakes, not requests of an operation. */
const HANDSHAKES = new Set(['hello', 'isMaster', 'ismaster']);

export const mongoStore = defineTarget<MongoBackend>({
  id: 'mongodb',
  label: 'adk-state MongoDB',
  kind: 'store',
  backend: mongoBackend,
  async open(backend): Promise<OpenTarget> {
    const { MongoSessionService } = await import('@adk-state/adapter-mongo');
    const seeding = await import('../../../adapter-mongo/test/seed.js');
    const client = new MongoClient(backend.url, { monitorCommands: true });
    let commands = 0;
    client.on('commandStarted', (event) => {
      if (!HANDSHAKES.has(event.commandName)) commands++;
    });
    const service = new MongoSessionService({ client, dbName: 'adk_state_bench' });
    await service.ready();
    return {
      service,
      // The adapter's own bulk seeder writes the documents its appends would write.
      seed: adapterSeeder(seeding, service.store),
      roundTrips: {
        unit: 'commands sent by the mongodb driver (command monitoring)',
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
  },
});
