/**
 * A key under the prefix that holds another type than the one the scripts
 * keep there (written outside adk-state): Redis keeps what a script wrote
 * before a command failed, so every write checks the keys it would change
 * first. A write that would touch such a key fails with a BackendError of
 * kind 'unreadable-data' that names the key and says nothing was written,
 * and nothing was; a read that needs the key fails the same way; the rest
 * (other sessions, the listing, the purge of expired sessions) goes on, and
 * removing the key repairs it.
 */
import { randomUUID } from 'node:crypto';
import { expectCode } from '@adk-state/conformance-tests';
import type { BackendError } from '@adk-state/core';
import type { SessionKey } from '@adk-state/core/store';
import { createEvent, type Session } from '@google/adk';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService, type RedisSessionServiceOptions } from '../src/index.js';
import { OUTBOX_INDEX_SUFFIX, sessionKeys } from '../src/keys.js';
import { quitShared } from './support/index.js';

const failure = (promise: Promise<unknown>) => expectCode(promise, 'BACKEND_ERROR') as Promise<BackendError>;

const nodes = inject('redisClusterNodes');
let client: Redis;
let cluster: Cluster | undefined;
const made: RedisSessionService[] = [];
beforeAll(() => {
  client = new Redis(inject('redisUrl'));
  if (nodes.length > 0) cluster = new Cluster(nodes);
});
afterAll(async () => {
  await Promise.all(made.map((service) => service.close()));
  await quitShared(client);
  await cluster?.quit();
});

/** Every key under `prefix` (on each master of a cluster), with its type, content and expiry: what a write that wrote nothing leaves as it was. */
async function dump(client: Redis | Cluster, prefix: string): Promise<string> {
  const masters = client instanceof Cluster ? client.nodes('master') : [client];
  const keys = (await Promise.all(masters.map((master) => master.keys(`${prefix}*`)))).flat().sort();
  const out: unknown[] = [];
  for (const key of keys) {
    const type = await client.type(key);
    const content =
      type === 'hash'
        ? await client.hgetall(key)
        : type === 'list'
          ? await client.lrange(key, 0, -1)
          : type === 'zset'
            ? await client.zrange(key, 0, -1, 'WITHSCORES')
            : await client.get(key);
    out.push([key, type, content, await client.pexpiretime(key)]);
  }
  return JSON.stringify(out);
}

/** The parts of a session's keys a write may change, and where each lives. */
type Part =
  | 'session'
  | 'events'
  | 'eventIds'
  | 'userState'
  | 'shardIndex'
  | 'userIndex'
  | 'expiry'
  | 'app'
  | 'outboxIndex';

/** The protocols, and the server each runs on: one server, or the cluster of three masters. */
const PROTOCOLS = {
  direct: {},
  outbox: { clusterProtocol: true, shards: 2, drainIntervalMs: Number.POSITIVE_INFINITY },
  cluster: { shards: 4, drainIntervalMs: Number.POSITIVE_INFINITY },
} as const satisfies Record<string, Partial<RedisSessionServiceOptions>>;
const protocols = (Object.keys(PROTOCOLS) as Array<keyof typeof PROTOCOLS>).filter(
  (protocol) => protocol !== 'cluster' || nodes.length > 0,
);

/** What a fresh reader (no cached log) of the damaged session needs: the head, the log, the user bucket, the app's part. */
const READ_NEEDS: readonly Part[] = ['session', 'events', 'userState', 'app', 'outboxIndex'];
/** What a create of another session of the same user touches. */
const CREATE_TOUCHES: readonly Part[] = ['userState', 'shardIndex', 'userIndex', 'expiry', 'app', 'outboxIndex'];
/** What a delete touches that it does not remove outright. */
const DELETE_TOUCHES: readonly Part[] = ['shardIndex', 'userIndex', 'expiry'];

