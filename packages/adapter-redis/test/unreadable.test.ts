/**
 * Records changed outside adk-state (a log entry, a state value that is not
 * JSON): every read fails with a BackendError of kind 'unreadable-data' that
 * says nothing was written, through the log cache and without it; the rest
 * of the data stays readable, and removing the session clears it.
 */
import { randomUUID } from 'node:crypto';
import { expectCode } from '@adk-state/conformance-tests';
import type { BackendError } from '@adk-state/core';
import { createEvent } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { appKeys, encodeText, FIELD, OUTBOX_INDEX_SUFFIX, sessionKeys, shardKeys, shardOf } from '../src/keys.js';
import type { RedisStoreWarning } from '../src/outbox.js';
import { outboxServices, quitShared } from './support/index.js';

const failure = (promise: Promise<unknown>) => expectCode(promise, 'BACKEND_ERROR') as Promise<BackendError>;

let client: Redis;
/** The outbox services the fixtures made, closed before the client quits. */
const outboxed: Array<{ closeAll(): Promise<void> }> = [];
beforeAll(() => {
  client = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  await Promise.all(outboxed.map((made) => made.closeAll()));
  await quitShared(client);
});

describe('the Redis store with records it cannot read', () => {
  async function fixture() {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const cached = new RedisSessionService({ client, keyPrefix });
    const uncached = new RedisSessionService({ client, keyPrefix, logCacheBytes: 0 });
    const appName = 'app';
    const key = { appName, userId: 'u', sessionId: 's' };
    const session = await cached.createSession({ ...key, state: { a: 1, 'app:b': 2 } });
    await cached.appendEvent({
      session,
      event: createEvent({ id: 'e1', author: 'a', content: { parts: [{ text: 'hello' }] } }),
    });
    // Read once, so that the cached service holds the log.
    expect((await cached.getSession(key))?.events).toHaveLength(1);
    const keys = sessionKeys(keyPrefix, appName, 'u', 's');
    return { cached, uncached, key, keys, keyPrefix, app: appKeys(keyPrefix, appName) };
  }

  it('a log entry whose header or event is not JSON', async () => {
    for (const entry of ['1 "e1\n{"author":', '1 e1\n{}', 'nonsense', '1 "e1"\n{"author":']) {
      const { cached, key, keys, keyPrefix } = await fixture();
      await client.lset(keys.events, 0, entry);
      // A service that read the log before holds it (the entry was changed behind the revision's back);
      // one that reads it now, with the cache or without, cannot read it.
      const reading = new RedisSessionService({ client, keyPrefix });
      const uncached = new RedisSessionService({ client, keyPrefix, logCacheBytes: 0 });
      for (const service of [reading, uncached]) {
        for (const config of [undefined, { numRecentEvents: 1 }, { afterTimestamp: 0 }]) {
          const error = await failure(service.getSession({ ...key, config }));
          expect(error.kind).toBe('unreadable-data');
          expect(error.mayHaveApplied).toBe(false);
        }
      }
      // The session's state is still readable on its own, and the session can be removed.
      expect((await uncached.listSessions({ appName: key.appName })).sessions[0]?.state).toEqual({ a: 1, 'app:b': 2 });
      await cached.deleteSession(key);
      expect(await reading.getSession(key)).toBeUndefined();
      expect(await cached.getSession(key)).toBeUndefined();
    }
  });

  it('a session or app state value that is not JSON', async () => {
    const { cached, uncached, key, keys, app } = await fixture();
    await client.hset(keys.session, encodeText('a'), '{broken');
    for (const service of [cached, uncached]) {
      expect((await failure(service.getSession(key))).kind).toBe('unreadable-data');
      // Listed with what can be read of it (the app's state), so that it hides no other session.
      const listed = await service.listSessions({ appName: key.appName });
      expect(listed.sessions.map((session) => [session.id, session.state])).toEqual([['s', { 'app:b': 2 }]]);
    }
    await client.hset(keys.session, encodeText('a'), '1');
    await client.hset(app.appState, encodeText('b'), 'NaN');
    expect((await failure(cached.getAppState({ appName: key.appName }))).kind).toBe('unreadable-data');
    expect((await failure(uncached.getSession(key))).kind).toBe('unreadable-data');
  });

  it('a session head changed outside adk-state: reads and appends fail typed, having written nothing', async () => {
    for (const damage of ['abc', '', '1.5', '-3', undefined]) {
      const { cached, key, keys, keyPrefix } = await fixture();
      // Read before the damage: this object's revision is the right one.
      const held = (await cached.getSession(key))!;
      const revision = await client.hget(keys.session, FIELD.revision);
      if (damage === undefined) await client.hdel(keys.session, FIELD.revision);
      else await client.hset(keys.session, FIELD.revision, damage);
      const label = `revision ${JSON.stringify(damage)}`;
      for (const service of [cached, new RedisSessionService({ client, keyPrefix, logCacheBytes: 0 })]) {
        for (const config of [undefined, { numRecentEvents: 1 }]) {
          const error = await failure(service.getSession({ ...key, config }));
          expect(error.kind, label).toBe('unreadable-data');
          expect(error.mayHaveApplied, label).toBe(false);
        }
        // Listed beside the others, without a revision: an append through it reads the head first.
        const listed = (await service.listSessions({ appName: key.appName })).sessions;
        expect(
          listed.map((session) => session.id),
          label,
        ).toEqual(['s']);
        expect(
          (await failure(service.appendEvent({ session: listed[0]!, event: createEvent({ author: 'a' }) }))).kind,
          label,
        ).toBe('unreadable-data');
      }
      // An append built on the right revision is neither taken as stored nor as stale.
      const append = await failure(
        cached.appendEvent({
          session: held,
          event: createEvent({ id: 'e2', author: 'a', actions: { stateDelta: { a: 2 } } }),
        }),
      );
      expect(append.kind, label).toBe('unreadable-data');
      expect(append.mayHaveApplied, label).toBe(false);
      expect(await client.llen(keys.events), label).toBe(1);
      expect(await client.hget(keys.session, encodeText('a')), label).toBe('1');
      // Put right, the session reads and takes appends again.
      await client.hset(keys.session, FIELD.revision, revision!);
      const again = (await cached.getSession(key))!;
      await cached.appendEvent({ session: again, event: createEvent({ id: 'e2', author: 'a' }) });
      expect((await cached.getSession(key))?.events.map((event) => event.id)).toEqual(['e1', 'e2']);
    }
  });

  it('a hash at a session key without a head is not a session that can be read or appended to', async () => {
    const { cached, key, keys } = await fixture();
    const held = (await cached.getSession(key))!;
    await client.del(keys.session);
    await client.hset(keys.session, encodeText('a'), '1');
    expect((await failure(cached.getSession(key))).kind).toBe('unreadable-data');
    const append = await failure(cached.appendEvent({ session: held, event: createEvent({ author: 'a' }) }));
    expect(append.kind).toBe('unreadable-data');
    expect(append.mayHaveApplied).toBe(false);
    expect(await client.llen(keys.events)).toBe(1);
  });

  it('a lastUpdateTime that is not a number fails reads; the next append writes a good one', async () => {
    const { cached, key, keys } = await fixture();
    const held = (await cached.getSession(key))!;
    for (const damage of ['nope', '']) {
      await client.hset(keys.session, FIELD.updated, damage);
      expect((await failure(cached.getSession(key))).kind).toBe('unreadable-data');
    }
    const event = createEvent({ id: 'e2', author: 'a' });
    await cached.appendEvent({ session: held, event });
    expect((await cached.getSession(key))?.lastUpdateTime).toBe(event.timestamp);
  });

  it('an event count that is not a number is taken from the log', async () => {
    const { cached, key, keys } = await fixture();
    const held = (await cached.getSession(key))!;
    await client.hset(keys.session, FIELD.count, 'xyz');
    await cached.appendEvent({ session: held, event: createEvent({ id: 'e2', author: 'a' }) });
    await cached.appendEvent({ session: held, event: createEvent({ id: 'e3', author: 'a' }) });
    expect(await client.hget(keys.session, FIELD.count)).toBe('3');
    expect((await cached.getSession(key))?.events.map((event) => event.id)).toEqual(['e1', 'e2', 'e3']);
  });

  it('a re-appended id whose recorded position is not in the log fails typed, and the log is left as it was', async () => {
    const { cached, key, keys } = await fixture();
    const held = (await cached.getSession(key))!;
    const entry = await client.lindex(keys.events, 0);
    for (const position of ['7', '-1', 'x']) {
      await client.hset(keys.eventIds, encodeText('e1'), position);
      const error = await failure(cached.appendEvent({ session: held, event: createEvent({ id: 'e1', author: 'b' }) }));
      expect(error.kind).toBe('unreadable-data');
      expect(error.mayHaveApplied).toBe(false);
      expect(await client.lrange(keys.events, 0, -1)).toEqual([entry]);
    }
  });

  it('an expiry entry that is not <user> NUL <session> is dropped by the purge, and writes go on', async () => {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const service = new RedisSessionService({ client, keyPrefix, expireAfterIdleSeconds: 3600 });
    const key = { appName: 'app', userId: 'u', sessionId: 's' };
    const session = await service.createSession(key);
    const { expiry } = sessionKeys(keyPrefix, 'app', 'u', 's');
    // Long past: the next write's purge meets it.
    await client.zadd(expiry, 1, 'no separator here');
    await service.appendEvent({ session, event: createEvent({ id: 'e1', author: 'a' }) });
    expect(await client.zscore(expiry, 'no separator here')).toBeNull();
    expect((await service.getSession(key))?.events.map((event) => event.id)).toEqual(['e1']);
  });
});

