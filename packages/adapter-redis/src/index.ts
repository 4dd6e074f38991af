/**
 * @adk-state/adapter-redis: session state for `@google/adk` in Redis or
 * Redis Cluster, on `ioredis`. Every operation is one server-side script:
 * one round trip, atomic.
 */
import { InvalidArgumentError, StateSessionService, type StateSessionServiceOptions } from '@adk-state/core';
import type { Cluster, Redis } from 'ioredis';
import * as ioredis from 'ioredis';
import { assertKeyPrefix } from './keys.js';
import type { CommandClient } from './scripts.js';
import { RedisStore } from './store.js';

export { appTag, decodeText, encodeText, sessionKeys } from './keys.js';
export { RedisStore, SCRIPT_SHAS } from './store.js';

/**
 * The Redis class. At run time `default` is the class in every ioredis 5.x and
 * 6.x, from ESM and CommonJS alike (the named export `Redis` came later); the
 * typings describe `default` of a CommonJS module as the whole module, hence the cast.
 */
const RedisClass = (ioredis as unknown as { default: typeof Redis }).default;

/** The key prefix used when none is given. */
export const DEFAULT_KEY_PREFIX = 'adk-state:';

/** Options of {@link RedisSessionService}: where to connect, how to name keys, and core's options. */
export interface RedisSessionServiceOptions extends StateSessionServiceOptions {
  /**
   * An existing `ioredis` client (`Redis` or `Cluster`). The service never
   * closes it. Give either `client` or `url`.
   */
  client?: Redis | Cluster;
  /**
   * A `redis://` or `rediss://` URL (a single server); the service creates the
   * client and `close()` quits it.
   */
  url?: string;
  /**
   * Put in front of every key, so several apps, environments or test runs
   * share one server. Default `'adk-state:'`. Must not contain `{` or `}`.
   */
  keyPrefix?: string;
  /**
   * Idle time to live of a session and its events, in seconds: a session that
   * is neither created nor appended to for this long disappears (user and
   * app state stay). Default: none.
   */
  sessionTtlSeconds?: number;
}

/** A drop-in `sessionService` for the `@google/adk` Runner that keeps sessions in Redis. */
export class RedisSessionService extends StateSessionService {
  /** The client the service talks to (its own when it was made from `url`). */
  readonly client: Redis | Cluster;

  constructor(options: RedisSessionServiceOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('options', 'RedisSessionService needs { client } or { url }');
    }
    const { client, url, keyPrefix = DEFAULT_KEY_PREFIX, sessionTtlSeconds, ...serviceOptions } = options;
    if ((client === undefined) === (url === undefined)) {
      throw new InvalidArgumentError('client', 'give exactly one of client (an ioredis Redis or Cluster) or url');
    }
    if (url !== undefined && typeof url !== 'string') throw new InvalidArgumentError('url', 'must be a string');
    assertKeyPrefix(keyPrefix);
    const ttlMs = toTtlMs(sessionTtlSeconds);
    const own = client === undefined;
    const redis = client ?? new RedisClass(url as string);
    assertKeyPrefix(redis.options?.keyPrefix ?? '', 'client keyPrefix');
    const store = new RedisStore(redis as unknown as CommandClient, {
      keyPrefix,
      sessionTtlMs: ttlMs,
      ...(own ? { release: () => quit(redis) } : {}),
    });
    super(store, serviceOptions);
    this.client = redis;
  }
}

function toTtlMs(seconds: number | undefined): number {
  if (seconds === undefined) return 0;
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds <= 0) {
    throw new InvalidArgumentError('sessionTtlSeconds', `must be a positive number of seconds, got ${String(seconds)}`);
  }
  return Math.max(1, Math.ceil(seconds * 1000));
}

/** Quits a client the service made, and resolves once it has ended. */
async function quit(client: Redis | Cluster): Promise<void> {
  if (client.status === 'end') return;
  const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
  await ended;
}
