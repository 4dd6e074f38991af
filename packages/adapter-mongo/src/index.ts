/**
 * @adk-state/adapter-mongo: durable session state for `@google/adk` in
 * MongoDB (a replica set or a sharded cluster), with atomic transactional
 * appends, one document per event and an optional session time-to-live.
 */
import { InvalidArgumentError, StateSessionService, type StateSessionServiceOptions } from '@adk-state/core';
import { MongoClient, type MongoClientOptions } from 'mongodb';
import { MongoStore } from './store.js';

export { decodeFieldName, encodeFieldName } from './encoding.js';
export { collectionNames, EVENT_EXPIRY_GRACE_MS, SCHEMA_VERSION } from './layout.js';
export { MongoStore, type MongoStoreConfig, SchemaVersionError } from './store.js';
export { StandaloneServerError } from './topology.js';

/** Options of {@link MongoSessionService}: one of `client` or `url`, and where to keep the data. */
export interface MongoSessionServiceOptions extends StateSessionServiceOptions {
  /** A client the application owns; the service never closes it. */
  client?: MongoClient;
  /** A connection string; the service creates the client and closes it in `close()`. */
  url?: string;
  /** Options for the client created from `url`. */
  clientOptions?: MongoClientOptions;
  /** Default `adk_state`. */
  dbName?: string;
  /** Prepended to the four collection names. Default `adk_`. */
  collectionPrefix?: string;
  /** Sessions (and their events) expire this many seconds after their creation. Default: never. */
  sessionTtlSeconds?: number;
}

function storeFor(options: MongoSessionServiceOptions): MongoStore {
  if ((options.client === undefined) === (options.url === undefined)) {
    throw new InvalidArgumentError(
      'options',
      'give exactly one of client (a MongoClient) or url (a connection string)',
    );
  }
  if (options.url !== undefined && (typeof options.url !== 'string' || options.url === '')) {
    throw new InvalidArgumentError('url', 'must be a non-empty connection string');
  }
  const dbName = options.dbName ?? 'adk_state';
  if (typeof dbName !== 'string' || dbName === '' || /[/\\. "$*<>:|?]/.test(dbName) || dbName.includes('\u0000')) {
    throw new InvalidArgumentError('dbName', `must be a valid MongoDB database name, got ${JSON.stringify(dbName)}`);
  }
  const collectionPrefix = options.collectionPrefix ?? 'adk_';
  if (
    typeof collectionPrefix !== 'string' ||
    collectionPrefix.includes('$') ||
    collectionPrefix.includes('\u0000') ||
    collectionPrefix.startsWith('system.')
  ) {
    throw new InvalidArgumentError(
      'collectionPrefix',
      `must be a string without '$' or NUL that does not start with 'system.', got ${JSON.stringify(collectionPrefix)}`,
    );
  }
  const ttl = options.sessionTtlSeconds;
  if (ttl !== undefined && (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl <= 0)) {
    throw new InvalidArgumentError('sessionTtlSeconds', `must be a positive number of seconds, got ${String(ttl)}`);
  }
  const client = options.client ?? new MongoClient(options.url as string, options.clientOptions);
  return new MongoStore({
    client,
    ownsClient: options.client === undefined,
    dbName,
    collectionPrefix,
    ...(ttl !== undefined ? { sessionTtlSeconds: ttl } : {}),
    now: options.now ?? Date.now,
  });
}

/** A drop-in `sessionService` for the `@google/adk` Runner that keeps state in MongoDB. */
export class MongoSessionService extends StateSessionService {
  declare readonly store: MongoStore;

  constructor(options: MongoSessionServiceOptions) {
    super(storeFor(options), options);
  }

  /**
   * Checks the server (a replica set or a sharded cluster) and creates the
   * indexes now instead of on first use. Safe to call any number of times.
   */
  async ready(): Promise<void> {
    await this.store.ready();
  }
}
