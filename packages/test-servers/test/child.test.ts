/**
 * A child script killed between two steps, or in the middle of a stream of
 * writes: the lines it wrote say exactly which writes the server acknowledged.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startChild } from '../src/child.js';
import { hasRedisServer, type RedisServer, startRedisServer } from '../src/redis/index.js';

const WRITER = new URL('./fixtures/writer.ts', import.meta.url);

describe.runIf(await hasRedisServer())('a child script that writes to Redis', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.port, '127.0.0.1');
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  beforeEach(async () => {
    await redis.del('writes');
  });

  const stored = async () => (await redis.lrange('writes', 0, -1)).map(Number);

  it('runs TypeScript, takes steps from the parent, and is killed between two of them', async () => {
    const child = await startChild(WRITER, { args: [server.url, 'step'] });
    try {
      expect(await child.nextLine('ready')).toBe('ready');
      for (const id of [1, 2, 3]) {
        child.send('write');
        expect(await child.nextLine(/^acked /)).toBe(`acked ${id}`);
      }
      expect(await child.kill()).toEqual({ code: null, signal: 'SIGKILL' });
      expect(child.exit).toEqual({ code: null, signal: 'SIGKILL' });
      expect(child.lines).toEqual(['ready', 'acked 1', 'acked 2', 'acked 3']);
      expect(await stored()).toEqual([1, 2, 3]);
      await expect(child.nextLine('acked 4')).rejects.toThrow(/ended/);
    } finally {
      await child.kill();
    }
  });

  it('ends on its own when the parent closes its input', async () => {
    const child = await startChild(WRITER, { args: [server.url, 'step'] });
    await child.nextLine('ready');
    child.send('write');
    await child.nextLine('acked 1');
    child.endInput();
    expect(await child.exited).toEqual({ code: 0, signal: null });
    expect(child.lines).toEqual(['ready', 'acked 1', 'done']);
  });

  it('killed in the middle of a stream of writes: every acknowledged write is stored, at most one more', async () => {
    const child = await startChild(WRITER, { args: [server.url, 'stream'] });
    await child.nextLine('acked 50');
    await child.kill();
    const acked = child.lines.filter((line) => line.startsWith('acked ')).map((line) => Number(line.slice(6)));
    const last = acked.length;
    expect(last).toBeGreaterThanOrEqual(50);
    expect(acked).toEqual(Array.from({ length: last }, (_, index) => index + 1));
    const writes = await stored();
    // The write in flight when the child died may have been applied without its acknowledgement.
    expect(writes.slice(0, last)).toEqual(acked);
    expect(writes.length - last).toBeLessThanOrEqual(1);
    expect(child.lines).not.toContain('done');
  });

  it('reports a child that fails, with its exit code and stderr', async () => {
    const child = await startChild(WRITER, { args: [server.url, 'crash'] });
    await expect(child.nextLine('acked 1')).rejects.toThrow(/ended \(1\)[\s\S]*the writer crashed on purpose/);
    expect(child.exit).toEqual({ code: 1, signal: null });
    expect(child.lines).toEqual(['ready']);
    expect(child.stderr).toContain('the writer crashed on purpose');
  });
});
