/**
 * Starts a Firestore emulator on 127.0.0.1 from a shell, for scripts that
 * need one outside a test run (the consumer smoke test, the bench, a manual
 * session): Google's emulator when it is installed, else the npm one (see
 * `emulator.ts`).
 *
 *   pnpm --filter @adk-state/test-servers firestore
 *   node --import tsx src/firestore/cli.ts      (in packages/test-servers)
 *
 * Prints one JSON line, `{"hostPort": "127.0.0.1:<port>", "kind": ...,
 * "description": ..., "env": {...}}`: the value for
 * `FIRESTORE_EMULATOR_HOST`, which emulator runs, and the environment a
 * process that loads `@google-cloud/firestore` should run with (no
 * metadata-server probe, a fixed project, no proxy). Then serves until
 * SIGINT or SIGTERM.
 */
import { startFirestoreEmulator } from './emulator.js';
import { applyTestEnv, TEST_ENV } from './env.js';

applyTestEnv();
const emulator = await startFirestoreEmulator();
process.stdout.write(
  `${JSON.stringify({ hostPort: emulator.hostPort, kind: emulator.kind, description: emulator.description, env: TEST_ENV })}\n`,
);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void emulator.stop().finally(() => process.exit(0));
  });
}
