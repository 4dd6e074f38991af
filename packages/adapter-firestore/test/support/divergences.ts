/**
 * What the npm emulator `@firestore-emulator/server` cannot do, as recorded
 * divergences of the conformance suite. Each one is a strict expected
 * failure: the day the emulator (or the adapter) passes it, the suite fails
 * until the record is removed. Against Google's emulator there is none.
 */
import type { Divergence } from '@adk-state/conformance-tests';

const NO_ISOLATION =
  "@firestore-emulator/server runs transactions without isolation (its reads take no locks and its commits never abort), so two transactions that read the same revision both commit; Google's emulator and Firestore refuse the second";

export const THIRD_PARTY_EMULATOR_DIVERGENCES: readonly Divergence[] = [
  {
    test: 'stale writers are refused › of two concurrent appends from the same revision exactly one succeeds',
    reason: NO_ISOLATION,
  },
  {
    test: 'stale writers are refused › of ten concurrent appends from the same revision exactly one succeeds',
    reason: NO_ISOLATION,
  },
  {
    test: 'stale writers are refused › two service instances on one backend: exactly one of two concurrent appends wins',
    reason: NO_ISOLATION,
  },
];
