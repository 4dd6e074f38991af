/**
 * `@adk-state/test-servers/firestore`: a Firestore emulator on loopback
 * (Google's when it is installed, else the npm one) and the environment a
 * client of it runs with.
 */
export * from './emulator.js';
export * from './env.js';
