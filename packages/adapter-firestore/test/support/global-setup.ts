/**
 * Global setup of the test run: the loopback guard for the main process,
 * then the emulator. With FIRESTORE_EMULATOR_HOST set (Google's emulator,
 * started by the caller) it is used as is; otherwise the npm emulator is
 * started on 127.0.0.1 and stopped at the end.
 */
import type { TestProject } from 'vitest/node';
import { startFirestoreEmulator } from './emulator.js';
import { applyTestEnv } from './env.js';
import { installLoopbackGuard, isLoopback } from './loopback.js';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  applyTestEnv();
  const guard = installLoopbackGuard();
  const given = process.env.FIRESTORE_EMULATOR_HOST;
  let stop = async () => {};
  if (given) {
    const host = given.replace(/:\d+$/, '');
    if (!isLoopback(host)) {
      throw new Error(`FIRESTORE_EMULATOR_HOST=${given} is not on loopback; the tests only talk to 127.0.0.1 or ::1.`);
    }
    project.provide('firestoreEmulator', { hostPort: given, kind: 'google' });
  } else {
    const emulator = await startFirestoreEmulator();
    process.env.FIRESTORE_EMULATOR_HOST = emulator.hostPort;
    project.provide('firestoreEmulator', { hostPort: emulator.hostPort, kind: 'third-party' });
    stop = () => emulator.stop();
  }
  return async () => {
    await stop();
    if (guard.refused.length > 0) {
      throw new Error(`The test run tried to leave loopback: ${guard.refused.join(', ')}`);
    }
  };
}
