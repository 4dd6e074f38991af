/** What the memory store declares to the conformance suite (its own suite and the fixtures). */
import type { Capabilities } from '@adk-state/conformance-tests';

export const MEMORY_CAPABILITIES: Capabilities = {
  sharedBackend: false,
  outage: { absent: 'an in-process store has no backend to take away' },
  damage: { absent: 'an in-process store keeps no record outside the service to damage' },
  lostWrites: { absent: 'an in-process store has no replica and no snapshot to come back from' },
  sessionKeys: true,
};
