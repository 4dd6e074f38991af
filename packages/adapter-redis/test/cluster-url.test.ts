/**
 * `url: 'redis+cluster://[user:password@]h1:p1,h2:p2'`: the service makes a
 * Cluster of the listed nodes (a user and password in the URL apply to every
 * node), and `close()` ends it. A call made while no node answers fails at the
 * first failed connection attempt, as on a single server made from a URL,
 * without waiting for its deadline. Malformed URLs are refused before any
 * client is made, and the refusal never shows the password.
 */
import { randomUUID } from 'node:crypto';
import { InvalidArgumentError, isAdkStateError } from '@adk-state/core';
import { Cluster } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { DEFAULT_SHARDS, RedisSessionService } from '../src/index.js';
import { freePorts } from './support/index.js';

const nodes = inject('redisClusterNodes');
const testPrefix = inject('testPrefix');
const nodeList = nodes.map(({ host, port }) => `${host}:${port}`).join(',');

/** The error a promise rejects with (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  const outcome = await promise.then(
    () => undefined,
    (error: unknown) => error as Error & Record<string, unknown>,
  );
  if (outcome === undefined) throw new Error('expected a rejection');
  return outcome;
}

describe.skipIf(nodes.length === 0)('a service made from a redis+cluster:// url', () => {
  it('talks to the cluster of the listed nodes with the outbox protocol, and close() ends it', async () => {
    const keyPrefix = `${testPrefix}-url-${randomUUID().slice(0, 8)}:`;
    const [closedPort] = await freePorts(1);
    // A node nobody listens on comes first: the cluster is found through the others.
    const service = new RedisSessionService({ url: `redis+cluster://127.0.0.1:${closedPort},${nodeList}`, keyPrefix });
    const reader = new Cluster(nodes);
    try {
      expect(service.client.isCluster).toBe(true);
      expect(service.protocol).toBe('outbox');
      const created = await service.createSession({
        appName: 'app',
        userId: 'ada',
        state: { visits: 1, 'user:name': 'Ada', 'app:motd': 'hi' },
      });
      // Another service with the same layout, on a Cluster the test made itself, reads what the first wrote.
      const other = new RedisSessionService({ client: reader, keyPrefix, shards: DEFAULT_SHARDS });
      const read = await other.getSession({ appName: 'app', userId: 'ada', sessionId: created.id });
      expect(read?.state).toEqual({ visits: 1, 'user:name': 'Ada', 'app:motd': 'hi' });
      expect((service.client as Cluster).nodes('master')).toHaveLength(3);
    } finally {
      await service.close();
      await reader.quit();
    }
    expect(service.client.status).toBe('end');
  });

  it('gives the user and password of the url to every node', async () => {
    const user = `adk-test-${randomUUID().slice(0, 8)}`;
    const password = 'p@ss/word:1';
    const keyPrefix = `${testPrefix}-acl-${randomUUID().slice(0, 8)}:`;
    const admin = new Cluster(nodes);
    await admin.ping();
    const every = admin.nodes('all');
    for (const node of every) await node.call('ACL', 'SETUSER', user, 'on', `>${password}`, '~*', '&*', '+@all');
    const url = (secret: string) => `redis+cluster://${user}:${encodeURIComponent(secret)}@${nodeList}`;
    const service = new RedisSessionService({ url: url(password), keyPrefix });
    const refused = new RedisSessionService({ url: url('wrong'), keyPrefix, timeoutMs: Number.POSITIVE_INFINITY });
    try {
      const options = (service.client as Cluster).options.redisOptions;
      expect([options?.username, options?.password]).toEqual([user, password]);
      const created = await service.createSession({ appName: 'app', userId: 'ada', state: { 'app:motd': 'hi' } });
      expect(await service.getAppState({ appName: 'app' })).toEqual({ motd: 'hi' });
      // Sessions of 24 users (fixed ids) land on every master, so the service connects to each as the url's user.
      for (let n = 0; n < 24; n++) await service.createSession({ appName: 'app', userId: `user-${n}` });
      const masters = admin.nodes('master');
      const clients = await Promise.all(masters.map((node) => node.call('CLIENT', 'LIST')));
      expect(clients.map((list) => String(list).includes(` user=${user} `))).toEqual(masters.map(() => true));
      // A wrong password fails the call (no deadline to wait for: the first failed attempt ends it).
      const error = await rejection(refused.getSession({ appName: 'app', userId: 'ada', sessionId: created.id }));
      expect(isAdkStateError(error, 'BACKEND_ERROR')).toBe(true);
      expect(error.timedOut).toBe(false);
      expect(error.message).not.toContain('wrong');
    } finally {
      await Promise.all([service.close(), refused.close()]);
      for (const node of every) await node.call('ACL', 'DELUSER', user);
      await admin.quit();
    }
  });
});

describe('a redis+cluster:// url where no node listens', () => {
  it('fails each call at the first failed attempt, says nothing was written, and closes', async () => {
    const [a, b] = await freePorts(2);
    const service = new RedisSessionService({
      url: `redis+cluster://127.0.0.1:${a},127.0.0.1:${b}`,
      timeoutMs: Number.POSITIVE_INFINITY,
    });
    const key = { appName: 'app', userId: 'u', sessionId: 's' };
    const read = await rejection(service.getSession(key));
    const write = await rejection(service.createSession({ ...key, state: { a: 1 } }));
    for (const error of [read, write]) {
      expect(isAdkStateError(error, 'BACKEND_ERROR')).toBe(true);
      expect(error.timedOut).toBe(false);
      expect(error.message).toContain('no node of the cluster answered');
    }
    expect(read.mayHaveApplied).toBe(false);
    await service.close();
    expect(service.client.status).toBe('end');
  });
});

describe('reading a cluster url', () => {
  it('takes TLS from rediss+cluster://, percent-decodes the user and password, and lets clientOptions win', async () => {
    const [a, b] = await freePorts(2);
    const service = new RedisSessionService({
      url: `rediss+cluster://me:s%2F3%40t@127.0.0.1:${a},127.0.0.1:${b}/`,
      clientOptions: { connectTimeout: 1_000 },
    });
    try {
      const options = (service.client as Cluster).options.redisOptions;
      expect(options).toMatchObject({ tls: {}, username: 'me', password: 's/3@t', connectTimeout: 1_000 });
      expect(options?.maxRetriesPerRequest).toBe(0);
    } finally {
      await service.close();
    }
  });

  it('refuses a url without nodes, with a bad port, a database, parameters or bad encoding, never showing the password', () => {
    for (const url of [
      'redis+cluster://me:hunter2@',
      'redis+cluster://me:hunter2@127.0.0.1:0',
      'redis+cluster://me:hunter2@127.0.0.1:7000,127.0.0.1:x',
      'redis+cluster://me:hunter2@127.0.0.1:7000/1',
      'rediss+cluster://me:hunter2@127.0.0.1:7000?tls=false',
      'redis+cluster://me:hunter2%zz@127.0.0.1:7000',
      // An @ in the password that is not percent-encoded: no part of the password is taken for a node.
      'redis+cluster://me:hun@ter2@127.0.0.1:7000',
    ]) {
      let error: unknown;
      try {
        new RedisSessionService({ url });
      } catch (caught) {
        error = caught;
      }
      expect(error, url).toBeInstanceOf(InvalidArgumentError);
      expect((error as Error).message, url).not.toMatch(/hun|ter2/);
    }
  });
});
