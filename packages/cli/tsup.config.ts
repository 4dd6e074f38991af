import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base';

export default defineConfig([
  // `import.meta.url` in the CommonJS build too (the SQLite check finds ADK's driver from this package).
  { ...packageBuild, shims: true },
  // The executable: ESM only, no declarations, keeps its shebang.
  { ...packageBuild, entry: ['src/cli.ts'], format: ['esm'], dts: false, clean: false },
]);
