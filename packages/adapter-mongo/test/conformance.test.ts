/**
 * The shared conformance suite against MongoDB: a fresh service with a client
 * of its own for every service a test makes, so cross-instance tests run
 * across separate clients of one server.
 */
import { runConformanceSuite } from '@adk-state/conformance-tests';
import { MongoSessionService } from '../src/index.js';
import { dropDatabase, mongoUrl, uniqueDbName } from './support.js';

const dbName = uniqueDbName('conformance');

runConformanceSuite({
  name: 'adapter-mongo',
  create: (options) => new MongoSessionService({ ...options, url: mongoUrl(), dbName }),
  destroy: (service) => service.close(),
  teardown: () => dropDatabase(dbName),
  capabilities: { sharedBackend: true },
});
