/**
 * The shared conformance suite against MongoDB: a fresh service with a client
 * of its own (made from a url) for every service a test makes, so
 * cross-instance tests run across separate clients of one server. On the
 * stand-in (as MongoDB 8.0, so appends go through the multi-collection
 * `bulkWrite` command), the outage group takes the server down and brings it
 * back.
 */
import { runConformanceSuite } from '@adk-state/conformance-tests';
import { MongoClient } from 'mongodb';
import { MongoSessionService } from '../src/index.js';
import { mongoDamage, mongoLostWrites } from './damage.js';
import { conformanceBackend, MONGO_TTL_ABSENT, uniqueDbName } from './support.js';

const dbName = uniqueDbName('conformance');
const backend = conformanceBackend(dbName);

/** The damage control's own client, made on first use. */
let raw: MongoClient | undefined;
function rawClient(): MongoClient {
  raw ??= new MongoClient(backend.url());
  return raw;
}

runConformanceSuite({
  name: 'adapter-mongo',
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
    damage: mongoDamage(rawClient, dbName),
    lostWrites: mongoLostWrites(rawClient, dbName),
    sessionKeys: true,
  },
});
