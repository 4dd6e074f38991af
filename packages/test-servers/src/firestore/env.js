/**
 * The environment of every process that loads `@google-cloud/firestore`
 * against an emulator here, set before the client is loaded: no
 * metadata-server detection, a fixed project, no tracing and no proxy, so
 * the client has no reason to reach beyond the emulator on loopback.
 *
 * Plain JavaScript (its types are in `env.d.ts`): a vitest config imports it,
 * and vitest loads its config's imports with Node itself, which runs no
 * TypeScript on Node 20.
 */

/** The project of the tests' clients. */
export const TEST_PROJECT_ID = 'adk-state-test';

/** The environment for clients of the emulator in project `projectId`. */
export function firestoreClientEnv(projectId) {
  return {
    METADATA_SERVER_DETECTION: 'none',
    GOOGLE_CLOUD_PROJECT: projectId,
    GCLOUD_PROJECT: projectId,
    FIRESTORE_ENABLE_TRACING: 'off',
    grpc_proxy: '',
    https_proxy: '',
    http_proxy: '',
    HTTPS_PROXY: '',
    HTTP_PROXY: '',
    no_grpc_proxy: '127.0.0.1,localhost,::1',
  };
}

/** {@link firestoreClientEnv} for {@link TEST_PROJECT_ID}. */
export const TEST_ENV = Object.freeze(firestoreClientEnv(TEST_PROJECT_ID));

/** Sets `env` (default {@link TEST_ENV}) on this process, for itself and the processes it starts. */
export function applyTestEnv(env = TEST_ENV) {
  for (const [name, value] of Object.entries(env)) process.env[name] = value;
}

/** The settings of a client of the emulator at `hostPort` (`new Firestore(emulatorSettings(...))`): the tests' project, no TLS, dummy credentials. */
export function emulatorSettings(hostPort) {
  return {
    projectId: TEST_PROJECT_ID,
    host: hostPort,
    ssl: false,
    credentials: { client_email: 'test@example.com', private_key: 'dummy' },
  };
}
