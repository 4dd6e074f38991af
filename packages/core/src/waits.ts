/**
 * A bounded wait, for a store's `close()`: how long it lets work of its own
 * finish before it gives up on it.
 */

/**
 * Waits for `promise` to settle, but no longer than `ms` milliseconds.
 * Resolves `true` when it settled in time (a rejection counts: it is not
 * passed on) and `false` when the time ran out. Never rejects; the timer is
 * cleared as soon as the wait ends, so it keeps the process alive no longer
 * than the wait itself.
 */
export async function settledWithin(ms: number, promise: Promise<unknown>): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, ms), false);
  });
  try {
    return await Promise.race([promise.then(settled, settled), late]);
  } finally {
    clearTimeout(timer);
  }
}

const settled = (): true => true;
