import { runConformanceSuite } from '@adk-state/conformance-tests';
import { MemorySessionService } from '../src/index.js';
import { MEMORY_CAPABILITIES } from './capabilities.js';

runConformanceSuite({
  name: 'adapter-memory',
  create: (options) => new MemorySessionService(options),
  capabilities: MEMORY_CAPABILITIES,
});
