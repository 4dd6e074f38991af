import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { TEST_ENV } from '@adk-state/test-servers/firestore/env';
import { defineConfig } from 'vitest/config';

/**
 * `ADK_STATE_FIRESTORE_CLIENT=v7` runs the tests with the lowest client this
 * package supports (`@google-cloud/firestore` 7.0.0), `v9` with the highest
 * (9.x, which needs Node 22 or later), instead of the default 8.x dev copy.
 */
function clientAlias(): Record<string, string> {
  const client = process.env.ADK_STATE_FIRESTORE_CLIENT;
  if (client === undefined || client === '') return {};
  if (client !== 'v7' && client !== 'v9') throw new Error(`ADK_STATE_FIRESTORE_CLIENT must be v7 or v9, not ${client}`);
  const require = createRequire(import.meta.url);
  return { '@google-cloud/firestore': dirname(require.resolve(`@google-cloud/firestore-${client}/package.json`)) };
}

export default defineConfig({
  resolve: { alias: clientAlias() },
  test: {
    include: ['test/**/*.test.ts'],
    env: { ...TEST_ENV },
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
