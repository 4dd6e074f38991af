/**
 * A store runs inside someone's server: an unhandled rejection or an uncaught
 * exception there can end the process. The suite listens for both while it
 * runs and fails the test during which one happened.
 */
import { setImmediate as nextMacrotask } from 'node:timers/promises';

export interface FaultWatch {
  /** How many faults have been seen so far. */
  count(): number;
  /** Throws if a fault happened after the `seen`-th (after letting pending callbacks run). */
  expectNoneSince(seen: number, test: string): Promise<void>;
  /** Stops listening. */
  close(): void;
}

export function watchProcessFaults(): FaultWatch {
  const faults: string[] = [];
  const onRejection = (reason: unknown) => faults.push(`unhandled rejection: ${describe(reason)}`);
  const onException = (error: unknown) => faults.push(`uncaught exception: ${describe(error)}`);
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return {
    count: () => faults.length,
    async expectNoneSince(seen, test) {
      // Node reports an unhandled rejection after the microtask queue drains: give it two turns.
      await nextMacrotask();
      await nextMacrotask();
      if (faults.length > seen) {
        throw new Error(`${test}: the store left ${faults.slice(seen).join('; ')}`);
      }
    },
    close() {
      process.off('unhandledRejection', onRejection);
      process.off('uncaughtException', onException);
    },
  };
}

function describe(value: unknown): string {
  return value instanceof Error ? `${value.name}: ${value.message}` : String(value);
}
