/**
 * How a store gives its warnings: never from a callback that throws into
 * the call that noticed, and not on every call of a burst. After a failover
 * that lost writes a read can meet the same disagreement (and fail to
 * repair it, on a node demoted to a replica) on every call, and a drain
 * that cannot reach a node fails every few seconds.
 */
import type { RedisStoreWarning } from './outbox.js';

/** How long a store holds back a warning like one it just gave (same code, app and shard), in milliseconds. */
export const WARNING_QUIET_MS = 10_000;

/** How many (code, app, shard) a store remembers the last warning of. */
const REMEMBERED = 1_000;

/**
 * `warn`, called at most once per {@link WARNING_QUIET_MS} for each code,
 * app and shard; the first warning after such a spell says how many like it
 * were held back (`held`, and at the end of its message). A `warn` that
 * throws is ignored.
 */
export function quietWarnings(
  warn: (warning: RedisStoreWarning) => void,
  now: () => number = Date.now,
): (warning: RedisStoreWarning) => void {
  const last = new Map<string, { at: number; held: number }>();
  return (warning) => {
    const id = `${warning.code}\0${warning.shard ?? ''}\0${warning.appName}`;
    const at = now();
    const seen = last.get(id);
    if (seen !== undefined && at - seen.at < WARNING_QUIET_MS) {
      seen.held++;
      return;
    }
    if (seen !== undefined) last.delete(id);
    else if (last.size >= REMEMBERED) last.delete(last.keys().next().value as string);
    last.set(id, { at, held: 0 });
    const given =
      seen === undefined || seen.held === 0
        ? warning
        : {
            ...warning,
            held: seen.held,
            message: `${warning.message} (${seen.held} more like it since ${new Date(seen.at).toISOString()} were held back)`,
          };
    try {
      warn(given);
    } catch {
      // A throwing callback must not break the call that noticed.
    }
  };
}
