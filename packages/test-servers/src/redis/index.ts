/**
 * `@adk-state/test-servers/redis`: real `redis-server` processes on loopback
 * (one server, or a cluster of masters with replicas if asked), free ports,
 * and round trips counted by the server itself.
 */
export { accepts, freePort, freePorts, untilRefused } from '../ports.js';
export * from './cluster.js';
export * from './round-trips.js';
export * from './server.js';
