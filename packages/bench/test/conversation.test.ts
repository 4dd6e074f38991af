/**
 * Workload 9's clock: work the event loop had waiting when a service call
 * began is run first and counted apart (`pendingMs`), not charged to the
 * store. The service here waits on a loop turn as a store waits on its round
 * trip, and each read leaves a task on the loop, as V8 leaves a scavenge
 * task the Runner's allocations asked for.
 */
import { InMemorySessionService } from '@google/adk';
import { describe, expect, it } from 'vitest';
import { runConversation } from '../src/conversation.js';

/** Milliseconds the task left on the loop keeps the thread busy. */
const LEFT_WAITING_MS = 60;

class RoundTripService extends InMemorySessionService {
  override async getSession(...args: Parameters<InMemorySessionService['getSession']>) {
    await new Promise((resolve) => setImmediate(resolve));
    const session = await super.getSession(...args);
    setImmediate(() => {
      const until = performance.now() + LEFT_WAITING_MS;
      while (performance.now() < until) {
        // the task the loop runs next
      }
    });
    return session;
  }

  override async appendEvent(...args: Parameters<InMemorySessionService['appendEvent']>) {
    await new Promise((resolve) => setImmediate(resolve));
    return super.appendEvent(...args);
  }
}

describe('the conversation workload', () => {
  it('runs the work the loop had waiting before each call, untimed, and reports it apart', async () => {
    const result = await runConversation(new RoundTripService(), 'bench-clock', 10, [10]);
    const [point] = result.points;
    expect(point?.turn).toBe(10);
    // Each turn's task ran in the turn of the loop before the Runner's first append, not inside it.
    for (const pending of point?.pendingMs?.samples ?? []) expect(pending).toBeGreaterThanOrEqual(LEFT_WAITING_MS);
    expect(point?.pendingMs?.samples).toHaveLength(5);
    expect(point?.storeMs.median).toBeLessThan(LEFT_WAITING_MS);
  });
});
