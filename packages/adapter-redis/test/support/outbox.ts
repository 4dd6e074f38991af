/** Services on the outbox protocol for the tests that attack it. */
import type { Cluster, Redis } from 'ioredis';
import { RedisSessionService, type RedisSessionServiceOptions, type RedisStoreWarning } from '../../src/index.js';

/**
 * A maker of services on the outbox protocol (`clusterProtocol`, `shards`
 * slots per app) over `client`, collecting their warnings in `warnings`:
 * entries leave an outbox 2 s after they are known applied (60 s by
 * default), and no drain runs unless a test asks for one. `over` changes
 * any option of one service.
 */
export function outboxServices(options: {
  client: () => Redis | Cluster;
  keyPrefix: string;
  shards: number;
  warnings: RedisStoreWarning[];
}) {
  return (over: Partial<RedisSessionServiceOptions> & { client?: Redis } = {}) =>
    new RedisSessionService({
      client: options.client(),
      keyPrefix: options.keyPrefix,
      shards: options.shards,
      clusterProtocol: true,
      outboxKeepMs: 2_000,
      drainIntervalMs: Number.POSITIVE_INFINITY,
      onWarning: (warning) => options.warnings.push(warning),
      ...over,
    } as RedisSessionServiceOptions);
}
