/**
 * Every target of a bench run, in the order of the tables. To add a store:
 * write its `defineTarget` (and its backend, if it needs a server) and list it here.
 */
import { adkDatabasePostgres, adkDatabaseSqlite, adkInMemory } from './adk.js';
import { firestoreStore } from './firestore.js';
import { memoryStore } from './memory.js';
import { mongo7Store, mongoStore } from './mongo.js';
import { redisStore } from './redis.js';
import type { AnyTargetSpec } from './types.js';

export const TARGETS: readonly AnyTargetSpec[] = [
  memoryStore,
  redisStore,
  mongoStore,
  mongo7Store,
  firestoreStore,
  adkInMemory,
  adkDatabaseSqlite,
  adkDatabasePostgres,
];
