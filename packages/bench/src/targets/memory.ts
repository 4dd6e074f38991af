/** The embedded default store of adk-state: `@adk-state/adapter-memory`. */
import { MemorySessionService } from '@adk-state/adapter-memory';
import { defineTarget, IN_PROCESS } from './types.js';

export const memoryStore = defineTarget({
  id: 'memory',
  label: 'adk-state memory',
  kind: 'store',
  backend: IN_PROCESS,
  async open() {
    return {
      service: new MemorySessionService(),
      fresh: () => new MemorySessionService(),
      roundTrips: 'in-process' as const,
      async close() {},
    };
  },
});
