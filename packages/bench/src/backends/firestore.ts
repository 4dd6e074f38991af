/**
 * The Firestore emulator of `@adk-state/adapter-firestore` on 127.0.0.1,
 * started by a child process (Google's emulator when it is installed, else
 * `@firestore-emulator/server`), and clients of it that never look beyond
 * loopback.
 */
import { fileURLToPath } from 'node:url';
import { Firestore } from '@google-cloud/firestore';
import type { BackendSpec, RunningBackend } from '../targets/types.js';
import { startChildServer } from './child.js';

export interface FirestoreBackend extends RunningBackend {
  /** `host:port`, as FIRESTORE_EMULATOR_HOST expects it. */
  hostPort: string;
  /** A new client of the emulator. */
  client(): Firestore;
}

const SERVER = fileURLToPath(new URL('../servers/firestore-emulator.ts', import.meta.url));
const PROJECT_ID = 'adk-state-bench';

const CLIENT_ENV: Record<string, string> = {
  METADATA_SERVER_DETECTION: 'none',
  GOOGLE_CLOUD_PROJECT: PROJECT_ID,
  GCLOUD_PROJECT: PROJECT_ID,
  FIRESTORE_ENABLE_TRACING: 'off',
  no_grpc_proxy: '127.0.0.1,localhost,::1',
};

export const firestoreBackend: BackendSpec<FirestoreBackend> = {
  id: 'firestore',
  label: 'Firestore emulator',
  async start() {
    // No metadata-server detection, no proxy, no tracing: the client talks to the emulator only.
    Object.assign(process.env, CLIENT_ENV);
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
