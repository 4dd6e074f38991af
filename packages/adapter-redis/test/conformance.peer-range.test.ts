/**
 * The conformance suite with the lowest and the highest ioredis the peer range
 * `^5.0.0 || ^6.0.0` claims: 5.0.0, and 6.0.0 (which speaks RESP3 by default),
 * each as one client shared by the services, on a server of its own.
 */
import { randomUUID } from 'node:crypto';
import { runConformanceSuite } from '@adk-state/conformance-tests';
import * as ioredis50 from 'ioredis-v5-0';
import { Redis as Redis6 } from 'ioredis-v6';
import { inject } from 'vitest';
import { sharedClientTarget } from './support/conformance.js';
import { singleServerOfItsOwn } from './support/targets.js';

const prefix = () => `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;
// 5.0.0 has no named `Redis` export; its default export is the class.
const Redis50 = (ioredis50 as unknown as { default: typeof Redis6 }).default;

runConformanceSuite(
  sharedClientTarget(
    'adapter-redis (ioredis 5.0.0 client)',
    prefix(),
    singleServerOfItsOwn(),
    ({ url }) => new Redis50(url),
  ),
);
runConformanceSuite(
  sharedClientTarget(
    'adapter-redis (ioredis 6 client, RESP3)',
    prefix(),
    singleServerOfItsOwn(),
    ({ url }) => new Redis6(url, { protocol: 3 }),
  ),
);
