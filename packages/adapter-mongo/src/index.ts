/**
 * @adk-state/adapter-mongo: durable session state for `@google/adk` in
 * MongoDB (a replica set or a sharded cluster), with atomic transactional
 * appends, one document per event and an optional session time-to-live.
 */
import {
  DEFAULT_TIMEOUT_MS,
  InvalidArgumentError,
  MAX_TIMEOUT_MS,
  StateSessionService,
  type StateSessionServiceOptions,
} from '@adk-state/core';
import { assertPositiveNumber, type ExpiryOptions, expiryOf } from '@adk-state/core/store';
import { MongoClient, type MongoClientOptions } from 'mongodb';
import { MongoStore } from './store.js';

export { type CollectionNames, EVENT_EXPIRY_GRACE_MS, SCHEMA_VERSION } from './layout.js';
export { MongoStore, type MongoStoreConfig, SchemaVersionError } from './store.js';
export { StandaloneServerError } from './topology.js';

/** Where the service connects: exactly one of a client the application owns, or a connection string. */
export type MongoConnection =
  | {
      /** A client the application owns; the service never closes it. */
      client: MongoClient;
      url?: never;
      clientOptions?: never;
    }
  | {
      client?: never;
      /** A connection string; the service creates the client and closes it in `close()`. */
      url: string;
      /**
       * Options for the client created from `url`. They, and options given in
       * the URL itself, win over the bounded defaults of {@link urlClientDefaults}.
       */
      clientOptions?: MongoClientOptions;
    };

/** Options of {@link MongoSessionService}: the connection, where to keep the data, and core's options. */
export type MongoSessionServiceOptions = MongoConnection & MongoStorageOptions & StateSessionServiceOptions;

/** Where and how long the data is kept. */
export interface MongoStorageOptions {
  /** Default `adk_state`. */
  dbName?: string;
  /** Prepended to the two collection names. Default `adk_`. */
  collectionPrefix?: string;
  /** Sessions (and their events) expire this many seconds after their creation. Default: never. */
  expireAfterCreateSeconds?: number;
}

/** The longest `expireAfterCreateSeconds`: 100 years (of 365.25 days). */
export const MAX_SESSION_TTL_SECONDS = 3_155_760_000;

/**
 * The timeouts a client made from `url` gets unless the URL or
 * `clientOptions` set them, derived from the service's `timeoutMs` so that a
 * client never waits longer than the calls it serves: server selection (and
 * with it the first connection) gives up at 80% of the deadline, at most
 * 30 s, so a write that found no server fails before the deadline and says
 * it was not applied; a connection attempt gives up after at most 10 s; and
 * a socket that stays silent 5 s past the deadline is closed (a stalled
 * server), since every command carries the time left as `maxTimeMS`. With
 * `timeoutMs: Infinity`: the driver's 30 s server selection, 10 s connect and
 * no socket timeout.
 */
export function urlClientDefaults(timeoutMs: number = DEFAULT_TIMEOUT_MS): MongoClientOptions {
  const bounded = Number.isFinite(timeoutMs);
  const serverSelectionTimeoutMS = bounded ? Math.max(1, Math.min(30_000, Math.floor(timeoutMs * 0.8))) : 30_000;
  return {
    serverSelectionTimeoutMS,
    connectTimeoutMS: Math.min(10_000, serverSelectionTimeoutMS),
    socketTimeoutMS: bounded ? Math.min(MAX_TIMEOUT_MS, timeoutMs + 5_000) : 0,
  };
}

/** The lower-cased names of the options a connection string sets itself. */
function urlOptionNames(url: string): Set<string> {
  const names = new Set<string>();
  const query = url.indexOf('?');
  if (query >= 0) for (const name of new URLSearchParams(url.slice(query + 1)).keys()) names.add(name.toLowerCase());
  return names;
}

/** A client for `url`: the bounded defaults, then the URL's own options, then `clientOptions`. */
function clientFor(url: string, timeoutMs: number, clientOptions: MongoClientOptions | undefined): MongoClient {
  if (clientOptions !== undefined && (typeof clientOptions !== 'object' || clientOptions === null)) {
    throw new InvalidArgumentError('clientOptions', 'must be an object of MongoClientOptions');
  }
  const inUrl = urlOptionNames(url);
  const defaults = Object.entries(urlClientDefaults(timeoutMs)).filter(([name]) => !inUrl.has(name.toLowerCase()));
  try {
    return new MongoClient(url, { ...Object.fromEntries(defaults), ...clientOptions });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new InvalidArgumentError(
      'url',
      `the MongoDB driver refused the connection string or clientOptions (${reason})`,
    );
  }
}

function storeFor(options: MongoSessionServiceOptions): MongoStore {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('options', 'must be an object with client or url');
  }
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
  // The idle clock is refused by name: callers from JavaScript or another store's options would otherwise lose it silently.
  const ttl = expiryOf(options as ExpiryOptions, {
    max: MAX_SESSION_TTL_SECONDS,
    clocks: ['create'],
    unsupported:
      'a TTL index deletes each event by its own date, so an idle clock would rewrite every event of a session on every append; use expireAfterCreateSeconds',
  })?.seconds;
  // Checked here as well as by the service: the client's defaults derive from it.
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  assertPositiveNumber('timeoutMs', timeoutMs, { max: MAX_TIMEOUT_MS, allowInfinity: true });
  if (options.client !== undefined && typeof (options.client as { db?: unknown } | null)?.db !== 'function') {
    throw new InvalidArgumentError('client', 'must be a MongoClient');
  }
  const client = options.client ?? clientFor(options.url as string, timeoutMs, options.clientOptions);
  return new MongoStore({
    client,
    ownsClient: options.client === undefined,
    dbName,
    collectionPrefix,
    ...(ttl !== undefined ? { expireAfterCreateSeconds: ttl } : {}),
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
