/**
 * Smoke test of the bench: its workload functions and a whole run at tiny
 * sizes on the in-process targets. Nothing here is timed: it checks that
 * every figure comes out as a number and that the reports render.
 */
import { MemorySessionService } from '@adk-state/adapter-memory';
import { describe, expect, it } from 'vitest';
import { defaultOptions } from '../src/options.js';
import { renderChart } from '../src/report/chart.js';
import { renderMarkdown } from '../src/report/markdown.js';
import { renderTable } from '../src/report/table.js';
import { runBench } from '../src/run.js';
import { summarize } from '../src/stats.js';
import { adkInMemory } from '../src/targets/adk.js';
import { memoryStore } from '../src/targets/memory.js';
import {
  appendConcurrent,
  appendSequential,
  heapPerEvent,
  listPage,
  readRecent,
  readWhole,
  seedReads,
  timeRead,
  warmUp,
} from '../src/workloads.js';

const tiny = {
  smallHistory: 5,
  largeHistory: 40,
  wholeHistory: 20,
  listSessions: 30,
  listUsers: 3,
};

function expectPositiveNumber(value: unknown): void {
  expect(typeof value).toBe('number');
  expect(Number.isFinite(value)).toBe(true);
  expect(value as number).toBeGreaterThan(0);
}

describe('workloads on the memory store', () => {
  it('appends one session after the other and many at once', async () => {
    const service = new MemorySessionService();
    const one = await appendSequential(service, { appName: 'seq', events: 25, maxMs: 10_000 });
    expect(one.events).toBe(25);
    expectPositiveNumber(one.eventsPerSecond);
    const many = await appendConcurrent(service, { appName: 'conc', events: 25, sessions: 4, maxMs: 10_000 });
    expect(many.events).toBe(25);
    expectPositiveNumber(many.eventsPerSecond);
  });

  it('warms up on sessions of its own, untimed, and leaves the timed sessions as they would be without it', async () => {
    const service = new MemorySessionService();
    const one = await appendSequential(service, { appName: 'warm-seq', events: 20, maxMs: 10_000, warmMs: 30 });
    expect(one.events).toBe(20);
    const seq = await service.listSessions({ appName: 'warm-seq' });
    const timed = await service.getSession({
      appName: 'warm-seq',
      userId: 'user-0',
      sessionId: seq.sessions.find((each) => each.userId === 'user-0')?.id ?? '',
    });
    expect(timed?.events).toHaveLength(20);
    const warm = seq.sessions.filter((each) => each.userId.startsWith('warm-'));
    expect(warm).toHaveLength(1);
    const warmed = await service.getSession({ appName: 'warm-seq', userId: 'warm-0', sessionId: warm[0]?.id ?? '' });
    expect(warmed?.events.length).toBeGreaterThan(0);
    await appendConcurrent(service, { appName: 'warm-conc', events: 24, sessions: 12, maxMs: 10_000, warmMs: 30 });
    const conc = await service.listSessions({ appName: 'warm-conc' });
    // Eight warm sessions at most, beside the twelve timed ones, which hold two events each.
    expect(conc.sessions.filter((each) => each.userId.startsWith('warm-'))).toHaveLength(8);
    for (const each of conc.sessions.filter((session) => session.userId.startsWith('user-'))) {
      const read = await service.getSession({ appName: 'warm-conc', userId: each.userId, sessionId: each.id });
      expect(read?.events).toHaveLength(2);
    }
  });

  it('warmUp runs every worker at least once, then until the time has passed', async () => {
    const rounds: number[] = [0, 0, 0];
    const started = performance.now();
    await warmUp(20, 3, async (worker) => {
      rounds[worker] = (rounds[worker] ?? 0) + 1;
      await new Promise((resolve) => setTimeout(resolve, 1));
    });
    expect(performance.now() - started).toBeGreaterThanOrEqual(19);
    for (const count of rounds) expect(count).toBeGreaterThanOrEqual(1);
    let ran = 0;
    await warmUp(0, 2, async () => {
      ran++;
    });
    expect(ran).toBe(0);
  });

  it('reads recent events, whole histories and pages of sessions', async () => {
    const service = new MemorySessionService();
    const data = await seedReads(service, undefined, 'reads', tiny);
    for (const read of [
      () => readRecent(service, data.small, 3),
      () => readRecent(service, data.large, 3),
      () => readWhole(service, data.whole, tiny.wholeHistory),
      () => listPage(service, data.listApp, 10, tiny.listSessions),
    ]) {
      const sample = await timeRead(read, 1);
      expectPositiveNumber(sample.msPerOperation);
      expect(sample.iterations).toBeGreaterThanOrEqual(3);
    }
    await expect(readWhole(service, data.whole, tiny.wholeHistory + 1)).rejects.toThrow(/expected/);
  });

  it('measures heap bytes per event against the JSON size', async () => {
    const sample = await heapPerEvent(() => new MemorySessionService(), 200);
    expect(Number.isFinite(sample.bytesPerEvent)).toBe(true);
    expectPositiveNumber(sample.jsonBytesPerEvent);
  });

  it('summarizes samples as median and range', () => {
    expect(summarize([3, 1, 2])).toMatchObject({ median: 2, min: 1, max: 3 });
    expect(summarize([4, 1, 2, 3]).median).toBe(2.5);
  });
});