describe.each(protocols)('the Redis store (%s) with a key of another type', (protocol) => {
  const options = PROTOCOLS[protocol];
  const shards = 'shards' in options ? options.shards : 1;
  const raw = () => (protocol === 'cluster' ? (cluster as Cluster) : client);

  async function fixture(part: Part) {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const make = () => {
      const service = new RedisSessionService({
        client: raw(),
        keyPrefix,
        expireAfterIdleSeconds: 3600,
        ...options,
      } as RedisSessionServiceOptions);
      made.push(service);
      return service;
    };
    const service = make();
    const appName = 'app';
    // An id with a space and a backslash, which the error's key keeps (escaped on the way).
    const key = { appName, userId: 'u', sessionId: 'my s\\ession' };
    const session = await service.createSession({ ...key, state: { a: 1, 'user:c': 3, 'app:b': 2 } });
    await service.appendEvent({
      session,
      event: createEvent({ id: 'e1', author: 'a', actions: { stateDelta: { a: 2, 'app:b': 3 } } }),
    });
    // Another user's session, whose keys are not touched.
    await service.createSession({ appName, userId: 'v', sessionId: 'other', state: { z: 1 } });
    // A reader that holds the session's log from before the damage.
    const holder = make();
    expect((await holder.getSession(key))?.events).toHaveLength(1);
    const keys = sessionKeys(keyPrefix, appName, 'u', key.sessionId, shards);
    const where: Record<Part, string | undefined> = {
      session: keys.session,
      events: keys.events,
      eventIds: keys.eventIds,
      userState: keys.userState,
      shardIndex: keys.shardIndex,
      userIndex: keys.userIndex,
      expiry: keys.expiry,
      app: protocol === 'direct' ? keys.app.appState : keys.outbox,
      outboxIndex: protocol === 'direct' ? undefined : keys.outbox + OUTBOX_INDEX_SUFFIX,
    };
    const foreign = where[part] as string;
    await raw().del(foreign);
    await raw().set(foreign, 'written by something else');
    return { service, make, holder, key, session, foreign, keyPrefix };
  }

  /** The failure of a write that must not have written: typed, naming the key, the data as it was. */
  async function refused(write: Promise<unknown>, foreign: string, keyPrefix: string, before: string) {
    const error = await failure(write);
    expect(error.kind).toBe('unreadable-data');
    expect(error.mayHaveApplied).toBe(false);
    expect(error.message).toContain(JSON.stringify(foreign));
    expect(await dump(raw(), keyPrefix)).toBe(before);
  }

  const parts = (
    ['session', 'events', 'eventIds', 'userState', 'shardIndex', 'userIndex', 'expiry', 'app'] as Part[]
  ).concat(protocol === 'direct' ? [] : ['outboxIndex']);

  it.each(
    parts,
  )('%s: an append fails typed having written nothing, and only what needs the key fails', async (part) => {
    const { service, make, holder, key, session, foreign, keyPrefix } = await fixture(part);
    const before = await dump(raw(), keyPrefix);
    const event = createEvent({ id: 'e2', author: 'a', actions: { stateDelta: { a: 3, 'user:c': 4, 'app:b': 5 } } });
    await refused(service.appendEvent({ session, event }), foreign, keyPrefix, before);

    // A create of another session of the same user, with and without user: and app: keys (its
    // answer reads both buckets, or the outbox, after it wrote).
    const another = { ...key, sessionId: 's2', state: { x: 1, 'user:c': 5, 'app:b': 6 } };
    if (CREATE_TOUCHES.includes(part)) {
      await refused(service.createSession(another), foreign, keyPrefix, before);
      await refused(service.createSession({ ...key, sessionId: 's3', state: { x: 1 } }), foreign, keyPrefix, before);
    } else {
      expect((await service.createSession(another)).state).toMatchObject({ x: 1, 'user:c': 5, 'app:b': 6 });
    }

    // A reader that holds nothing of the session, and one that holds its log (which reads only
    // what is new, checking what it holds): each fails only on a key a whole read needs.
    const reader = make();
    for (const each of [reader, holder]) {
      if (READ_NEEDS.includes(part)) {
        const error = await failure(each.getSession(key));
        expect(error.kind).toBe('unreadable-data');
        expect(error.mayHaveApplied).toBe(false);
        expect(error.message).toContain(JSON.stringify(foreign));
      } else {
        expect((await each.getSession(key))?.events.map((event) => event.id)).toEqual(['e1']);
      }
    }

    // A bucket read on its own fails the same way, naming the key.
    if (part === 'userState' || (part === 'app' && protocol === 'direct')) {
      const read = part === 'userState' ? reader.getUserState(key) : reader.getAppState(key);
      const error = await failure(read);
      expect(error.kind).toBe('unreadable-data');
      expect(error.mayHaveApplied).toBe(false);
      expect(error.message).toContain(JSON.stringify(foreign));
    }

    // The other user's session reads and lists as before, unless the key is the app bucket (part of
    // every session of the app, on one server) or the listing's own index.
    const other = reader.getSession({ appName: key.appName, userId: 'v', sessionId: 'other' });
    const everyone = part === 'app' && protocol === 'direct';
    if (everyone) {
      expect((await failure(other)).kind).toBe('unreadable-data');
    } else {
      expect((await other)?.state).toEqual(expect.objectContaining({ z: 1 }));
    }
    if (part === 'shardIndex' || everyone) {
      expect((await failure(reader.listSessions({ appName: key.appName }))).kind).toBe('unreadable-data');
    } else {
      const warned: string[] = [];
      const listen = (warning: Error & { code?: string }) => warned.push(warning.code ?? '');
      process.on('warning', listen);
      const listed = await reader.listSessions({ appName: key.appName }).finally(async () => {
        // Warnings are emitted on the next tick.
        await new Promise((resolve) => setImmediate(resolve));
        process.off('warning', listen);
      });
      // A head or a user bucket that is not a hash: the session is listed with what can be read
      // of it (the other scopes, and its index's lastUpdateTime), and a warning says so.
      expect(warned.includes('ADK_STATE_UNREADABLE_LISTED')).toBe(part === 'session' || part === 'userState');
      const ids = [key.sessionId, 'other', ...(CREATE_TOUCHES.includes(part) ? [] : [another.sessionId])];
      expect(listed.sessions.map((each) => each.id).sort()).toEqual(ids.sort());
      expect(listed.totalItems).toBe(ids.length);
      const damaged = listed.sessions.find((each) => each.id === key.sessionId);
      expect(damaged?.lastUpdateTime).toBe(session.lastUpdateTime);
      const scopes = Object.keys(damaged?.state ?? {}).sort();
      if (part === 'session') expect(scopes).toEqual(['app:b', 'user:c']);
      else if (part === 'userState') expect(scopes).toEqual(['a', 'app:b']);
      else expect(scopes).toEqual(['a', 'app:b', 'user:c']);
    }

    // The session's own keys go with it; a shared index of another type stops the delete before it removes anything.
    const beforeDelete = await dump(raw(), keyPrefix);
    if (DELETE_TOUCHES.includes(part)) {
      await refused(service.deleteSession(key), foreign, keyPrefix, beforeDelete);
    } else {
      await service.deleteSession(key);
      expect(await reader.getSession(key)).toBeUndefined();
    }

    // Removing the key repairs it: the session is made again, appended to with every scope, and read.
    await raw().del(foreign);
    await service.deleteSession(key);
    const again: Session = await service.createSession({ ...key, state: { a: 1 } });
    await service.appendEvent({ session: again, event });
    const read = await make().getSession(key);
    expect(read?.events.map((each) => each.id)).toEqual(['e2']);
    expect(read?.state).toEqual(expect.objectContaining({ a: 3, 'user:c': 4, 'app:b': 5 }));
  });
});

