/**
 * Client wrappers for attacking the outbox protocol: each passes every
 * command on to a real client, and lets a test hold, delay or observe the
 * scripts it names (by SHA for EVALSHA, by source for EVAL).
 */
import type { Redis } from 'ioredis';
import type { Script } from '../../src/scripts.js';

/** True when `command`/`args` run `target` (EVALSHA by SHA, or EVAL by source). */
export function runs(target: Script, command: string, args: ReadonlyArray<string | number>): boolean {
  if (command === 'evalsha') return args[0] === target.sha;
  if (command === 'eval') return args[0] === target.source;
  return false;
}

/** What a wrapper may do before a command leaves: resolve to let it go. */
export type Gate = (command: string, args: ReadonlyArray<string | number>) => Promise<void> | undefined;

/**
 * A client that asks `gate` before each command; a command the gate answers
 * with a promise leaves once that promise settles. `replies` sees each
 * command's reply promise (for a test that must wait for one to arrive).
 */
export function gated(
  client: Redis,
  gate: Gate,
  replies?: (command: string, args: ReadonlyArray<string | number>, reply: Promise<unknown>) => void,
): Redis {
  return {
    get status() {
      return client.status;
    },
    call(command: string, args: Array<string | number>) {
      const wait = gate(command, args);
      const reply = wait === undefined ? client.call(command, args) : wait.then(() => client.call(command, args));
      replies?.(command, args, reply);
      return reply;
    },
  } as unknown as Redis;
}

/** The server's clock in microseconds. */
export async function serverMicros(client: Redis): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1_000_000 + Number(micros);
}

/** Waits (a bounded loop) until the server's clock is at least `micros`. */
export async function untilServerTime(client: Redis, micros: number): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    if ((await serverMicros(client)) >= micros) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('the server clock did not reach the time asked for');
}

/** The first `count` user ids of the form `<stem>-<n>` whose shard is `shard`. */
export function usersOfShard(
  shardOf: (userId: string, shards: number) => number,
  shards: number,
  shard: number,
  stem: string,
  count: number,
): string[] {
  const out: string[] = [];
  for (let n = 0; out.length < count; n++) {
    const id = `${stem}-${n}`;
    if (shardOf(id, shards) === shard) out.push(id);
  }
  return out;
}
