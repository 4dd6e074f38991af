/**
 * A Firestore client for the emulator of this run: dummy credentials and a
 * fixed project, so it never asks a metadata server or a token endpoint.
 */

import { emulatorSettings } from '@adk-state/test-servers/firestore/env';
import { Firestore } from '@google-cloud/firestore';
import { inject } from 'vitest';

export function emulatorClient(): Firestore {
  return new Firestore(emulatorSettings(inject('firestoreEmulator').hostPort));
}