describe('a whole run at tiny sizes', () => {
  it('gives every figure for the in-process targets and renders the reports', async () => {
    const options = defaultOptions(true);
    options.sizes = {
      ...options.sizes,
      ...tiny,
      appendEvents: 20,
      concurrentSessions: 4,
      recentEvents: 3,
      listPage: 10,
      memoryEvents: 100,
      rawOps: 10,
      conversationTurns: 12,
    };
    options.repetitions = 2;
    options.minSampleMs = 1;
    options.command = 'smoke test';
    const lines: string[] = [];
    const results = await runBench(options, [memoryStore, adkInMemory], (line) => lines.push(line));

    expect(results.targets.map((target) => target.status)).toEqual(['ok', 'ok']);
    for (const workload of results.workloads) {
      for (const id of ['memory', 'adk-in-memory']) {
        const cell = workload.cells[id];
        expect(cell?.error).toBeUndefined();
        expectPositiveNumber(cell?.value?.median);
        expect(cell?.value?.samples).toHaveLength(2);
      }
    }
    expect(results.roundTrips.memory?.operations.appendEvent).toBe(0);
    expectPositiveNumber(results.memory.memory?.jsonBytesPerEvent);
    expect(results.checks.find((check) => check.id === 'memory-vs-adk-in-memory')?.status).toMatch(/met|missed/);
    expect(results.checks.find((check) => check.id === 'redis-vs-adk-postgresql')?.status).toBe('not measured');

    // The conversation ran its turns on both, with figures at turn 10 only (turn 100 is past the end).
    for (const id of ['memory', 'adk-in-memory']) {
      const conversation = results.conversation?.[id];
      expect(conversation?.error).toBeUndefined();
      expect(conversation?.points.map((point) => [point.turn, point.events])).toEqual([[10, 40]]);
      expect(conversation?.points[0]?.storeMs.samples).toHaveLength(5);
      // Less the collector's pauses inside the store's calls: never more than the time itself, never below 0.
      const net = conversation?.points[0]?.storeMsNetOfGc?.samples ?? [];
      expect(net).toHaveLength(5);
      net.forEach((value, turn) => {
        expect(value).toBeGreaterThanOrEqual(0);
        expect(value).toBeLessThanOrEqual((conversation?.points[0]?.storeMs.samples[turn] as number) + 1e-9);
      });
      // The loop's pending work, run before each call and left out of the store time, is reported apart.
      const pending = conversation?.points[0]?.pendingMs?.samples ?? [];
      expect(pending).toHaveLength(5);
      for (const value of pending) expect(value).toBeGreaterThanOrEqual(0);
    }
    // And again on the memory store with shareReadEvents (ADK's own service has no such option).
    expect(Object.keys(results.conversationShared ?? {})).toEqual(['memory']);
    expect(results.conversationShared?.memory?.points.map((point) => [point.turn, point.events])).toEqual([[10, 40]]);
    expect(results.checks.find((check) => check.id === 'conversation-growth-memory-shared')?.note).toContain(
      '12 turns',
    );
    expectPositiveNumber(results.shortAppends?.memory?.median);
    expectPositiveNumber(results.shortAppends?.['adk-in-memory']?.median);
    expect(results.checks.find((check) => check.id === 'memory-append-vs-adk-in-memory')?.status).toMatch(/met|missed/);
    const growth = results.checks.find((check) => check.id === 'conversation-growth-memory');
    expect(growth?.status).toBe('not measured');
    expect(growth?.note).toContain('12 turns');

    const table = renderTable(results);
    expect(table).toContain("9. conversation through ADK's Runner");
    expect(table).toContain("loop's pending work, untimed");
    expect(table).toContain('adk-state memory');
    expect(table).toContain('adk-state memory, shareReadEvents');
    expect(table).toContain('ADK InMemorySessionService');
    const chart = renderChart(results);
    expect(chart.startsWith('<svg')).toBe(true);
    expect(chart).toContain('smoke test');
    const markdown = renderMarkdown(results, 'chart.svg');
    expect(markdown).toContain('![');
    expect(markdown).toContain('#### Targets');
  });
});
