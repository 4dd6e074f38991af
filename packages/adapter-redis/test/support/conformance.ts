/** A conformance target over one shared ioredis client (of any supported major version). */
import type { ConformanceTarget } from '@adk-state/conformance-tests';
import type { Cluster, Redis } from 'ioredis';
import { RedisSessionService, type RedisSessionServiceOptions } from '../../src/index.js';

/** What the target needs of a client: the service is typed against one ioredis, any major has this shape. */
interface Quittable {
  quit(): Promise<unknown>;
}

export function sharedClientTarget(
  name: string,
  keyPrefix: string,
  connect: () => Quittable,
  extra: Partial<RedisSessionServiceOptions> = {},
): ConformanceTarget<RedisSessionService> {
  let client: Quittable | undefined;
  return {
    name,
    setup: () => {
      client = connect();
    },
    teardown: async () => {
      await client?.quit();
    },
    create: (options) =>
      new RedisSessionService({ ...options, ...extra, client: client as unknown as Redis | Cluster, keyPrefix }),
    destroy: (service) => service.close(),
    capabilities: { sharedBackend: true },
  };
}