describe.each(
  protocols.filter((protocol) => protocol !== 'direct'),
)("the Redis store (%s) with the app slot's bucket or marks of another type", (protocol) => {
  const options = PROTOCOLS[protocol];
  const raw = () => (protocol === 'cluster' ? (cluster as Cluster) : client);

  it.each(['appState', 'marks'] as const)('%s', async (part) => {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const make = () => {
      const service = new RedisSessionService({ client: raw(), keyPrefix, ...options } as RedisSessionServiceOptions);
      made.push(service);
      return service;
    };
    const service = make();
    const appName = 'app';
    const key = { appName, userId: 'u', sessionId: 's' };
    const session = await service.createSession({ ...key, state: { a: 1, 'app:b': 2 } });
    await service.createSession({ appName, userId: 'v', sessionId: 'other', state: { z: 1 } });
    const foreign = sessionKeys(keyPrefix, appName, 'u', 's').app[part];
    await raw().del(foreign);
    await raw().set(foreign, 'written by something else');

    // Both are part of every session's read (without the marks a reader cannot tell which of the
    // outboxes' entries the bucket holds already): a read fails, naming the key.
    const reader = make();
    const readError = await failure(reader.getSession({ appName, userId: 'v', sessionId: 'other' }));
    expect(readError.kind).toBe('unreadable-data');
    expect(readError.mayHaveApplied).toBe(false);
    expect(readError.message).toContain(JSON.stringify(foreign));
    // The bucket is part of every listing too.
    if (part === 'appState') expect((await failure(reader.listSessions({ appName }))).kind).toBe('unreadable-data');

    // An append without app: keys never touches the app slot.
    await service.appendEvent({ session, event: createEvent({ author: 'a', actions: { stateDelta: { a: 2 } } }) });
    // One with them is stored in its shard (its delta in the outbox) before the app slot refuses it.
    const event = createEvent({ author: 'a', actions: { stateDelta: { a: 3, 'app:b': 5 } } });
    const error = await failure(service.appendEvent({ session, event }));
    expect(error.kind).toBe('unreadable-data');
    expect(error.mayHaveApplied).toBe(true);
    expect(error.message).toContain(JSON.stringify(foreign));
    expect(await raw().get(foreign)).toBe('written by something else');

    // Removing the key repairs it: the delta waiting in the outbox reaches the app's state.
    await raw().del(foreign);
    const read = await make().getSession(key);
    expect(read?.events).toHaveLength(2);
    expect(read?.state).toEqual({ a: 3, 'app:b': 5 });
    expect(await make().getAppState({ appName })).toEqual({ b: 5 });
  });
});

