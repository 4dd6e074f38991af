/** What `close()` waits for: the store's calls still running, for at most its bound. */
import { describe, expect, it } from 'vitest';
import { InFlight } from '../src/calls.js';

const later = (ms: number, fail = false) =>
  new Promise<void>((resolve, reject) => setTimeout(() => (fail ? reject(new Error('late')) : resolve()), ms));

describe('InFlight', () => {
  it('settles at once when nothing runs, whatever the bound', async () => {
    const started = performance.now();
    await expect(new InFlight().settle(10_000)).resolves.toBe(0);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('waits for every call held, failed ones included, and for calls added while it waits', async () => {
    const running = new InFlight();
    const failing = running.track(later(20, true));
    failing.catch(() => {});
    running.track(later(40));
    const settled = running.settle(5_000);
    // Added after the wait began, ending after everything it began with.
    await later(30);
    running.track(later(60));
    const started = performance.now();
    await expect(settled).resolves.toBe(0);
    expect(performance.now() - started).toBeGreaterThanOrEqual(50);
  });

  it('gives up at the bound and says how many calls still run', async () => {
    const running = new InFlight();
    running.track(new Promise(() => {}));
    running.track(later(10));
    const started = performance.now();
    await expect(running.settle(150)).resolves.toBe(1);
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(waited).toBeLessThan(5_000);
  });

  it('with a bound of 0 does not wait', async () => {
    const running = new InFlight();
    running.track(later(1_000));
    await expect(running.settle(0)).resolves.toBe(1);
  });

  it('hands back the promise it holds, its rejection untouched', async () => {
    const error = new Error('refused');
    await expect(new InFlight().track(Promise.reject(error))).rejects.toBe(error);
  });
});
