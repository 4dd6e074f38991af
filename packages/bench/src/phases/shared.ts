/** Small helpers of the phases: interleaved repetitions, samples per key, garbage collection, error text. */
import { garbageCollector } from '../workloads.js';

/**
 * Runs a warm-up round (repetition 0) and then `repetitions` rounds; each
 * round visits every item once, starting one item later than the round
 * before, so that drift of the machine falls on all items alike.
 */
export async function interleave<T>(
  items: readonly T[],
  repetitions: number,
  sample: (item: T, repetition: number) => Promise<void>,
): Promise<void> {
  for (let repetition = 0; repetition <= repetitions; repetition++) {
    for (let offset = 0; offset < items.length; offset++) {
      await sample(items[(offset + repetition) % items.length] as T, repetition);
    }
  }
}

/** Adds `value` to the samples of `key`; returns them all. */
export function push(map: Map<string, number[]>, key: string, value: number): number[] {
  const list = map.get(key) ?? [];
  list.push(value);
  map.set(key, list);
  return list;
}

/** A full collection before a sample, when node runs with --expose-gc. */
export function collectGarbage(): void {
  garbageCollector()?.();
}

/** An error as one short line or three: its message, and its cause's. */
export function message(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
    return `${error.message}${cause}`.split('\n').slice(0, 3).join(' ');
  }
  return String(error);
}
