/**
 * A Firestore emulator on 127.0.0.1, started in a process of its own by the
 * launcher of `@adk-state/test-servers` (Google's emulator when it is
 * installed, else `@firestore-emulator/server`), and clients of it that never
 * look beyond loopback.
 */
import { createRequire } from 'node:module';
import { firestoreClientEnv } from '@adk-state/test-servers/firestore/env';
import { Firestore } from '@google-cloud/firestore';
import { startChildServer } from './child.js';
import type { BackendSpec, RunningBackend } from './types.js';

export interface FirestoreBackend extends RunningBackend {
  /** `host:port`, as FIRESTORE_EMULATOR_HOST expects it. */
  hostPort: string;
  /** A new client of the emulator. */
  client(): Firestore;
}

const SERVER = createRequire(import.meta.url).resolve('@adk-state/test-servers/firestore/cli');
const PROJECT_ID = 'adk-state-bench';

export const firestoreBackend: BackendSpec<FirestoreBackend> = {
  id: 'firestore',
  label: 'Firestore emulator',
  async start() {
    // No metadata-server detection, no proxy, no tracing: the client talks to the emulator only.
    Object.assign(process.env, firestoreClientEnv(PROJECT_ID));
    // Google's emulator is a JVM: its start may take a while on a loaded machine.
    const server = await startChildServer(SERVER, [], 120_000);
    const hostPort = String(server.info.hostPort);
    const description = String(server.info.description);
    process.stderr.write(`Firestore rows run on ${description}\n`);
    const client = () =>
      new Firestore({
        projectId: PROJECT_ID,
        host: hostPort,
        ssl: false,
        credentials: { client_email: 'bench@example.com', private_key: 'unused' },
      });
    const probeClient = client();
    const missing = probeClient.doc('bench/raw-round-trip');
    try {
      await missing.get();
      return {
        hostPort,
        client,
        details: `${
          server.info.kind === 'google' ? "Google's Cloud Firestore emulator" : '@firestore-emulator/server'
        } (started by a process of its own, on 127.0.0.1), @google-cloud/firestore client`,
        probes: [{ name: 'get (no document)', run: () => missing.get() }],
        async stop() {
          await probeClient.terminate().catch(() => undefined);
          await server.stop();
        },
      };
    } catch (error) {
      await probeClient.terminate().catch(() => undefined);
      await server.stop();
      throw error;
    }
  },
};
