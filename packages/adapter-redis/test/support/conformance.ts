/**
 * Conformance targets over a Redis of the target's own (see `targets.ts`):
 * services sharing one client of any supported ioredis major, or each
 * making its own client from `url`. Both declare the outage capability
 * (the server paused with SIGSTOP) unless the server comes from the environment.
 */
import type { ConformanceTarget } from '@adk-state/conformance-tests';
import { type Cluster, Redis } from 'ioredis';
import { type RedisLayoutOptions, RedisSessionService } from '../../src/index.js';
import { defaultShards } from '../../src/keys.js';
import { type RawClient, redisDamage, redisLostWrites } from './damage.js';
import type { TargetBackend } from './targets.js';

/** What the target needs of a client: the service is typed against one ioredis, any major has this shape. */
interface SharedClient {
  quit(): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** Every service uses one client made by `connect` (and never closes it); the target quits it at the end. */
export function sharedClientTarget<T>(
  name: string,
  keyPrefix: string,
  backend: TargetBackend<T>,
  connect: (started: T) => SharedClient,
  extra: RedisLayoutOptions = {},
): ConformanceTarget<RedisSessionService> {
  let client: SharedClient | undefined;
  const raw = () => client as unknown as RawClient;
  // The services' layout: the shards given, else the default of the client's kind.
  const shards = () => extra.shards ?? defaultShards((client as { isCluster?: boolean }).isCluster === true);
  return {
    name,
    setup: async () => {
      client = connect(await backend.start());
      // A client of the tests: during an outage a cluster's slot refresh fails, and that is expected.
      client.on('error', () => {});
    },
    teardown: async () => {
      try {
        await client?.quit();
      } finally {
        await backend.stop();
      }
    },
    create: (options) =>
      new RedisSessionService({ ...options, ...extra, client: client as unknown as Redis | Cluster, keyPrefix }),
    destroy: (service) => service.close(),
    capabilities: {
      sharedBackend: true,
      outage: backend.outage,
      expiry: true,
      sessionKeys: true,
      damage: redisDamage(raw, keyPrefix, shards),
      lostWrites: redisLostWrites(raw, keyPrefix, shards),
    },
  };
}

/** Every service makes its own client from the server's `url` (with the service's defaults) and quits it on close. */
export function urlTarget(
  name: string,
  keyPrefix: string,
  backend: TargetBackend<{ url: string }>,
): ConformanceTarget<RedisSessionService> {
  let url: string | undefined;
  let raw: Redis | undefined;
  // A client of the suite's own, made on first use.
  const own = () => {
    raw ??= new Redis(url as string);
    return raw;
  };
  return {
    name,
    setup: async () => {
      ({ url } = await backend.start());
    },
    teardown: async () => {
      raw?.disconnect();
      await backend.stop();
    },
    create: (options) => new RedisSessionService({ ...options, url: url as string, keyPrefix }),
    destroy: (service) => service.close(),
    capabilities: {
      sharedBackend: true,
      outage: backend.outage,
      expiry: true,
      sessionKeys: true,
      damage: redisDamage(own, keyPrefix),
      lostWrites: redisLostWrites(own, keyPrefix),
    },
  };
}
