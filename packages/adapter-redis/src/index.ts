/**
 * @adk-state/adapter-redis: session state for `@google/adk` in Redis or
 * Redis Cluster, on `ioredis`. On one server every operation is one
 * server-side script: one round trip, atomic. On a Cluster, `app:` keys of an
 * app spread over several slots travel through an outbox (see `outbox.ts`).
 */
import {
  DEFAULT_TIMEOUT_MS,
  InvalidArgumentError,
  StateSessionService,
  type StateSessionServiceOptions,
} from '@adk-state/core';
import { expiryOf, settledWithin } from '@adk-state/core/store';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import * as ioredis from 'ioredis';
import { type CommandClient, RedisClass, type ReplicaWait } from './connection.js';
import { assertKeyPrefix, DEFAULT_SHARDS, defaultShards } from './keys.js';
import type { RedisStoreWarning } from './outbox.js';
import { connectionsOf, destroySockets, STALL_GRACE_MS, watchStalls } from './stalls.js';
import { DEFAULT_CATCH_UP_AFTER_MS, DEFAULT_DRAIN_MS, DEFAULT_OUTBOX_KEEP_MS, RedisStore } from './store.js';

export { listAppNames, listSessionKeys } from './apps.js';
export type { ReplicaWait } from './connection.js';
export { DEFAULT_SHARDS } from './keys.js';
export type { RedisStoreWarning } from './outbox.js';
export {
  DEFAULT_CATCH_UP_AFTER_MS,
  DEFAULT_DRAIN_MS,
  DEFAULT_OUTBOX_KEEP_MS,
  RedisLayoutError,
  RedisStore,
  type RedisStoreOptions,
} from './store.js';

/** The Cluster class, a named export of every ioredis 5.x and 6.x. */
const ClusterClass = ioredis.Cluster;

/** The key prefix used when none is given. */
export const DEFAULT_KEY_PREFIX = 'adk-state:';

/**
 * The longest `expireAfterIdleSeconds` or `expireAfterCreateSeconds` accepted: 2^31 - 1 seconds (about 68
 * years). Redis keeps expiry times as signed 64-bit milliseconds, and the
 * scripts compute them in Lua numbers (doubles); this bound keeps both exact.
 */
export const MAX_SESSION_TTL_SECONDS = 2 ** 31 - 1;

/** The most shards an app can have: one per hash slot. */
export const MAX_SHARDS = 16_384;

/** The longest wait between two reconnection attempts of a client made from `url`, in milliseconds. */
export const MAX_RECONNECT_DELAY_MS = 2_000;

/**
 * The options a client made from `url` starts with; `clientOptions` is
 * spread over them, so each one can be changed there.
 *
 * - `maxRetriesPerRequest: 0`: a command waiting for the connection fails
 *   as soon as a connection attempt fails, and a command the connection
 *   took before it broke fails then too, instead of being sent again after
 *   reconnecting (which could apply a write twice, or report it as stale).
 * - `enableOfflineQueue: true`: a command issued while the client connects
 *   or reconnects waits for that attempt, so the first calls after
 *   construction (or a short network blip) work; with the setting above it
 *   never waits past one failed attempt.
 * - `retryStrategy`: reconnect after 100 ms, doubling up to
 *   {@link MAX_RECONNECT_DELAY_MS}, for as long as the service lives.
 * - `connectTimeout: 5000`: a connection attempt that hangs (a dropped SYN)
 *   fails after 5 s.
 * - No `commandTimeout`: the service's `timeoutMs` bounds every call.
 */
export const URL_CLIENT_DEFAULTS: Readonly<RedisOptions> = Object.freeze({
  maxRetriesPerRequest: 0,
  enableOfflineQueue: true,
  retryStrategy: (attempt: number) => Math.min(100 * 2 ** Math.min(attempt - 1, 10), MAX_RECONNECT_DELAY_MS),
  connectTimeout: 5_000,
});