describe('the outbox protocol (one server, clusterProtocol) with outbox records changed outside the store', () => {
  const SHARDS = 4;

  async function fixture(drainIntervalMs = Number.POSITIVE_INFINITY) {
    const keyPrefix = `${inject('testPrefix')}-${randomUUID()}:`;
    const warnings: RedisStoreWarning[] = [];
    const make = outboxServices({ client: () => client, keyPrefix, shards: SHARDS, warnings });
    outboxed.push(make);
    const service = make({ drainIntervalMs });
    const key = { appName: 'app', userId: 'u', sessionId: 's' };
    const session = await service.createSession({ ...key, state: { 'app:a': 1 } });
    const shard = shardKeys(keyPrefix, 'app', shardOf('u', SHARDS), SHARDS);
    return { service, key, session, warnings, shard, app: appKeys(keyPrefix, 'app') };
  }

  /** An append with an app: key, then every read: none fails, and the append's value shows. */
  async function stillWorks(fixtureOf: Awaited<ReturnType<typeof fixture>>, value: number) {
    const { service, key, session } = fixtureOf;
    await service.appendEvent({
      session,
      event: createEvent({ author: 'a', actions: { stateDelta: { 'app:a': value } } }),
    });
    expect((await service.getSession(key))?.state).toEqual({ 'app:a': value });
    expect(await service.getAppState({ appName: key.appName })).toEqual({ a: value });
    expect((await service.listSessions({ appName: key.appName })).sessions).toHaveLength(1);
  }

  it('a pending entry that is not a delta is applied as nothing, with a warning; reads and writes go on', async () => {
    for (const delta of ['not json', '{"a":1}', '["odd"]', '[1,2]']) {
      const fixtureOf = await fixture();
      const { service, key, warnings, shard } = fixtureOf;
      // An entry above every position: pending, so the next read applies it.
      const position = String(Number(await client.hget(shard.outbox, FIELD.last)) + 1_000_000);
      await client.hset(shard.outbox, position, delta, FIELD.last, position);
      await client.zadd(shard.outbox + OUTBOX_INDEX_SUFFIX, position, position);
      expect((await service.getSession(key))?.state).toEqual({ 'app:a': 1 });
      expect(warnings.map((warning) => warning.code)).toContain('unreadable-outbox-entry');
      await stillWorks(fixtureOf, 2);
    }
  });

  it('outbox positions, marks and drain times that are not numbers are taken as none; reads and writes go on', async () => {
    const damages: Array<(at: Awaited<ReturnType<typeof fixture>>) => Promise<unknown>> = [
      ({ shard }) => client.hset(shard.outbox, FIELD.last, 'x', FIELD.known, 'y', FIELD.floor, 'z'),
      ({ app, shard }) => client.hset(app.marks, String(shard.shard), 'soon'),
      ({ app }) => client.hset(app.marks, FIELD.drained, 'never'),
    ];
    for (const [index, damage] of damages.entries()) {
      // Drains due at once, so that every read claims one (and reads the time of the last).
      const fixtureOf = await fixture(index === 2 ? 1 : undefined);
      await damage(fixtureOf);
      await stillWorks(fixtureOf, 10 + index);
      await stillWorks(fixtureOf, 20 + index);
    }
  });

  it('a mark that is not a position, read before any apply repairs it, is never handed to the shard: the writes after it are whole', async () => {
    for (const mark of ['soon', '1e5', '-3', ' 7', 'nan', 'inf', '12345678901234567', '']) {
      const { service, key, session, app, shard } = await fixture();
      await client.hset(app.marks, String(shard.shard), mark);
      // A read of the session reads the app slot's mark of its shard first.
      expect((await service.getSession(key))?.state).toEqual({ 'app:a': 1 });
      // A write without app: keys carries the mark it learned; so does one with them.
      for (const stateDelta of [{ n: 1 }, { 'app:a': 30 }]) {
        await service.appendEvent({ session, event: createEvent({ author: 'a', actions: { stateDelta } }) });
      }
      const read = await service.getSession(key);
      expect(read?.events).toHaveLength(2);
      expect(read?.state).toEqual({ n: 1, 'app:a': 30 });
      expect(await service.getAppState({ appName: key.appName })).toEqual({ a: 30 });
      expect((await service.listSessions({ appName: key.appName })).sessions).toHaveLength(1);
      expect(await client.hget(shard.outbox, FIELD.known)).toMatch(/^\d+$/);
    }
  });
});
