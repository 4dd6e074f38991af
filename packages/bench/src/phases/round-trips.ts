/** Workload 6: round trips per operation, counted at the server or the driver, on the seeded data. */
import { countRoundTrips as countOperations } from '../workloads.js';
import type { BenchContext } from './context.js';
import { message } from './shared.js';

/** Every operation's round trips, zero for in-process targets. */
const IN_PROCESS_ROUND_TRIPS = {
  createSession: 0,
  appendEvent: 0,
  getSessionRecent: 0,
  getSessionWhole: 0,
  listSessions: 0,
};

/** Fills `roundTrips` for every opened target, or says why it has none. */
export async function countRoundTrips(context: BenchContext): Promise<void> {
  const { log, roundTrips } = context;
  for (const { spec, target } of context.opened) {
    const data = context.readData.get(spec.id);
    if (target.roundTrips === 'in-process') {
      roundTrips[spec.id] = { unit: 'in process: no round trips', operations: { ...IN_PROCESS_ROUND_TRIPS } };
    } else if (!target.roundTrips) {
      roundTrips[spec.id] = { unit: 'not counted', operations: {} };
    } else if (!data) {
      roundTrips[spec.id] = { unit: target.roundTrips.unit, operations: {}, error: 'no read data (seeding failed)' };
    } else {
      try {
        const operations = await countOperations(
          target.roundTrips,
          data,
          context.sizes,
          `bench-count-${context.runId}`,
        );
        roundTrips[spec.id] = { unit: target.roundTrips.unit, operations };
      } catch (error) {
        roundTrips[spec.id] = { unit: target.roundTrips.unit, operations: {}, error: message(error) };
        log(`  round trips of ${spec.label} failed: ${message(error)}`);
      }
    }
  }
  log('round trips counted');
}
