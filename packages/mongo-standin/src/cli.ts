/**
 * Starts the stand-in from a shell, for scripts that need a MongoDB outside
 * a test run (the consumer smoke test, a benchmark, a manual session):
 *
 *   node --import tsx src/cli.ts (pnpm --filter @adk-state/mongo-standin start) [--standalone] [--port N] [--server-version 7.0|8.0]
 *
 * `--server-version 8.0` reports MongoDB 8.0, with its multi-collection
 * `bulkWrite` command; the default is 7.0. Prints one JSON line,
 * `{"url": ..., "address": ..., "serverVersion": ...}`, then serves until
 * SIGINT or SIGTERM.
 */
import { type StandInVersion, startStandIn } from './index.js';

const args = process.argv.slice(2);
const portIndex = args.indexOf('--port');
const port = portIndex >= 0 ? Number(args[portIndex + 1]) : 0;
const versionIndex = args.indexOf('--server-version');
const serverVersion = (versionIndex >= 0 ? args[versionIndex + 1] : '7.0') as StandInVersion;
const standIn = await startStandIn({ replicaSet: args.includes('--standalone') ? false : 'rs0', port, serverVersion });
process.stdout.write(
  `${JSON.stringify({ url: standIn.url, address: standIn.address, serverVersion: standIn.serverVersion })}\n`,
);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void standIn.stop().finally(() => process.exit(0));
  });
}
