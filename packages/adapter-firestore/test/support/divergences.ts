/**
 * What the npm emulator `@firestore-emulator/server` cannot do, as recorded
 * divergences of the conformance suite. A plain record is a strict expected
 * failure: the day the emulator (or the adapter) passes it, the suite fails
 * until the record is removed. An intermittent record is a test the emulator
 * fails only now and then (a race it loses): it runs, and a failure is
 * reported as skipped with its reason. Against Google's emulator there is none.
 */
import type { Divergence } from '@adk-state/conformance-tests';

const NO_ISOLATION =
  "@firestore-emulator/server runs transactions without isolation (its reads take no locks and its commits never abort), so two transactions that read the same revision both commit; Google's emulator and Firestore refuse the second";

const NO_READ_TIME =
  "@firestore-emulator/server ignores read times, so a read of several documents can show a write that came after its moment; the store then reads again, and while another instance's appends never pause it can run out of attempts (ConsistentReadContention, a BackendError); Google's emulator and Firestore read at the moment asked";

const UTF16_ORDER =
  '@firestore-emulator/server orders strings by UTF-16 code units, not by UTF-8 bytes as Firestore does, so ids from U+E000 to U+FFFF sort after ids beyond U+FFFF on ties in its queries';

const WHOLE_READS_DURING_APPENDS =
  'a session read again shows every change, whatever the service keeps of earlier reads › whole reads while another instance appends each show a state that matches their events, and end where a plain read ends';

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
  {
    test: 'hostile ids and keys never collide › sessions updated at one instant list in UTF-16 id order across small pages, in both orders',
    reason: UTF16_ORDER,
  },
  {
    test: 'stored data outlives the service instance › reads through another instance never show part of an append while appends run',
    reason: NO_READ_TIME,
  },
  {
    test: 'an id deleted and created again is a new session, and every instance sees it so › ids deleted and created again over and over by one instance while another appends to other sessions: every read succeeds, and each app: key holds its last acknowledged write',
    reason: `${NO_READ_TIME} (a read takes the app document too, which every one of those appends writes)`,
    intermittent: true,
  },
  {
    test: "stale writers are refused › two service instances with onStale: 'reload' lose, duplicate and reorder nothing",
    reason: `${NO_READ_TIME} (each reload is such a read, while the other instance keeps appending)`,
    intermittent: true,
  },
  { test: WHOLE_READS_DURING_APPENDS, reason: NO_READ_TIME, intermittent: true },
  { test: `${WHOLE_READS_DURING_APPENDS} (a reader sharing frozen events)`, reason: NO_READ_TIME, intermittent: true },
];
