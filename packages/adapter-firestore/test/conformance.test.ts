import { randomUUID } from 'node:crypto';
import { runConformanceSuite } from '@adk-state/conformance-tests';
import type { Firestore } from '@google-cloud/firestore';
import { inject } from 'vitest';
import { FirestoreSessionService } from '../src/index.js';
import { emulatorClient } from './support/client.js';
import { THIRD_PARTY_EMULATOR_DIVERGENCES } from './support/divergences.js';

const emulator = inject('firestoreEmulator');
/** One root per run, below a parent document, so runs against one emulator never meet. */
const rootCollection = `runs/${randomUUID()}/adk_state`;
const clients = new WeakMap<FirestoreSessionService, Firestore>();

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
    await clients.get(service)?.terminate();
  },
  capabilities: { sharedBackend: true },
  divergences: emulator.kind === 'third-party' ? THIRD_PARTY_EMULATOR_DIVERGENCES : [],
});
