/**
 * The shared conformance suite again, through the lowest driver version the
 * peer range claims (mongodb 6.0.0), each service on a client of its own that
 * the application made with the driver's defaults (and which the service
 * therefore leaves as it is). That driver has no `MongoClient.bulkWrite`, so
 * appends use a command per collection even though the stand-in reports
 * MongoDB 8.0. On the stand-in, the outage group takes the server down and
 * brings it back.
 */
import { runConformanceSuite } from '@adk-state/conformance-tests';
import type { MongoClient } from 'mongodb';
import { MongoClient as LowestMongoClient } from 'mongodb-lowest';
import { MongoSessionService } from '../src/index.js';
import { conformanceBackend, MONGO_TTL_ABSENT, uniqueDbName } from './support.js';

const dbName = uniqueDbName('conformance_lowest');
const backend = conformanceBackend(dbName);
const clients = new WeakMap<MongoSessionService, LowestMongoClient>();

runConformanceSuite({
  name: 'adapter-mongo with mongodb 6.0.0',
  setup: () => backend.setup(),
  create: (options) => {
    const client = new LowestMongoClient(backend.url());
    const service = new MongoSessionService({ ...options, client: client as unknown as MongoClient, dbName });
    clients.set(service, client);
    return service;
  },
  destroy: async (service) => {
    await service.close();
    await clients.get(service)?.close();
  },
  teardown: () => backend.teardown(),
  capabilities: {
    sharedBackend: true,
    outage: backend.outage,
    expiry: { absent: MONGO_TTL_ABSENT },
    sessionKeys: true,
  },
});
