/**
 * Starts the npm Firestore emulator on 127.0.0.1 from a shell, for scripts
 * that need one outside a test run (the consumer smoke test, a manual session):
 *
 *   node --import tsx test/support/cli.ts
 *
 * Prints one JSON line, `{"hostPort": "127.0.0.1:<port>"}` (the value for
 * `FIRESTORE_EMULATOR_HOST`), then serves until SIGINT or SIGTERM.
 */
import { startFirestoreEmulator } from './emulator.js';

const emulator = await startFirestoreEmulator();
process.stdout.write(`${JSON.stringify({ hostPort: emulator.hostPort })}\n`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void emulator.stop().then(() => process.exit(0));
  });
}
