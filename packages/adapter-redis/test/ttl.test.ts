/**
 * Optional expiry on either clock: with `expireAfterIdleSeconds`, a session
 * and its events expire that long after their last create or append; with
 * `expireAfterCreateSeconds`, that long after the create, whatever follows.
 * User and app state stay, and the listing indexes forget the expired session.
 */
import { randomUUID } from 'node:crypto';
import type { Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { sessionKeys } from '../src/keys.js';
import { testEvent } from './support/index.js';

const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;

const event = (stateDelta: Record<string, unknown>) => testEvent(stateDelta);

describe('session time to live', () => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await client.quit();
  });

  /** The server's clock in milliseconds (expiry times are the server's). */
  async function serverTime(): Promise<number> {
    const [seconds, micros] = await client.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  /** A session made with a one-hour time to live on `clock`, its keys, and its expiry, checked against the server's clock. */
  async function createHourLong(clock: { expireAfterIdleSeconds: number } | { expireAfterCreateSeconds: number }) {
    const service = new RedisSessionService({ client, keyPrefix, ...clock });
    const appName = `app-${randomUUID()}`;
    const keys = sessionKeys(keyPrefix, appName, 'u1', 's1', 1);
    const before = await serverTime();
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { 'user:a': 1 } });
    const after = await serverTime();
    const created = Number(await client.call('pexpiretime', keys.session));
    expect(created).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(created).toBeLessThanOrEqual(after + 3_600_000);
    return { service, session, keys, created, after };
  }

  it('gives the session, its log and its id map one expiry, moved forward by each append; buckets never expire', async () => {
    const { service, session, keys, created, after } = await createHourLong({ expireAfterIdleSeconds: 3600 });
    await service.appendEvent({ session, event: event({ n: 1, 'app:b': 2 }) });
    const touched = Number(await client.call('pexpiretime', keys.session));
    expect(touched).toBeGreaterThanOrEqual(created);
    expect(touched).toBeGreaterThanOrEqual(after + 3_600_000);
    expect(Number(await client.call('pexpiretime', keys.events))).toBe(touched);
    expect(Number(await client.call('pexpiretime', keys.eventIds))).toBe(touched);
    expect(Number(await client.zscore(keys.expiry, keys.expiryMember))).toBe(touched);
    expect(await client.pttl(keys.userState)).toBe(-1);
    expect(await client.pttl(keys.app.appState)).toBe(-1);
    expect(await client.pttl(keys.shardIndex)).toBe(-1);

    const plain = new RedisSessionService({ client, keyPrefix });
    await plain.createSession({ appName: session.appName, userId: 'u1', sessionId: 'forever' });
    expect(await client.pttl(sessionKeys(keyPrefix, session.appName, 'u1', 'forever', 1).session)).toBe(-1);
  });

  it('an idle session expires with its events; user and app state stay; listings forget it', async () => {
    const short = new RedisSessionService({ client, keyPrefix, expireAfterIdleSeconds: 0.3 });
    const long = new RedisSessionService({ client, keyPrefix, expireAfterIdleSeconds: 3600 });
    const appName = `app-${randomUUID()}`;
    const idle = await short.createSession({ appName, userId: 'u1', sessionId: 's1', state: { own: 1 } });
    await short.appendEvent({ session: idle, event: event({ n: 1, 'user:kept': true, 'app:kept': true }) });
    await long.createSession({ appName, userId: 'u1', sessionId: 's2' });
    await long.createSession({ appName, userId: 'u2', sessionId: 's3' });

    const keys = sessionKeys(keyPrefix, appName, 'u1', 's1', 1);
    for (
      let attempt = 0;
      attempt < 500 && (await client.exists(keys.session, keys.events, keys.eventIds)) > 0;
      attempt++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await client.exists(keys.session, keys.events, keys.eventIds)).toBe(0);

    expect(await long.getSession({ appName, userId: 'u1', sessionId: 's1' })).toBeUndefined();
    const listed = await long.listSessions({ appName });
    expect(listed.sessions.map((session) => session.id).sort()).toEqual(['s2', 's3']);
    expect(listed.totalItems).toBe(2);
    const mine = await long.listSessions({ appName, userId: 'u1', limit: 1 });
    expect(mine.sessions.map((session) => session.id)).toEqual(['s2']);
    expect(mine.totalItems).toBe(1);
    expect(await client.zscore(keys.expiry, keys.expiryMember)).toBeNull();
    expect(await long.getUserState({ appName, userId: 'u1' })).toEqual({ kept: true });
    expect(await long.getAppState({ appName })).toEqual({ kept: true });

    const error = await short.appendEvent({ session: idle, event: event({ n: 2 }) }).catch((caught) => caught);
    expect((error as { code?: string }).code).toBe('SESSION_NOT_FOUND');
    const again = await short.createSession({ appName, userId: 'u1', sessionId: 's1' });
    expect(again.events).toEqual([]);
    expect(again.state).toEqual({ 'user:kept': true, 'app:kept': true });
  });

  it('on the creation clock, appends keep the expiry the session got when it was created, and give it to the log', async () => {
    const { service, session, keys, created } = await createHourLong({ expireAfterCreateSeconds: 3600 });
    // Appends later than the creation: an idle clock would move the expiry past `created`.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const appended = await service.appendEvent({ session, event: event({ n: 1, 'app:b': 2 }) });
    await service.appendEvent({ session, event: event({ n: 2 }) });
    expect(appended.id).toBeTruthy();
    expect(Number(await client.call('pexpiretime', keys.session))).toBe(created);
    expect(Number(await client.call('pexpiretime', keys.events))).toBe(created);
    expect(Number(await client.call('pexpiretime', keys.eventIds))).toBe(created);
    expect(Number(await client.zscore(keys.expiry, keys.expiryMember))).toBe(created);
    expect(await client.pttl(keys.userState)).toBe(-1);
  });

  it('the first append through a service without a time to live gives the log and id map it creates the expiry the session has', async () => {
    const { session, keys, created } = await createHourLong({ expireAfterIdleSeconds: 3600 });
    const plain = new RedisSessionService({ client, keyPrefix });
    const held = (await plain.getSession({ appName: session.appName, userId: 'u1', sessionId: 's1' })) as Session;
    await plain.appendEvent({ session: held, event: event({ n: 1 }) });
    await plain.appendEvent({ session: held, event: event({ n: 2 }) });
    expect(Number(await client.call('pexpiretime', keys.session))).toBe(created);
    expect(Number(await client.call('pexpiretime', keys.events))).toBe(created);
    expect(Number(await client.call('pexpiretime', keys.eventIds))).toBe(created);

    // A session without an expiry keeps none.
    const forever = await plain.createSession({ appName: session.appName, userId: 'u1', sessionId: 'forever' });
    await plain.appendEvent({ session: forever, event: event({ n: 1 }) });
    const foreverKeys = sessionKeys(keyPrefix, session.appName, 'u1', 'forever', 1);
    expect(await client.pttl(foreverKeys.events)).toBe(-1);
    expect(await client.pttl(foreverKeys.eventIds)).toBe(-1);
  });

  it('a session on the creation clock expires on time although it is appended to all along', async () => {
    const service = new RedisSessionService({ client, keyPrefix, expireAfterCreateSeconds: 0.4 });
    const appName = `app-${randomUUID()}`;
    const session = await service.createSession({ appName, userId: 'u1', sessionId: 's1', state: { own: 1 } });
    const keys = sessionKeys(keyPrefix, appName, 'u1', 's1', 1);
    let refused: unknown;
    for (let n = 0; n < 1000 && refused === undefined; n++) {
      refused = await service.appendEvent({ session, event: event({ n, 'user:kept': n }) }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      if (refused === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect((refused as { code?: string }).code).toBe('SESSION_NOT_FOUND');
    expect(await client.exists(keys.session, keys.events, keys.eventIds)).toBe(0);
    expect(await service.getSession({ appName, userId: 'u1', sessionId: 's1' })).toBeUndefined();
    expect((await service.listSessions({ appName })).totalItems).toBe(0);
    expect(Object.keys(await service.getUserState({ appName, userId: 'u1' }))).toEqual(['kept']);
  });
});
