/**
 * Writers killed (SIGKILL) between the two steps of an append with an
 * `app:` key, on the outbox protocol: the event is stored, the app delta
 * waits in the shard's outbox, and nobody writes to that shard again. Every
 * such delta becomes visible to readers of the app through a drain, within
 * the drain interval (plus the drain itself), and once the entries are older
 * than the keep time a drain leaves no record behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Session } from '@google/adk';
import { Cluster, Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { shardKeys } from '../src/keys.js';

const WRITERS = 4;
const SHARDS = 16;
const DRAIN_MS = 300;
const nodes = inject('redisClusterNodes');
const writerScript = path.join(import.meta.dirname, 'support/crash-writer.ts');
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs a writer until it stops between the steps of its append n, kills it, and returns n and its last acked. */
function runAndKill(options: Record<string, unknown>): Promise<{ between: number; acked: number }> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', writerScript, JSON.stringify(options)], {
    cwd: path.join(import.meta.dirname, '..'),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    let acked = 0;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the writer did not reach its crash point in 60 s: ${stderr}`));
    }, 60_000);
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      const [word, value] = line.split(' ');
      if (word === 'acked') acked = Number(value);
      if (word === 'between') {
        child.kill('SIGKILL');
        clearTimeout(timer);
        child.once('exit', () => resolve({ between: Number(value), acked }));
      }
    });
    child.once('exit', (code, signal) => {
      if (signal === 'SIGKILL') return;
      clearTimeout(timer);
      reject(new Error(`the writer exited (${code}) before its crash point: ${stderr}`));
    });
  });
}

type Target = { url: string } | { nodes: Array<{ host: string; port: number }> };
const targets: Array<[string, Target]> = [['a single server (clusterProtocol)', { url: inject('redisUrl') }]];
if (nodes.length > 0) targets.push(['a cluster of three masters', { nodes }]);

describe.each(targets)('writers killed between the two steps of an append, on %s', (_label, target) => {
  it('every app: write of a stored event becomes visible through a drain, and no record is left', async () => {
    const keyPrefix = `${inject('testPrefix')}-crash-${randomUUID().slice(0, 8)}:`;
    const appName = 'app';
    const runs = await Promise.all(
      Array.from({ length: WRITERS }, (_, writer) =>
        runAndKill({ ...target, keyPrefix, appName, userId: `w${writer}`, shards: SHARDS, dieAfter: 2 + writer }),
      ),
    );
    const client = 'nodes' in target ? new Cluster(target.nodes) : new Redis(target.url);
    try {
      const service = new RedisSessionService({
        client,
        keyPrefix,
        shards: SHARDS,
        clusterProtocol: true,
        // Applied entries leave the outbox 2 s after they are known applied (60 s by default).
        outboxKeepMs: 2_000,
        drainIntervalMs: DRAIN_MS,
      });
      for (const [writer, run] of runs.entries()) {
        // The event of the interrupted append is stored: its app write must become visible.
        const stored = (await service
          .getSession({ appName, userId: `w${writer}`, sessionId: 's' })
          .catch(() => undefined)) as Session | undefined;
        expect(stored?.events).toHaveLength(run.between);
        expect(run.acked).toBe(run.between - 1);
      }
      // Readers of the app only: each read may start a drain (at most one per DRAIN_MS).
      const expected = Object.fromEntries(runs.map((run, writer) => [`w${writer}`, run.between]));
      let app: Record<string, unknown> = {};
      for (let attempt = 0; attempt < 400 && JSON.stringify(app) !== JSON.stringify(expected); attempt++) {
        app = await service.getAppState({ appName });
        await pause(25);
      }
      expect(app).toEqual(expected);

      // Entries known applied go once older than the keep time (2 s): a later drain removes them.
      const outboxes = Array.from(
        { length: SHARDS },
        (_, shard) => shardKeys(keyPrefix, appName, shard, SHARDS).outbox,
      );
      const entriesLeft = async () => {
        let left = 0;
        for (const outbox of outboxes) {
          const fields = await client.hkeys(outbox);
          left += fields.filter((field) => !field.startsWith('\u0000')).length;
        }
        return left;
      };
      let left = await entriesLeft();
      for (let attempt = 0; attempt < 400 && left > 0; attempt++) {
        await service.getAppState({ appName });
        await pause(25);
        left = await entriesLeft();
      }
      expect(left).toBe(0);
    } finally {
      client.disconnect();
    }
  }, 90_000);
});
