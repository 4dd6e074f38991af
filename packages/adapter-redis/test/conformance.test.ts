/**
 * The whole adk-state conformance suite against Redis servers of their own,
 * outages included, zero divergences: once with services that each make their
 * own client from `url` (the service's client defaults), once with services
 * sharing one ioredis client they were given.
 */
import { randomUUID } from 'node:crypto';
import { runConformanceSuite } from '@adk-state/conformance-tests';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { sharedClientTarget, urlTarget } from './support/conformance.js';
import { singleServerOfItsOwn } from './support/targets.js';

const prefix = () => `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;

runConformanceSuite(urlTarget('adapter-redis (single server, client from url)', prefix(), singleServerOfItsOwn()));
runConformanceSuite(
  sharedClientTarget(
    'adapter-redis (single server, client given)',
    prefix(),
    singleServerOfItsOwn(),
    ({ url }) => new Redis(url),
  ),
);
