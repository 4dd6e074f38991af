/** Types of `env.js` (see there). */

/** The project of the tests' clients. */
export declare const TEST_PROJECT_ID: 'adk-state-test';

/** The environment for clients of the emulator in project `projectId`. */
export declare function firestoreClientEnv(projectId: string): Record<string, string>;

/** {@link firestoreClientEnv} for {@link TEST_PROJECT_ID}. */
export declare const TEST_ENV: Readonly<Record<string, string>>;

/** Sets `env` (default {@link TEST_ENV}) on this process, for itself and the processes it starts. */
export declare function applyTestEnv(env?: Readonly<Record<string, string>>): void;

/** The settings of a client of the emulator at `hostPort` (`new Firestore(emulatorSettings(...))`): the tests' project, no TLS, dummy credentials. */
export declare function emulatorSettings(hostPort: string): {
  projectId: typeof TEST_PROJECT_ID;
  host: string;
  ssl: false;
  credentials: { client_email: string; private_key: string };
};
