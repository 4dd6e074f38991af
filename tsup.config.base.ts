/** The one build recipe every public package uses: ESM + CommonJS + declarations. */
import type { Options } from 'tsup';

export const packageBuild: Options = {
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: false,
  clean: true,
  target: 'node20',
  treeshake: true,
};
