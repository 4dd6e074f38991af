import { createRequire } from 'node:module';
import { expect, it } from 'vitest';
import { emulatorClient } from './support/client.js';

it('runs with the @google-cloud/firestore major the run asked for', async () => {
  const client = process.env.ADK_STATE_FIRESTORE_CLIENT;
  const wanted = client ? `@google-cloud/firestore-${client}` : '@google-cloud/firestore';
  const require = createRequire(import.meta.url);
  const copy = require(wanted) as { Firestore: new () => unknown };
  const version = (require(`${wanted}/package.json`) as { version: string }).version;
  expect(version.split('.')[0]).toBe(client ? client.slice(1) : '8');
  // What the tests import as @google-cloud/firestore is that copy.
  const imported = (await import('@google-cloud/firestore')) as unknown as { Firestore: unknown };
  expect(imported.Firestore).toBe(copy.Firestore);
  const firestore = emulatorClient();
  expect(firestore).toBeInstanceOf(copy.Firestore);
  await firestore.terminate();
});
