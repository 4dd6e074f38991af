/**
 * The environment every test process of this package runs with, set before
 * `@google-cloud/firestore` is loaded: no metadata-server detection, a fixed
 * project, and no proxy, so the client has no reason to reach beyond the
 * emulator on loopback.
 */
export const TEST_PROJECT_ID = 'adk-state-test';

export const TEST_ENV: Readonly<Record<string, string>> = {
  METADATA_SERVER_DETECTION: 'none',
  GOOGLE_CLOUD_PROJECT: TEST_PROJECT_ID,
  GCLOUD_PROJECT: TEST_PROJECT_ID,
  FIRESTORE_ENABLE_TRACING: 'off',
  grpc_proxy: '',
  https_proxy: '',
  http_proxy: '',
  HTTPS_PROXY: '',
  HTTP_PROXY: '',
  no_grpc_proxy: '127.0.0.1,localhost,::1',
};

export function applyTestEnv(): void {
  for (const [name, value] of Object.entries(TEST_ENV)) process.env[name] = value;
}

/** Which emulator the run uses: Google's or the npm one (see `emulator.ts`). */
export interface EmulatorInfo {
  hostPort: string;
  kind: 'google' | 'third-party';
  /** In words, for titles and logs. */
  description: string;
  /** The process group of Google's emulator when this run started it (to pause and resume it). */
  processGroup?: number;
}

declare module 'vitest' {
  export interface ProvidedContext {
    firestoreEmulator: EmulatorInfo;
  }
}
