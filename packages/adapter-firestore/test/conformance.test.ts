import { randomUUID } from 'node:crypto';
import { type Capabilities, runConformanceSuite } from '@adk-state/conformance-tests';
import { signalGroup, waitUntilAnswering } from '@adk-state/test-servers/firestore';
import type { Firestore } from '@google-cloud/firestore';
import { afterAll, inject } from 'vitest';
import { FirestoreSessionService } from '../src/index.js';
import { emulatorClient } from './support/client.js';
import { firestoreDamage } from './support/damage.js';
import { THIRD_PARTY_EMULATOR_DIVERGENCES } from './support/divergences.js';

const emulator = inject('firestoreEmulator');
/** One root per run, below a parent document, so runs against one emulator never meet. */
const rootCollection = `runs/${randomUUID()}/adk_state`;
const clients = new WeakMap<FirestoreSessionService, Firestore>();

/**
 * Outages: Google's emulator started by this run is paused with SIGSTOP (the
 * launcher and its java process, one process group) and resumed with
 * SIGCONT, keeping its data. The npm emulator runs inside the main test
 * process and an emulator given by FIRESTORE_EMULATOR_HOST is not ours to
 * pause.
 */
function outage(): Capabilities['outage'] {
  const group = emulator.processGroup;
  if (emulator.kind !== 'google') {
    return { absent: '@firestore-emulator/server runs inside the test run’s main process: it cannot be paused apart' };
  }
  if (group === undefined)
    return { absent: 'the emulator was started outside this test run (FIRESTORE_EMULATOR_HOST)' };
  return {
    stop() {
      if (!signalGroup(group, 'SIGSTOP')) throw new Error(`could not pause the emulator (process group ${group})`);
    },
    async start() {
      signalGroup(group, 'SIGCONT');
      await waitUntilAnswering(emulator.hostPort);
    },
  };
}

/** The damage control's own client, made on first use. */
let raw: Firestore | undefined;
function rawClient(): Firestore {
  raw ??= emulatorClient();
  return raw;
}

// Whatever happens in a test, the emulator runs again for the next file.
afterAll(async () => {
  if (emulator.processGroup !== undefined) signalGroup(emulator.processGroup, 'SIGCONT');
  await raw?.terminate();
});

runConformanceSuite({
  name: `adapter-firestore on ${emulator.kind === 'google' ? "Google's emulator" : 'the @firestore-emulator/server emulator'}`,
  create(options) {
    // A client of its own per service, as two processes would have.
    const firestore = emulatorClient();
    const service = new FirestoreSessionService({ firestore, rootCollection, ...options });
    clients.set(service, firestore);
    return service;
  },
  async destroy(service) {
    // In the documented order: the service waits for its calls still running in the client.
    await service.close();
    await clients.get(service)?.terminate();
  },
  capabilities: {
    sharedBackend: true,
    outage: outage(),
    expiry: {
      absent: 'Firestore removes expired documents by its TTL policy, within about a day (the emulator never)',
    },
    damage: firestoreDamage(rawClient, rootCollection),
    lostWrites: { absent: 'Firestore acknowledges a write once it is replicated: none is lost' },
    sessionKeys: true,
  },
  divergences: emulator.kind === 'third-party' ? THIRD_PARTY_EMULATOR_DIVERGENCES : [],
});
