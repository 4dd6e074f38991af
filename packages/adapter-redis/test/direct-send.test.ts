/**
 * How commands leave the store: through a plain client they are built and
 * handed to `sendCommand` (no `call`), and every client whose `call` does
 * more than that (a key prefix, auto-pipelining, a wrapper) still gets every
 * command through its `call`, with the same results.
 */
import { randomUUID } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { testEvent } from './support/index.js';

const url = inject('redisUrl');
const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;

const clients: Redis[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.quit()));
});

function client(options: RedisOptions = {}): Redis {
  const made = new Redis(url, options);
  clients.push(made);
  return made;
}

/** Counts the commands `target` receives through `Redis.prototype.call` while `work` runs. */
async function callsThroughCall(target: Redis, work: () => Promise<void>): Promise<number> {
  const original = Redis.prototype.call;
  let count = 0;
  Redis.prototype.call = function (this: Redis, ...args: unknown[]) {
    if (this === target) count++;
    return (original as (...rest: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  try {
    await work();
  } finally {
    Redis.prototype.call = original;
  }
  return count;
}

/** Every kind of command a store sends, each answer checked. */
async function roundTrip(service: RedisSessionService): Promise<void> {
  const appName = `direct-${randomUUID()}`;
  const session = await service.createSession({ appName, userId: 'u', state: { n: 1, 'app:a': 'x' } });
  await service.appendEvent({ session, event: testEvent({ n: 2, 'user:u': [1, 2], 'app:a': 'y' }) });
  const read = await service.getSession({ appName, userId: 'u', sessionId: session.id });
  expect(read?.state).toEqual({ n: 2, 'user:u': [1, 2], 'app:a': 'y' });
  expect(read?.events).toHaveLength(1);
  const listed = await service.listSessions({ appName, userId: 'u' });
  expect(listed.sessions.map((each) => each.id)).toEqual([session.id]);
  await service.deleteSession({ appName, userId: 'u', sessionId: session.id });
  expect(await service.getSession({ appName, userId: 'u', sessionId: session.id })).toBeUndefined();
}

describe('sending commands', () => {
  // vitest.ioredis6.config.ts runs this file with ioredis 6 in place of the 5.x devDependency.
  it.runIf(process.env.ADK_STATE_IOREDIS_MAJOR === '6')('runs on ioredis 6 (its Command carries a protocol)', () => {
    const Command = (Redis as unknown as { Command: new (name: string, args: never[]) => { protocol?: unknown } })
      .Command;
    expect(new Command('ping', []).protocol).toBe(2);
  });

  it('a plain client gets every command of the store without its call', async () => {
    const plain = client();
    const service = new RedisSessionService({ client: plain, keyPrefix });
    expect(await callsThroughCall(plain, () => roundTrip(service))).toBe(0);
  });

  it('a client with its own keyPrefix gets every command through its call, and the keys carry that prefix', async () => {
    const own = `${keyPrefix}own-`;
    const prefixed = client({ keyPrefix: own });
    const service = new RedisSessionService({ client: prefixed, keyPrefix: 'store:' });
    expect(await callsThroughCall(prefixed, () => roundTrip(service))).toBeGreaterThan(0);
    const admin = client();
    const appName = `direct-${randomUUID()}`;
    await service.createSession({ appName, userId: 'u', sessionId: 's' });
    const keys = await admin.keys(`${own}store:*`);
    expect(keys.length).toBeGreaterThan(0);
  });

  it('a client with auto-pipelining gets every command through its call', async () => {
    const pipelined = client({ enableAutoPipelining: true });
    const service = new RedisSessionService({ client: pipelined, keyPrefix });
    expect(await callsThroughCall(pipelined, () => roundTrip(service))).toBeGreaterThan(0);
  });

  it("a wrapped client's call sees every command", async () => {
    const inner = client();
    const seen: string[] = [];
    const wrapped = new Proxy(inner, {
      get(target, property, receiver) {
        if (property !== 'call') return Reflect.get(target, property, receiver);
        return (command: string, args: Array<string | number>) => {
          seen.push(command);
          return target.call(command, args);
        };
      },
    });
    const service = new RedisSessionService({ client: wrapped, keyPrefix });
    await roundTrip(service);
    expect(seen.filter((command) => command === 'evalsha' || command === 'eval').length).toBeGreaterThanOrEqual(6);
  });
});
