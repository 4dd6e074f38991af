import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base';

export default defineConfig([
  packageBuild,
  // The executable: ESM only, no declarations, keeps its shebang.
  { ...packageBuild, entry: ['src/cli.ts'], format: ['esm'], dts: false, clean: false },
]);