describe.each(
  protocols.filter((protocol) => protocol !== 'direct'),
)("the Redis store (%s) with the app slot's write-times hash of another type", (protocol) => {
  it('an append with app: keys is stored in its shard and fails naming the key; reads go on; removing it repairs', async () => {
    const raw = protocol === 'cluster' ? (cluster as Cluster) : client;
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const make = () => {
      const service = new RedisSessionService({
        client: raw,
        keyPrefix,
        ...PROTOCOLS[protocol],
      } as RedisSessionServiceOptions);
      made.push(service);
      return service;
    };
    const key = { appName: 'app', userId: 'u', sessionId: 's' };
    const session = await make().createSession({ ...key, state: { a: 1 } });
    const foreign = sessionKeys(keyPrefix, 'app', 'u', 's').app.written;
    await raw.set(foreign, 'written by something else');
    const error = await failure(
      make().appendEvent({ session, event: createEvent({ author: 'a', actions: { stateDelta: { 'app:b': 5 } } }) }),
    );
    expect(error.kind).toBe('unreadable-data');
    expect(error.mayHaveApplied).toBe(true);
    expect(error.message).toContain(JSON.stringify(foreign));
    expect(await raw.get(foreign)).toBe('written by something else');
    // Reads do not need it: they show the delta waiting in the outbox.
    expect((await make().getSession(key))?.state).toEqual({ a: 1, 'app:b': 5 });
    // Removing the key repairs it: the next read of the shard applies the delta.
    await raw.del(foreign);
    expect((await make().getSession(key))?.state).toEqual({ a: 1, 'app:b': 5 });
    expect(await make().getAppState({ appName: 'app' })).toEqual({ b: 5 });
  });
});

