/**
 * Global setup of the test run: the loopback guard for the main process,
 * then one emulator for the whole run, shared by every test file. With
 * FIRESTORE_EMULATOR_HOST set (an emulator started by the caller, on
 * loopback) it is used as is; otherwise Google's emulator is started on
 * 127.0.0.1 when it is installed, else the npm one (see
 * `@adk-state/test-servers/firestore`), and stopped at the end. The run
 * prints which emulator it uses.
 */
import { type EmulatorInfo, startFirestoreEmulator } from '@adk-state/test-servers/firestore';
import { applyTestEnv } from '@adk-state/test-servers/firestore/env';
import type { TestProject } from 'vitest/node';
import { installLoopbackGuard, isLoopback } from './loopback.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Which emulator the run uses: Google's or the npm one. */
    firestoreEmulator: EmulatorInfo;
  }
}

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
    // The caller's emulator: taken to be Google's unless ADK_STATE_FIRESTORE_EMULATOR=npm says otherwise.
    const kind = process.env.ADK_STATE_FIRESTORE_EMULATOR === 'npm' ? 'third-party' : 'google';
    const description = `the emulator given by FIRESTORE_EMULATOR_HOST=${given} (taken as ${kind === 'google' ? "Google's" : 'the npm one'})`;
    project.provide('firestoreEmulator', { hostPort: given, kind, description });
    process.stdout.write(`Firestore tests run on ${description}\n`);
  } else {
    const emulator = await startFirestoreEmulator();
    process.env.FIRESTORE_EMULATOR_HOST = emulator.hostPort;
    project.provide('firestoreEmulator', {
      hostPort: emulator.hostPort,
      kind: emulator.kind,
      description: emulator.description,
      ...(emulator.processGroup === undefined ? {} : { processGroup: emulator.processGroup }),
    });
    process.stdout.write(`Firestore tests run on ${emulator.description}\n`);
    stop = () => emulator.stop();
  }
  return async () => {
    await stop();
    if (guard.refused.length > 0) {
      throw new Error(`The test run tried to leave loopback: ${guard.refused.join(', ')}`);
    }
  };
}
