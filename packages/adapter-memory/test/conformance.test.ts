import { runConformanceSuite } from '@adk-state/conformance-tests';
import { MemorySessionService } from '../src/index.js';

runConformanceSuite({
  name: 'adapter-memory',
  create: (options) => new MemorySessionService(options),
  capabilities: {
    sharedBackend: false,
    outage: { absent: 'an in-process store has no backend to take away' },
    damage: { absent: 'an in-process store keeps no record outside the service to damage' },
    sessionKeys: true,
  },
});
