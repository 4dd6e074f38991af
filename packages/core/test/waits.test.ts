import { afterEach, describe, expect, it, vi } from 'vitest';
import { settledWithin } from '../src/waits.js';

describe('settledWithin', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('resolves true as soon as the promise resolves, and clears its timer', async () => {
    vi.useFakeTimers();
    const waited = settledWithin(60_000, Promise.resolve('done'));
    await expect(waited).resolves.toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('resolves true when the promise rejects, without passing the rejection on', async () => {
    vi.useFakeTimers();
    await expect(settledWithin(60_000, Promise.reject(new Error('refused')))).resolves.toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('resolves false once the time runs out on a promise that never settles', async () => {
    vi.useFakeTimers();
    let answered: boolean | undefined;
    void settledWithin(5_000, new Promise(() => {})).then((value) => {
      answered = value;
    });
    await vi.advanceTimersByTimeAsync(4_999);
    expect(answered).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(answered).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('takes a bound at or below zero as no wait at all', async () => {
    vi.useFakeTimers();
    let answered: boolean | undefined;
    void settledWithin(-10, new Promise(() => {})).then((value) => {
      answered = value;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(answered).toBe(false);
  });

  it('counts a promise that settles later than the bound as not settled', async () => {
    vi.useFakeTimers();
    const slow = new Promise((resolve) => setTimeout(resolve, 2_000));
    const waited = settledWithin(1_000, slow);
    await vi.advanceTimersByTimeAsync(2_000);
    await expect(waited).resolves.toBe(false);
  });
});
