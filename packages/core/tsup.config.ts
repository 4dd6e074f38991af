import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base';

// Two entries: the package root (applications) and `./store` (the kit for writing a store).
export default defineConfig({ ...packageBuild, entry: { index: 'src/index.ts', store: 'src/store-kit.ts' } });