/** Options of {@link RedisSessionService}: where to connect, how to name keys, and core's options. */
/** Where the service connects: exactly one of a client the application owns, or a URL. */
export type RedisConnection =
  | {
      /** An existing `ioredis` client (`Redis` or `Cluster`). The service never closes it. */
      client: Redis | Cluster;
      url?: never;
      clientOptions?: never;
    }
  | {
      client?: never;
      /**
       * A `redis://` or `rediss://` URL of a single server, or
       * `redis+cluster://[user:password@]h1:p1,h2:p2` (`rediss+cluster://` for
       * TLS) naming nodes of a Redis Cluster (a user and password in it apply to
       * every node); the service creates the client and `close()` quits it.
       */
      url: string;
      /**
       * ioredis options for the client made from `url`, spread over
       * {@link URL_CLIENT_DEFAULTS} (so any default can be changed here); for a
       * cluster they configure the connection to every node, and `retryStrategy`
       * is the cluster's own reconnection. Only with `url`: a client passed in is
       * used exactly as it was configured.
       */
      clientOptions?: RedisOptions;
    };

/** Options of {@link RedisSessionService}: the connection, the key layout and core's options. */
export type RedisSessionServiceOptions = RedisConnection & RedisLayoutOptions & StateSessionServiceOptions;

/** How keys are named and kept. */
export interface RedisLayoutOptions {
  /**
   * Put in front of every key, so several apps, environments or test runs
   * share one server. Default `'adk-state:'`. Must not contain `{` or `}`.
   */
  keyPrefix?: string;
  /**
   * Idle time to live of a session and its events, in seconds: a session that
   * is neither created nor appended to for this long disappears (user and
   * app state stay). Default: none. A number greater than 0, fractions
   * allowed (kept to the millisecond), at most {@link MAX_SESSION_TTL_SECONDS}.
   * The name says the clock: every adk-state store calls an idle time to live
   * `expireAfterIdleSeconds` and one counted from creation `expireAfterCreateSeconds`.
   * Give at most one of the two.
   */
  expireAfterIdleSeconds?: number;
  /**
   * Time to live of a session and its events counted from its creation, in
   * seconds: the session disappears this long after `createSession` (or
   * `importSession`), however active it is; appends do not extend it. User
   * and app state stay. Default: none. Same bounds as
   * `expireAfterIdleSeconds`; give at most one of the two.
   */
  expireAfterCreateSeconds?: number;
  /**
   * How many hash slots the users of one app are spread over: the keys of a
   * user live under the tag `{<app>#<k>}`, k = FNV-1a(userId) mod `shards`,
   * and the app bucket under `{<app>}`. `1` puts the whole app in one slot.
   * An integer from 1 to {@link MAX_SHARDS}; default {@link DEFAULT_SHARDS}
   * with a `Cluster` client, 1 with a single-server client. Part of the key
   * layout: the first service to use a key prefix records its value there,
   * and a service with another value fails every call with
   * {@link RedisLayoutError} instead of reading other keys than the data's.
   */
  shards?: number;
  /**
   * Keep every script within one hash slot even though the client is not a
   * `Cluster`: for a server behind one address that enforces hash slots (some
   * proxies do). With `shards` > 1, `app:` keys then travel through the
   * outbox as on a Cluster. Default: true for a `Cluster` client, else false
   * (on one server every operation is one script, whatever `shards` is).
   */
  clusterProtocol?: boolean;
  /**
   * Every write waits until this many replicas have acknowledged it (Redis
   * `WAIT`, sent after the write on the same connection), for at most
   * `timeoutMs`; when fewer did, the call fails with a `BackendError` whose
   * `mayHaveApplied` is true (it was applied on the master, and a failover
   * now could lose it). Default: none (a write is acknowledged once the
   * master has it).
   */
  waitForReplicas?: ReplicaWait;
  /**
   * With the outbox protocol: the least time between two drains of an app's
   * outboxes, in milliseconds, which bounds how long an `app:` write whose
   * writer died between its two steps stays invisible (see the README).
   * Default {@link DEFAULT_DRAIN_MS}; `Infinity` for no drains (such a write
   * then waits for the next write to its shard, or a read of a session there).
   */
  drainIntervalMs?: number;
  /**
   * With the outbox protocol: how long a shard's outbox keeps the entries
   * known applied, in milliseconds, so that after a failover of the app
   * slot's master to a replica that lacked some applies they are applied
   * again. Keep it above the cluster's failover time (`cluster-node-timeout`
   * plus the election). Default {@link DEFAULT_OUTBOX_KEEP_MS}.
   */
  outboxKeepMs?: number;
  /**
   * With the outbox protocol: an `app:` write whose second step reaches the
   * app slot this long or longer after the write was made (by the servers'
   * clocks), in milliseconds, is applied as a catch-up: only to the keys whose
   * value was made before it, so that it never lands over a later value. Such
   * a second step comes from a writer that died between the steps (a drain
   * or a read applies it), from an apply held past a failover of the app
   * slot, or from a write the app slot lost before its shard was told. Keep
   * it above the time a write's two steps take (below that, a write's own
   * second step is a catch-up too, and reads that meet a write in flight
   * read again) and below the cluster's failover time, and well above how
   * far the servers' clocks differ. `Infinity`: an apply is a catch-up only
   * for the writes its shard was told were applied (after a failover).
   * Default {@link DEFAULT_CATCH_UP_AFTER_MS}.
   */
  catchUpAfterMs?: number;
  /**
   * Called when the store repairs a disagreement between an app's slots (after
   * a failover that lost writes) or a background drain fails. Default:
   * `process.emitWarning`. Never called for a failure a call reports itself.
   */
  onWarning?: (warning: RedisStoreWarning) => void;
}

