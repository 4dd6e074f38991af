/**
 * Starts the stand-in from a shell, for scripts that need a MongoDB outside
 * a test run (the consumer smoke test, a benchmark, a manual session):
 *
 *   node --import tsx test/standin/cli.ts [--standalone] [--port N]
 *
 * Prints one JSON line, `{"url": ..., "address": ...}`, then serves until
 * SIGINT or SIGTERM.
 */
import { startStandIn } from './index.js';

const args = process.argv.slice(2);
const portIndex = args.indexOf('--port');
const port = portIndex >= 0 ? Number(args[portIndex + 1]) : 0;
const standIn = await startStandIn({ replicaSet: args.includes('--standalone') ? false : 'rs0', port });
process.stdout.write(`${JSON.stringify({ url: standIn.url, address: standIn.address })}\n`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void standIn.stop().finally(() => process.exit(0));
  });
}
