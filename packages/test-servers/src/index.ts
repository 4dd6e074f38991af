/**
 * `@adk-state/test-servers`: the backend servers of this repository's tests,
 * its bench and its consumer smoke test, started on loopback. The servers
 * are in `@adk-state/test-servers/redis` and `@adk-state/test-servers/firestore`,
 * a TCP proxy in `/proxy`, a child process to kill in `/child`; the root has
 * what all use.
 */
export { accepts, freePort, freePorts, untilRefused } from './ports.js';
