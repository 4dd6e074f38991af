/**
 * Runs the Firestore adapter's emulator (`@firestore-emulator/server`, bound
 * to 127.0.0.1) in a process of its own: prints `{"hostPort": ...}` when it
 * is ready and serves until SIGTERM or SIGINT.
 */
import { startFirestoreEmulator } from '../../../adapter-firestore/test/support/emulator.js';

const emulator = await startFirestoreEmulator();
process.stdout.write(`${JSON.stringify({ hostPort: emulator.hostPort })}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void emulator.stop().then(() => process.exit(0));
  });
}
