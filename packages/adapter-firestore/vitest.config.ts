import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { defineConfig } from 'vitest/config';
import { TEST_ENV } from './test/support/env.js';

/**
 * `ADK_STATE_FIRESTORE_CLIENT=v7` runs the tests with the lowest client major
 * this package supports (`@google-cloud/firestore` 7.0.0) instead of the
 * default 8.x dev copy.
 */
function clientAlias(): Record<string, string> {
  if (process.env.ADK_STATE_FIRESTORE_CLIENT !== 'v7') return {};
  const require = createRequire(import.meta.url);
  return { '@google-cloud/firestore': dirname(require.resolve('@google-cloud/firestore-v7/package.json')) };
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