describe('the purge of expired sessions', () => {
  /**
   * A service with a time to live whose session `old` of user `owner` has
   * expired, and whose `index` holds a string; `others` are made before.
   */
  async function expiredBesideForeign(owner: string, index: 'userIndex' | 'shardIndex', others: SessionKey[] = []) {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const service = new RedisSessionService({ client, keyPrefix, expireAfterIdleSeconds: 3600 });
    made.push(service);
    const gone = sessionKeys(keyPrefix, 'app', owner, 'old');
    for (const other of others) await service.createSession(other);
    await service.createSession({ appName: 'app', userId: owner, sessionId: 'old' });
    // Its expiry entry is in the past, and the index is not a sorted set.
    await client.zadd(gone.expiry, 1, gone.expiryMember);
    await client.del(gone[index]);
    await client.set(gone[index], 'written by something else');
    return { service, gone };
  }

  it("another user's index of another type does not stop the writes that purge: the expired session goes, the key stays", async () => {
    const { service, gone } = await expiredBesideForeign('v', 'userIndex');
    const key = { appName: 'app', userId: 'u', sessionId: 's' };
    const session = await service.createSession({ ...key, state: { a: 1 } });
    for (let turn = 0; turn < 3; turn++) {
      await service.appendEvent({ session, event: createEvent({ author: 'a', actions: { stateDelta: { a: turn } } }) });
    }
    expect((await service.getSession(key))?.events).toHaveLength(3);
    expect(await client.exists(gone.session)).toBe(0);
    expect(await client.zscore(gone.expiry, gone.expiryMember)).toBeNull();
    expect(await client.get(gone.userIndex)).toBe('written by something else');
    expect((await service.listSessions({ appName: 'app' })).sessions.map((each) => each.id)).toEqual(['s']);
  });

  it("a shard index of another type does not stop a user's listing, which purges the shard's expired sessions", async () => {
    const live = { appName: 'app', userId: 'v', sessionId: 'live' };
    const { service, gone } = await expiredBesideForeign('u', 'shardIndex', [live]);
    for (let round = 0; round < 2; round++) {
      const listed = await service.listSessions({ appName: 'app', userId: 'v' });
      expect(listed.sessions.map((each) => each.id)).toEqual(['live']);
    }
    expect(await client.exists(gone.session)).toBe(0);
    expect(await client.zscore(gone.expiry, gone.expiryMember)).toBeNull();
    expect((await service.getSession(live))?.id).toBe('live');
  });

  it('an expiry index of another type is not purged, and the listing goes on', async () => {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const service = new RedisSessionService({ client, keyPrefix });
    made.push(service);
    const appName = 'app';
    const keys = sessionKeys(keyPrefix, appName, 'u', 's');
    await service.createSession({ appName, userId: 'u', sessionId: 's' });
    await client.set(keys.expiry, 'written by something else');
    expect((await service.listSessions({ appName })).sessions.map((each) => each.id)).toEqual(['s']);
    expect((await service.listSessions({ appName, userId: 'u' })).sessions.map((each) => each.id)).toEqual(['s']);
  });
});

describe('importSession with replace', () => {
  it('that the import refuses after the delete says the call may have applied: the stored session is gone', async () => {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const service = new RedisSessionService({ client, keyPrefix });
    made.push(service);
    const key = { appName: 'app', userId: 'u', sessionId: 's' };
    const session = await service.createSession({ ...key, state: { a: 1 } });
    await service.appendEvent({ session, event: createEvent({ author: 'a', actions: { stateDelta: { a: 2 } } }) });
    const keys = sessionKeys(keyPrefix, key.appName, key.userId, key.sessionId);
    const foreign = keys.userState;
    await client.set(foreign, 'written by something else');
    const copy: Session = {
      id: key.sessionId,
      appName: key.appName,
      userId: key.userId,
      state: { a: 9, 'user:c': 7 },
      events: [createEvent({ id: 'x1', author: 'a', timestamp: 1 })],
      lastUpdateTime: 2,
    };
    // Without replace: refused before anything is written.
    expect((await failure(service.importSession(copy))).mayHaveApplied).toBe(false);
    expect(await client.exists(keys.session, keys.events)).toBe(2);
    const error = await failure(service.importSession(copy, { replace: true }));
    expect(error.kind).toBe('unreadable-data');
    expect(error.mayHaveApplied).toBe(true);
    expect(error.message).toContain('the stored session was deleted (replace), then the import failed');
    expect(error.message).toContain(JSON.stringify(foreign));
    await client.del(foreign);
    expect(await service.getSession(key)).toBeUndefined();
    expect(await service.importSession(copy, { replace: true })).toBe('imported');
    expect((await service.getSession(key))?.state).toEqual({ a: 9, 'user:c': 7 });
  });
});
