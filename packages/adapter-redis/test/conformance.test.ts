/** The whole adk-state conformance suite against one Redis server, zero divergences. */
import { randomUUID } from 'node:crypto';
import { runConformanceSuite } from '@adk-state/conformance-tests';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { sharedClientTarget } from './support/conformance.js';

const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;

runConformanceSuite(
  sharedClientTarget('adapter-redis (single server)', keyPrefix, () => new Redis(inject('redisUrl'))),
);
