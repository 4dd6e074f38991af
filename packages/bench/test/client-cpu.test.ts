/**
 * Workload 11 on a redis-server of its own, at tiny sizes: every operation
 * measured on both sides, and the rows rendered in both reports.
 */
import { hasRedisServer, type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measureRedisClientCpu } from '../src/redis-client-cpu.js';
import { clientCpuTable } from '../src/report/conversation.js';
import type { Results } from '../src/results.js';

const available = await hasRedisServer();

describe.skipIf(!available)('client CPU per operation (workload 11)', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('measures each operation of the store and its raw round trips, and renders a row for each', async () => {
    const result = await measureRedisClientCpu({ url: server.url, runId: 'test', repetitions: 2, minSampleMs: 5 });
    expect(result.error).toBeUndefined();
    expect(result.rows.map((row) => row.operation)).toEqual([
      'appendEvent (one session, user: and app: keys)',
      'getSession, the last 10 of 100 events',
      'getSession, all 100 events, read before (the log cache)',
      'getSession, all 100 events, logCacheBytes: 0',
      'listSessions, a page of 50 of 200',
    ]);
    for (const row of result.rows) {
      for (const summary of [row.storeCpuMicros, row.rawCpuMicros, row.storeMs, row.rawMs]) {
        expect(summary.samples).toHaveLength(2);
        expect(summary.median).toBeGreaterThan(0);
      }
    }
    const results = {
      targets: [{ id: 'redis', label: 'adk-state Redis', kind: 'store', backend: 'redis', status: 'ok' }],
      clientCpu: { redis: result },
    } as unknown as Results;
    const table = clientCpuTable(results);
    expect(table?.rows).toHaveLength(5);
    expect(table?.rows[1]?.[6]).toBe('the same EVALSHA');
  });
});
