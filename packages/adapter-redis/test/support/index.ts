/**
 * Test support for the Redis adapter: its test event, timed failures and
 * conformance targets, with the servers (real ones on loopback) and the
 * round-trip counting of `@adk-state/test-servers/redis`.
 */
export * from '@adk-state/test-servers/redis';
export * from './events.js';
export * from './outbox.js';
export * from './proxy.js';
export * from './settle.js';
export * from './targets.js';
