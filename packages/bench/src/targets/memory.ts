/** The embedded default store of adk-state: `@adk-state/adapter-memory`. */
import { MemorySessionService } from '@adk-state/adapter-memory';
import { IN_PROCESS } from '../backends/types.js';
import { defineTarget } from './types.js';

export const memoryStore = defineTarget({
  id: 'memory',
  label: 'adk-state memory',
  kind: 'store',
  backend: IN_PROCESS,
  async open() {
    return {
      service: new MemorySessionService(),
      sharingReads: new MemorySessionService({ shareReadEvents: true }),
      fresh: () => new MemorySessionService(),
      roundTrips: 'in-process' as const,
      async close() {},
    };
  },
});