/** A drop-in `sessionService` for the `@google/adk` Runner that keeps sessions in Redis. */
export class RedisSessionService extends StateSessionService {
  /** The client the service talks to (its own when it was made from `url`). */
  readonly client: Redis | Cluster;
  /**
   * How `app:` keys are written: `direct` (every operation one script: one
   * server, or an app kept in one slot) or `outbox` (a Cluster, or
   * `clusterProtocol`, with the app spread over several slots).
   */
  readonly protocol: 'direct' | 'outbox';

  constructor(options: RedisSessionServiceOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('options', 'RedisSessionService needs { client } or { url }');
    }
    const {
      client,
      url,
      clientOptions,
      keyPrefix = DEFAULT_KEY_PREFIX,
      expireAfterIdleSeconds,
      expireAfterCreateSeconds,
      shards: shardsOption,
      clusterProtocol,
      waitForReplicas,
      drainIntervalMs = DEFAULT_DRAIN_MS,
      outboxKeepMs = DEFAULT_OUTBOX_KEEP_MS,
      catchUpAfterMs = DEFAULT_CATCH_UP_AFTER_MS,
      onWarning,
      ...serviceOptions
    } = options;
    if ((client === undefined) === (url === undefined)) {
      throw new InvalidArgumentError('client', 'give exactly one of client (an ioredis Redis or Cluster) or url');
    }
    if (url !== undefined && typeof url !== 'string') throw new InvalidArgumentError('url', 'must be a string');
    if (clientOptions !== undefined) {
      if (client !== undefined) {
        throw new InvalidArgumentError(
          'clientOptions',
          'applies only to the client made from url; configure your own client yourself',
        );
      }
      if (typeof clientOptions !== 'object' || clientOptions === null || Array.isArray(clientOptions)) {
        throw new InvalidArgumentError('clientOptions', 'must be an object of ioredis options');
      }
    }
    const cluster = url === undefined ? undefined : clusterUrl(url);
    assertKeyPrefix(keyPrefix);
    const expiry = expiryOf({ expireAfterIdleSeconds, expireAfterCreateSeconds }, { max: MAX_SESSION_TTL_SECONDS });
    const isCluster = cluster !== undefined || (client as { isCluster?: boolean } | undefined)?.isCluster === true;
    const shards = shardsOption ?? defaultShards(isCluster);
    if (typeof shards !== 'number' || !Number.isInteger(shards) || shards < 1 || shards > MAX_SHARDS) {
      throw new InvalidArgumentError('shards', `must be an integer from 1 to ${MAX_SHARDS}, got ${String(shards)}`);
    }
    if (clusterProtocol !== undefined && typeof clusterProtocol !== 'boolean') {
      throw new InvalidArgumentError('clusterProtocol', `must be a boolean, got ${String(clusterProtocol)}`);
    }
    checkReplicaWait(waitForReplicas);
    if (typeof drainIntervalMs !== 'number' || Number.isNaN(drainIntervalMs) || drainIntervalMs < 0) {
      throw new InvalidArgumentError(
        'drainIntervalMs',
        `must be a number >= 0 (Infinity: never), got ${String(drainIntervalMs)}`,
      );
    }
    if (typeof outboxKeepMs !== 'number' || !Number.isFinite(outboxKeepMs) || outboxKeepMs < 0) {
      throw new InvalidArgumentError('outboxKeepMs', `must be a finite number >= 0, got ${String(outboxKeepMs)}`);
    }
    if (typeof catchUpAfterMs !== 'number' || Number.isNaN(catchUpAfterMs) || catchUpAfterMs < 0) {
      throw new InvalidArgumentError(
        'catchUpAfterMs',
        `must be a number >= 0 (Infinity: never), got ${String(catchUpAfterMs)}`,
      );
    }
    if (onWarning !== undefined && typeof onWarning !== 'function') {
      throw new InvalidArgumentError('onWarning', 'must be a function');
    }
    let made: Redis | Cluster | undefined;
    let store: RedisStore;
    let stopWatch = () => {};
    if (cluster) {
      const { retryStrategy = URL_CLIENT_DEFAULTS.retryStrategy } = clientOptions ?? {};
      made = new ClusterClass(cluster.nodes, {
        redisOptions: { ...URL_CLIENT_DEFAULTS, ...cluster.nodeOptions, ...clientOptions },
        ...(retryStrategy ? { clusterRetryStrategy: retryStrategy } : {}),
      });
    } else if (client === undefined) {
      made = new RedisClass(url as string, { ...URL_CLIENT_DEFAULTS, ...clientOptions });
    }
    // Without a listener, ioredis prints "[ioredis] Unhandled error event" for every failed attempt.
    made?.on('error', cluster ? failQueuedCommands(made as Cluster) : () => {});
    const redis = client ?? (made as Redis | Cluster);
    try {
      assertKeyPrefix(redis.options?.keyPrefix ?? '', 'client keyPrefix');
      store = new RedisStore(redis as unknown as CommandClient, {
        keyPrefix,
        ...(expiry ? { expiry: { clock: expiry.clock, ms: Math.max(1, Math.ceil(expiry.seconds * 1000)) } } : {}),
        shards,
        drainMs: drainIntervalMs,
        outboxKeepMs,
        catchUpAfterMs,
        ...(clusterProtocol === undefined ? {} : { clusterProtocol }),
        ...(waitForReplicas ? { waitForReplicas: { ...waitForReplicas } } : {}),
        ...(onWarning ? { onWarning } : {}),
        ...(made
          ? {
              ownsClient: true,
              release: () => {
                stopWatch();
                return quit(made);
              },
            }
          : {}),
      });
      super(store, serviceOptions);
    } catch (error) {
      // A refused option (here or in core) must not leave our client reconnecting in the background.
      made?.disconnect();
      throw error;
    }
    if (made) {
      // A command of our own client without a reply past every bound a call has: its connection is replaced.
      const { timeoutMs = DEFAULT_TIMEOUT_MS } = serviceOptions;
      stopWatch = watchStalls(made, Math.max(timeoutMs, waitForReplicas?.timeoutMs ?? 0) + STALL_GRACE_MS);
    }
    this.client = redis;
    this.protocol = store.protocol;
  }
}

