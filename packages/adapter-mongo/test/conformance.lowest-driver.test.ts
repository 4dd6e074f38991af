/**
 * The shared conformance suite again, through the lowest driver version the
 * peer range claims (mongodb 6.0.0), each service on a client of its own.
 */
import { runConformanceSuite } from '@adk-state/conformance-tests';
import type { MongoClient } from 'mongodb';
import { MongoClient as LowestMongoClient } from 'mongodb-lowest';
import { MongoSessionService } from '../src/index.js';
import { dropDatabase, mongoUrl, uniqueDbName } from './support.js';

const dbName = uniqueDbName('conformance_lowest');
const clients = new WeakMap<MongoSessionService, LowestMongoClient>();

runConformanceSuite({
  name: 'adapter-mongo with mongodb 6.0.0',
  create: (options) => {
    const client = new LowestMongoClient(mongoUrl());
    const service = new MongoSessionService({ ...options, client: client as unknown as MongoClient, dbName });
    clients.set(service, client);
    return service;
  },
  destroy: async (service) => {
    await service.close();
    await clients.get(service)?.close();
  },
  teardown: () => dropDatabase(dbName),
  capabilities: { sharedBackend: true },
});
