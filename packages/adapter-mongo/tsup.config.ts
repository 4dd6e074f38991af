import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base';

// Two entries: the package root and `./seed` (bulk seeding for benchmarks and load tests).
export default defineConfig({ ...packageBuild, entry: { index: 'src/index.ts', seed: 'src/seed.ts' } });
