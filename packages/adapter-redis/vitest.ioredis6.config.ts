/**
 * The store with ioredis 6 as the `ioredis` it loads (the peer range allows
 * 5.x and 6.x): the tests and the source both import the 6.0.0 devDependency,
 * so a plain client takes the store's direct command path with 6.x's own
 * `Command` (see `directSender` in src/connection.ts).
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const ioredis6 = fileURLToPath(new URL('./node_modules/ioredis-v6/built/index.js', import.meta.url));

export default defineConfig({
  resolve: { alias: [{ find: /^ioredis$/, replacement: ioredis6 }] },
  test: {
    include: [
      'test/direct-send.test.ts',
      'test/conformance.test.ts',
      'test/outage.test.ts',
      'test/connection.test.ts',
      'test/stalls.test.ts',
    ],
    globalSetup: ['test/global-setup.ts'],
    env: { ADK_STATE_IOREDIS_MAJOR: '6' },
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
