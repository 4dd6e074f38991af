/**
 * Runs the Firestore adapter's emulator in a process of its own, bound to
 * 127.0.0.1: Google's emulator when it is installed (the apt package
 * `google-cloud-cli-firestore-emulator`), else the npm emulator
 * `@firestore-emulator/server`. Prints `{"hostPort", "kind", "description"}`
 * when it is ready and serves until SIGTERM or SIGINT.
 */
import { startFirestoreEmulator } from '../../../adapter-firestore/test/support/emulator.js';

const emulator = await startFirestoreEmulator();
process.stdout.write(
  `${JSON.stringify({ hostPort: emulator.hostPort, kind: emulator.kind, description: emulator.description })}\n`,
);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void emulator.stop().then(() => process.exit(0));
  });
}
