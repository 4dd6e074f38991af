/**
 * Runs in every test process before any test file (and so before
 * `@google-cloud/firestore` is loaded): the test environment, the emulator
 * address, and the loopback guard, whose record must stay empty.
 */

import { applyTestEnv } from '@adk-state/test-servers/firestore/env';
import { afterAll, expect, inject } from 'vitest';
import { guardRecord, installLoopbackGuard } from './loopback.js';

applyTestEnv();
process.env.FIRESTORE_EMULATOR_HOST = inject('firestoreEmulator').hostPort;
installLoopbackGuard();

afterAll(() => {
  expect(guardRecord().refused, 'connections or lookups outside loopback').toEqual([]);
});
