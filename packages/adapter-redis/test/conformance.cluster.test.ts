/** The whole adk-state conformance suite against a Redis Cluster of three masters of its own, zero divergences. */
import { randomUUID } from 'node:crypto';
import { runConformanceSuite } from '@adk-state/conformance-tests';
import { Cluster } from 'ioredis';
import { describe, inject, it } from 'vitest';
import { sharedClientTarget } from './support/conformance.js';
import { clusterOfItsOwn } from './support/targets.js';

const backend = clusterOfItsOwn();
const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;

if (backend === undefined) {
  describe('adapter-redis (cluster of three masters)', () => {
    it.skip('skipped: REDIS_URL is set without REDIS_CLUSTER_NODES', () => {});
  });
} else {
  runConformanceSuite(
    sharedClientTarget(
      'adapter-redis (cluster of three masters)',
      keyPrefix,
      backend,
      ({ nodes }) => new Cluster(nodes),
    ),
  );
}