/**
 * The error listener of a cluster made from a URL. As a single-server client
 * made from a URL never lets a command wait past one failed connection attempt
 * (`maxRetriesPerRequest: 0`), the commands a cluster holds while it has no
 * node to send them to fail once an attempt has reached none of its nodes,
 * instead of waiting for the next attempt. ioredis (5.0 to 6) reports such an
 * attempt as a `ClusterAllFailedError` and keeps those commands in a queue that
 * only `flushQueue` empties.
 */
function failQueuedCommands(cluster: Cluster): (error: Error & { lastNodeError?: Error }) => void {
  const queue = cluster as unknown as { flushQueue?: (error: Error) => void };
  return (error) => {
    if (error.name !== 'ClusterAllFailedError' || typeof queue.flushQueue !== 'function') return;
    const cause = error.lastNodeError ?? error;
    queue.flushQueue.call(cluster, new Error(`no node of the cluster answered: ${cause.message}`, { cause }));
  };
}

/** The nodes of a cluster URL, and the options every node's connection takes from it. */
interface ClusterUrl {
  nodes: { host: string; port: number }[];
  nodeOptions: RedisOptions;
}

/**
 * Reads `redis+cluster://[user:password@]h1:p1,h2:p2[/]` (`rediss+cluster://`
 * for TLS); `undefined` for any other scheme. A node without a port is on
 * 6379; an IPv6 address is in brackets. A cluster has only database 0, so
 * the URL has no path but `/` or `/0`, and no parameters. The errors never
 * show the URL's password.
 */
