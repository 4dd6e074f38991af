/**
 * Incremental reads: a service that read a session whole reads it again
 * with only the events appended since (one script, as a whole read), and
 * the whole log again when the log is no longer what it holds: an event
 * replaced in place, the id deleted and created again, writes the server
 * lost and others it took at the same revisions.
 */
import { randomUUID } from 'node:crypto';
import type { Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { SCRIPT_SHAS } from '../src/store.js';
import { quitShared, testEvent } from './support/index.js';

/** A client that records how many log entries each session read brought back. */
function counting(client: Redis) {
  const entries: number[] = [];
  const wrapped = new Proxy(client, {
    get(target, property, receiver) {
      if (property !== 'call') return Reflect.get(target, property, receiver);
      return async (command: string, args: Array<string | number>) => {
        const reply = await target.call(command, args);
        if (command === 'evalsha' && args[0] === SCRIPT_SHAS.load && Array.isArray(reply)) {
          entries.push((reply[1] as unknown[]).length);
        }
        return reply;
      };
    },
  });
  return { client: wrapped, entries };
}

describe.each([
  ['one server', {}],
  ['the outbox protocol', { shards: 8, clusterProtocol: true }],
] as const)('incremental reads (%s)', (_label, layout) => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await quitShared(client);
  });

  it('reads only the events appended since, and the whole log after a replaced event or a new life of the id', async () => {
    const keyPrefix = `${inject('testPrefix')}-since-${randomUUID().slice(0, 8)}:`;
    const { client: wrapped, entries } = counting(client);
    const reader = new RedisSessionService({ client: wrapped, keyPrefix, ...layout });
    const writer = new RedisSessionService({ client, keyPrefix, ...layout });
    const key = { appName: 'app', userId: 'u1', sessionId: 's1' };
    let session = await writer.createSession(key);
    for (let n = 1; n <= 50; n++) await writer.appendEvent({ session, event: testEvent({ n, 'app:n': n }) });

    await writer.getSession(key); // the server has the read script from here on: every read is one EVALSHA
    expect(((await reader.getSession(key)) as Session).events).toHaveLength(50);
    session = (await writer.getSession(key)) as Session;
    const first = session.events[0];
    await writer.appendEvent({ session, event: testEvent({ n: 51, 'app:n': 51 }) });
    const again = (await reader.getSession(key)) as Session;
    expect(again.events).toHaveLength(51);
    expect(again.state).toEqual({ n: 51, 'app:n': 51 });
    expect(entries.slice(-2)).toEqual([50, 1]);

    // An event replaced in place (its delta applied again): the reader's copy is no prefix of the log any more.
    session = (await writer.getSession(key)) as Session;
    const replaced = { ...(first as NonNullable<typeof first>), timestamp: (first?.timestamp ?? 0) + 1 };
    await writer.appendEvent({ session, event: replaced as never });
    const afterReplace = (await reader.getSession(key)) as Session;
    expect(afterReplace.events[0]?.timestamp).toBe(replaced.timestamp);
    expect(afterReplace.state).toEqual({ n: 1, 'app:n': 1 });
    expect(entries.at(-1)).toBe(51);

    // The id deleted and created again: a new life, read whole.
    await writer.deleteSession(key);
    const reborn = await writer.createSession(key);
    await writer.appendEvent({ session: reborn, event: testEvent({ life: 2 }) });
    const newLife = (await reader.getSession(key)) as Session;
    expect(newLife.events).toHaveLength(1);
    expect(newLife.state).toEqual({ life: 2, 'app:n': 1 });
    expect(entries.at(-1)).toBe(1);
  });

  it('reads the whole log again after the server lost writes and took others at the same revisions', async () => {
    const keyPrefix = `${inject('testPrefix')}-lost-${randomUUID().slice(0, 8)}:`;
    const reader = new RedisSessionService({ client, keyPrefix, ...layout });
    // Reads nothing from a cache: what is stored, each time.
    const writer = new RedisSessionService({ client, keyPrefix, logCacheBytes: 0, ...layout });
    const key = { appName: 'app', userId: 'u1', sessionId: 's1' };
    const stored = async () => {
      const session = (await writer.getSession(key)) as Session;
      return { state: session.state, events: session.events.map((e) => [e.id, e.timestamp]) };
    };
    const read = async () => {
      const session = (await reader.getSession(key)) as Session;
      return { state: session.state, events: session.events.map((e) => [e.id, e.timestamp]) };
    };
    const append = async (n: number) => {
      const session = (await writer.getSession(key)) as Session;
      await writer.appendEvent({ session, event: testEvent({ n }, { timestamp: 1_000 + n }) });
    };
    /** Writes `event` again in place, a moment later: another entry at the same position. */
    const replace = async (position: number, later: number) => {
      const session = (await writer.getSession(key)) as Session;
      const event = session.events[position] as NonNullable<(typeof session.events)[number]>;
      await writer.appendEvent({ session, event: { ...event, timestamp: event.timestamp + later } as never });
    };

    await writer.createSession(key);
    for (let n = 1; n <= 3; n++) await append(n);
    // What a restart from an older snapshot, or a failover to a replica that lagged, comes back with.
    let snapshot = await keyspace(keyPrefix);
    await append(4);
    await append(5);
    expect((await read()).events).toHaveLength(5);
    await restore(keyPrefix, snapshot);
    for (let n = 14; n <= 16; n++) await append(n);
    expect((await stored()).events).toHaveLength(6);
    expect(await read()).toEqual(await stored());

    // A write in place that the server lost, and another write in place at the same revision.
    snapshot = await keyspace(keyPrefix);
    await replace(1, 1);
    expect(await read()).toEqual(await stored());
    await restore(keyPrefix, snapshot);
    await replace(2, 2);
    expect(await read()).toEqual(await stored());
    await append(17);
    expect(await read()).toEqual(await stored());
  });

  it('after lost writes, the same event id written again with other content is read anew', async () => {
    const text = 'the tool';
    const keyPrefix = `${inject('testPrefix')}-sameid-${randomUUID().slice(0, 8)}:`;
    const { client: wrapped, entries } = counting(client);
    const reader = new RedisSessionService({ client: wrapped, keyPrefix, ...layout });
    const writer = new RedisSessionService({ client, keyPrefix, logCacheBytes: 0, ...layout });
    const key = { appName: 'app', userId: 'u1', sessionId: 's1' };
    const append = async (event: ReturnType<typeof testEvent>) => {
      await writer.appendEvent({ session: (await writer.getSession(key)) as Session, event });
    };
    const texts = async () =>
      ((await reader.getSession(key)) as Session).events.map((e) => e.content?.parts?.[0]?.text?.slice(-12));
    await writer.createSession(key);
    for (let n = 1; n <= 3; n++) await append(testEvent({ n }, { timestamp: 1_000 + n }));
    const snapshot = await keyspace(keyPrefix);
    // An id the caller derives (say, from its invocation and step): written, lost, then written with other content.
    const step4 = (answer: number) =>
      Object.assign(testEvent({ answer }, { timestamp: 1_004, text: `${text} said ${answer}` }), { id: 'step-4' });
    await append(step4(42));
    expect(await texts()).toHaveLength(4);
    await restore(keyPrefix, snapshot);
    await append(step4(7));
    expect((await texts()).at(-1)).toBe(`${text} said 7`.slice(-12));
    expect(((await reader.getSession(key)) as Session).state.answer).toBe(7);
    // Nothing lost or changed since: the next read is incremental again.
    await append(testEvent({ n: 5 }, { timestamp: 1_005 }));
    expect(await texts()).toHaveLength(5);
    expect(entries.at(-1)).toBe(1);
  });

  /** Every key under `prefix`, dumped. */
  async function keyspace(prefix: string): Promise<Map<string, Buffer>> {
    const dumps = new Map<string, Buffer>();
    for (const name of await client.keys(`${prefix}*`)) {
      const dump = await client.dumpBuffer(name);
      if (dump) dumps.set(name, dump);
    }
    return dumps;
  }

  /** The keys under `prefix` as `dumps` has them: later ones removed, the others put back. */
  async function restore(prefix: string, dumps: Map<string, Buffer>): Promise<void> {
    for (const name of await client.keys(`${prefix}*`)) if (!dumps.has(name)) await client.del(name);
    for (const [name, dump] of dumps) await client.restore(name, 0, dump, 'REPLACE');
  }
});
