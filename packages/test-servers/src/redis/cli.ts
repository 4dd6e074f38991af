/**
 * Starts a redis-server on 127.0.0.1 from a shell, for scripts that need one
 * outside a test run (the consumer smoke test, a manual session):
 *
 *   pnpm --filter @adk-state/test-servers redis
 *   node --import tsx src/redis/cli.ts          (in packages/test-servers)
 *
 * Prints one JSON line, `{"url": "redis://127.0.0.1:<port>"}`, then serves
 * until SIGINT or SIGTERM, and stops the server (no persistence) on the way out.
 */
import { startRedisServer } from './server.js';

const server = await startRedisServer();
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void server.stop().finally(() => process.exit(0));
  });
}
