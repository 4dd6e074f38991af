import { defineConfig } from 'tsup';
import { packageBuild } from '../../tsup.config.base';

export default defineConfig({ ...packageBuild, external: ['vitest', '@google/adk', '@adk-state/core'] });
