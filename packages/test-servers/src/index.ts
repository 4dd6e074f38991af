/**
 * `@adk-state/test-servers`: the backend servers of this repository's tests,
 * its bench and its consumer smoke test, started on loopback. The servers
 * are in `@adk-state/test-servers/redis`, `@adk-state/test-servers/firestore`
 * and `@adk-state/test-servers/postgres`, a TCP proxy in `/proxy`, a child
 * process to kill in `/child`; the root has what all use.
 */
export { run } from './exec.js';
export { accepts, freePort, freePorts, untilRefused, waitUntil } from './ports.js';
