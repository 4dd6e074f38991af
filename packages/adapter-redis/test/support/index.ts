/**
 * Test and benchmark support for the Redis adapter: real servers started on
 * loopback, and round trips counted by the server.
 */
export * from './events.js';
export * from './redis-server.js';
export * from './round-trips.js';
export * from './settle.js';
export * from './targets.js';
