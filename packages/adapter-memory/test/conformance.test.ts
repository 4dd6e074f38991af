import { runConformanceSuite } from '@adk-state/conformance-tests';
import { MemorySessionService } from '../src/index.js';

runConformanceSuite({
  name: 'adapter-memory',
  create: (options) => new MemorySessionService(options),
  capabilities: { sharedBackend: false },
});
