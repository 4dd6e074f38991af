/**
 * The shared conformance suite once more, through the current driver against
 * a server without MongoDB 8's `bulkWrite` command (the stand-in as MongoDB
 * 7.0): appends use a command per collection. Against MONGODB_URL it runs on
 * that server like the other targets.
 */
import { runConformanceSuite } from '@adk-state/conformance-tests';
import { MongoClient } from 'mongodb';
import { MongoSessionService } from '../src/index.js';
import { mongoLostWrites } from './damage.js';
import { conformanceBackend, MONGO_TTL_ABSENT, uniqueDbName } from './support.js';

const dbName = uniqueDbName('conformance_mongodb7');
const backend = conformanceBackend(dbName, '7.0');

/** The lost-writes control's own client, made on first use. */
let raw: MongoClient | undefined;
function rawClient(): MongoClient {
  raw ??= new MongoClient(backend.url());
  return raw;
}

runConformanceSuite({
  name: 'adapter-mongo on MongoDB 7.0',
  setup: () => backend.setup(),
  create: (options) => new MongoSessionService({ ...options, url: backend.url(), dbName }),
  destroy: (service) => service.close(),
  teardown: async () => {
    await raw?.close();
    await backend.teardown();
  },
  capabilities: {
    sharedBackend: true,
    outage: backend.outage,
    expiry: { absent: MONGO_TTL_ABSENT },
    lostWrites: mongoLostWrites(rawClient, dbName),
    sessionKeys: true,
  },
});