function clusterUrl(url: string): ClusterUrl | undefined {
  const scheme = /^(rediss?)\+cluster:\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme === undefined) return undefined;
  const match = /^[^:]+:\/\/(?:([^@/?#]*)@)?([^@/?#]*)(\/0?)?$/.exec(url);
  if (!match) {
    throw new InvalidArgumentError(
      'url',
      'a cluster URL is <scheme>://[user:password@]host:port,host:port, with no database, parameters or fragment',
    );
  }
  const [, userInfo, hosts = ''] = match;
  if (hosts === '') throw new InvalidArgumentError('url', 'a cluster URL lists its nodes as host:port,host:port');
  const nodes = hosts.split(',').map((node) => {
    const colon = node.lastIndexOf(':');
    const host = (colon === -1 || node.endsWith(']') ? node : node.slice(0, colon)).replace(/^\[|\]$/g, '');
    const port = colon === -1 || node.endsWith(']') ? 6379 : Number(node.slice(colon + 1));
    if (host === '' || !Number.isInteger(port) || port < 1 || port > 65_535) {
      throw new InvalidArgumentError('url', `cluster node "${node}" is not host:port`);
    }
    return { host, port };
  });
  const nodeOptions: RedisOptions = scheme === 'rediss' ? { tls: {} } : {};
  if (userInfo !== undefined) {
    const colon = userInfo.indexOf(':');
    const [username, password] = colon === -1 ? [userInfo] : [userInfo.slice(0, colon), userInfo.slice(colon + 1)];
    try {
      if (username !== '') nodeOptions.username = decodeURIComponent(username);
      if (password !== undefined) nodeOptions.password = decodeURIComponent(password);
    } catch {
      throw new InvalidArgumentError('url', 'the user or password of the cluster URL is not valid percent-encoding');
    }
  }
  return { nodes, nodeOptions };
}

/** Checks the `waitForReplicas` option: at least one replica, and a finite wait (WAIT 0 would wait for ever). */
function checkReplicaWait(wait: unknown): asserts wait is ReplicaWait | undefined {
  if (wait === undefined) return;
  const { replicas, timeoutMs } = (typeof wait === 'object' && wait !== null ? wait : {}) as Partial<ReplicaWait>;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 1) {
    throw new InvalidArgumentError('waitForReplicas.replicas', `must be an integer >= 1, got ${String(replicas)}`);
  }
  if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 1) {
    throw new InvalidArgumentError(
      'waitForReplicas.timeoutMs',
      `must be an integer >= 1 (milliseconds), got ${String(timeoutMs)}`,
    );
  }
}

/** How long `close()` lets QUIT take before it drops the connection. */
const QUIT_TIMEOUT_MS = 2_000;
/** How long `close()` waits for the client to end once the connection is dropped. */
const END_TIMEOUT_MS = 5_000;

/**
 * Quits a client the service made, and resolves once it has ended: QUIT when
 * the server (every node of a cluster) answers, else (down, paused, or no
 * answer within 2 s) the connections are dropped. Commands still waiting then
 * fail with "Connection is closed".
 */
async function quit(client: Redis | Cluster): Promise<void> {
  if (client.status === 'end') return;
  const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
  // A cluster ends some time after its nodes answered QUIT: wait for both.
  if (client.status === 'ready') {
    await settledWithin(QUIT_TIMEOUT_MS, Promise.all([client.quit().catch(() => {}), ended]));
  }
  const status = client.status as string;
  if (status !== 'end') {
    const connections = connectionsOf(client);
    client.disconnect();
    // A connection that went silent would not close politely: its socket goes at once.
    destroySockets(connections);
    if (status === 'reconnecting') {
      // Between two attempts there is no connection whose close would end the
      // client: one more attempt, already marked as closing, ends it (at once
      // if it fails; if it succeeds, it is dropped like any other).
      client.connect().then(
        () => client.disconnect(),
        () => {},
      );
    }
  }
  await settledWithin(END_TIMEOUT_MS, ended);
}
