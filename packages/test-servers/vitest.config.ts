import { defineConfig } from 'vitest/config';
import { TEST_ENV } from './src/firestore/env.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // What every process that loads @google-cloud/firestore needs: no metadata-server probe, a fixed project.
    env: { ...TEST_ENV },
    // Google's emulator is a JVM: its start may take a while on a loaded machine.
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
