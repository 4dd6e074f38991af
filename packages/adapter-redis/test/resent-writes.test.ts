/**
 * A write sent again after its reply was lost (ioredis re-sends the commands
 * of a broken connection after reconnecting, unless `maxRetriesPerRequest` is
 * 0; a Cluster re-sends after redirections and lost connections) finds its own
 * write and succeeds: an append instead of being refused as stale, also after
 * other writes to the session, a create or an import instead of finding the
 * session "already there". An append retried by the caller with the same event
 * does too. Another event under the same id, or this event written again
 * since, still makes an append stale. On both protocols.
 */
import { randomUUID } from 'node:crypto';
import { createEvent, type Event, type Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisSessionService } from '../src/index.js';
import { FIELD, RECENT_WRITES, sessionKeys } from '../src/keys.js';
import { failingScript, proxyToSharedServer, quitShared, testEvent } from './support/index.js';

/** The same event again, as a caller that retries builds it: another object, the same id and content. */
const again = (event: Event): Event => createEvent(JSON.parse(JSON.stringify(event)));

/** Another event under the id of `event`: the same but for its state delta. */
const sameIdWith = (event: Event, stateDelta: Record<string, unknown>): Event =>
  createEvent({ ...JSON.parse(JSON.stringify(event)), actions: { ...event.actions, stateDelta } });

describe.each([
  ['direct', false],
  ['outbox', true],
] as const)('a write sent again (%s protocol)', (_name, clusterProtocol) => {
  const keyPrefix = `${inject('testPrefix')}-${randomUUID().slice(0, 8)}:`;
  let client: Redis;
  let service: RedisSessionService;
  beforeAll(() => {
    client = new Redis(inject('redisUrl'));
    service = new RedisSessionService({
      client,
      keyPrefix,
      clusterProtocol,
      shards: clusterProtocol ? 4 : 1,
      // No drain applies what waits in an outbox behind a test's back.
      drainIntervalMs: Number.POSITIVE_INFINITY,
    });
  });
  afterAll(async () => {
    await service.close();
    await quitShared(client);
  });

  /** The key of a session. */
  const keyOf = (session: Session) => ({ appName: session.appName, userId: session.userId, sessionId: session.id });
  /** The session stored under the key of `session`, read anew. */
  const load = async (session: Session): Promise<Session> => (await service.getSession(keyOf(session))) as Session;

  /** Two copies of one new session, as two callers (or one caller before and after a lost reply) hold it. */
  async function twoCopies(): Promise<[Session, Session]> {
    const key = { appName: `app-${randomUUID()}`, userId: 'ada', sessionId: 's1' };
    await service.createSession({ ...key, state: { n: 0 } });
    return [(await service.getSession(key)) as Session, (await service.getSession(key)) as Session];
  }

  it('that was applied already succeeds, and is stored once', async () => {
    const [first, retry] = await twoCopies();
    const event = testEvent({ n: 1, 'user:u': 1, 'app:a': 1 }, { text: 'hello' });
    await service.appendEvent({ session: first, event });
    await service.appendEvent({ session: retry, event: again(event) });
    const stored = await load(first);
    expect(stored.events.map((each) => each.id)).toEqual([event.id]);
    expect(stored.state).toEqual({ n: 1, 'user:u': 1, 'app:a': 1 });
    // The retrying copy is current: its next append goes through.
    await service.appendEvent({ session: retry, event: testEvent({ n: 2 }) });
    expect((await load(first)).state.n).toBe(2);
  });

  it('that was applied in place (an id written again, before the last event) succeeds too', async () => {
    const [session] = await twoCopies();
    const event = testEvent({ n: 1 }, { timestamp: 1_000 });
    await service.appendEvent({ session, event });
    await service.appendEvent({ session: await load(session), event: testEvent({ m: 1 }, { timestamp: 2_000 }) });
    const [first, retry] = [await load(session), await load(session)];
    const rewritten = sameIdWith(event, { n: 5 });
    await service.appendEvent({ session: first, event: rewritten });
    await service.appendEvent({ session: retry, event: again(rewritten) });
    const stored = await load(session);
    expect(stored.events.map((each) => each.id)).toEqual([event.id, stored.events[1]?.id]);
    expect(stored.state).toEqual({ n: 5, m: 1 });
  });

  it('whose first send stored the event but not its app: delta (the outbox apply failed) has the delta applied', async () => {
    const [first, retry] = await twoCopies();
    const broken = new RedisSessionService({
      client: failingScript(client, 'apply', 'read ECONNRESET'),
      keyPrefix,
      clusterProtocol,
      shards: clusterProtocol ? 4 : 1,
      drainIntervalMs: Number.POSITIVE_INFINITY,
    });
    const event = testEvent({ n: 1, 'app:x': 42 });
    // On the direct protocol there is no apply step: the first send succeeds whole.
    await broken.appendEvent({ session: first, event }).catch((error: unknown) => {
      expect(error).toMatchObject({ code: 'BACKEND_ERROR', mayHaveApplied: true });
    });
    await service.appendEvent({ session: retry, event: again(event) });
    // The app slot itself (no read of the session, which would apply what waits in the outbox).
    expect(await service.getAppState({ appName: first.appName })).toEqual({ x: 42 });
  });

  /**
   * `write` through a client with ioredis's defaults (the commands of a broken connection are sent again
   * once it reconnects), behind a proxy that holds what follows `marker`: the write reaches the server,
   * its reply is kept at the proxy until `applied()` sees it stored, and the connection is then cut.
   * Resolves with what the write resolved with.
   */
  async function resentByIoredis<T>(
    marker: string,
    write: (writer: RedisSessionService) => Promise<T>,
    applied: () => Promise<boolean>,
    warm: (writer: RedisSessionService) => Promise<unknown>,
  ): Promise<T> {
    const proxy = await proxyToSharedServer();
    const resending = new Redis(`redis://${proxy.address}`, { retryStrategy: () => 20 });
    resending.on('error', () => {});
    const writer = new RedisSessionService({
      client: resending,
      keyPrefix,
      clusterProtocol,
      shards: clusterProtocol ? 4 : 1,
    });
    try {
      // Load the script, so that the write goes as one EVALSHA.
      await warm(writer);
      proxy.hold(marker);
      const writing = write(writer);
      await proxy.untilHeld();
      proxy.release();
      proxy.pause();
      for (let wait = 0; wait < 200 && !(await applied()); wait++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(await applied()).toBe(true);
      proxy.drop();
      proxy.resume();
      const result = await writing;
      expect(proxy.stats.accepted).toBeGreaterThan(1);
      return result;
    } finally {
      await writer.close();
      resending.disconnect();
      await proxy.close();
    }
  }

  it('re-sent by ioredis itself, after the connection broke with the write applied and its reply on the way, a create, an append and an import succeed', async () => {
    // An append.
    const [session] = await twoCopies();
    const event = testEvent({ n: 1 }, { text: `resent-${randomUUID()}` });
    await resentByIoredis(
      event.id,
      async (writer) => writer.appendEvent({ session: (await writer.getSession(keyOf(session))) as Session, event }),
      async () => (await load(session)).events.length === 1,
      async (writer) => writer.appendEvent({ session: (await twoCopies())[0], event: testEvent({ n: 1 }) }),
    );
    const appended = await load(session);
    expect(appended.events.map((each) => each.id)).toEqual([event.id]);
    expect(appended.state).toEqual({ n: 1 });

    // A create, with user: and app: keys.
    const key = { appName: `app-${randomUUID()}`, userId: 'ada', sessionId: `resent-${randomUUID()}` };
    const created = await resentByIoredis(
      key.sessionId,
      (writer) => writer.createSession({ ...key, state: { own: 1, 'user:u': 2, 'app:a': 3 } }),
      async () => (await service.getSession(key)) !== undefined,
      (writer) => writer.createSession({ ...key, sessionId: `warm-${randomUUID()}` }),
    );
    expect(created.state).toEqual({ own: 1, 'user:u': 2, 'app:a': 3 });
    expect((await service.getSession(key))?.state).toEqual({ own: 1, 'user:u': 2, 'app:a': 3 });
    expect(await service.getAppState({ appName: key.appName })).toEqual({ a: 3 });

    // An import.
    const source = (await service.getSession(keyOf(appended))) as Session;
    const copy = { ...source, appName: `app-${randomUUID()}`, id: `resent-${randomUUID()}` };
    const imported = await resentByIoredis(
      copy.id,
      (writer) => writer.importSession(copy),
      async () => (await service.getSession(keyOf(copy))) !== undefined,
      (writer) => writer.importSession({ ...copy, id: `warm-${randomUUID()}` }),
    );
    expect(imported).toBe('imported');
    expect((await service.getSession(keyOf(copy)))?.events.map((each) => each.id)).toEqual([event.id]);
  });

  it('re-sent by ioredis itself after another writer appended to the session in between, an append succeeds and is stored once', async () => {
    const [session] = await twoCopies();
    const event = testEvent({ n: 1, 'app:a': 1 }, { text: `resent-${randomUUID()}` });
    const other = testEvent({ m: 1, 'app:b': 1 });
    let between = false;
    await resentByIoredis(
      event.id,
      async (writer) => writer.appendEvent({ session: (await writer.getSession(keyOf(session))) as Session, event }),
      async () => {
        if (between) return true;
        const now = await load(session);
        if (now.events.length !== 1) return false;
        // Another writer, while the first send's reply is held.
        await service.appendEvent({ session: now, event: other });
        between = true;
        return true;
      },
      async (writer) => writer.appendEvent({ session: (await twoCopies())[0], event: testEvent({ n: 1 }) }),
    );
    const stored = await load(session);
    expect(stored.events.map((each) => each.id)).toEqual([event.id, other.id]);
    expect(stored.state).toEqual({ n: 1, m: 1, 'app:a': 1, 'app:b': 1 });
  });

  it('is stale when another write came first, or another event holds the id', async () => {
    const [first, retry] = await twoCopies();
    const event = testEvent({ n: 1 });
    await service.appendEvent({ session: first, event });
    // Another event under the same id, where this one was written.
    const other = sameIdWith(event, { n: 9 });
    await expect(service.appendEvent({ session: retry, event: other })).rejects.toMatchObject({
      code: 'STALE_SESSION',
    });
    // The same id and content, and the same update time, but the one write since appended another event.
    const [third, late] = [await load(first), await load(first)];
    const last = third.events.at(-1) as Event;
    await service.appendEvent({ session: third, event: testEvent({ n: 3 }, { timestamp: last.timestamp }) });
    await expect(service.appendEvent({ session: late, event: again(last) })).rejects.toMatchObject({
      code: 'STALE_SESSION',
    });
    // The event, written by the write right after the copy, but written again in place since.
    const [fourth, behind] = [await load(first), await load(first)];
    const fresh = testEvent({ n: 4 });
    await service.appendEvent({ session: fourth, event: fresh });
    await service.appendEvent({ session: await load(first), event: sameIdWith(fresh, { n: 5 }) });
    await expect(service.appendEvent({ session: behind, event: again(fresh) })).rejects.toMatchObject({
      code: 'STALE_SESSION',
    });
    const stored = await load(first);
    expect(stored.events).toHaveLength(3);
    expect(stored.state.n).toBe(5);
  });

  it('that was applied, with other writes after it, succeeds, writes nothing, and leaves the copy behind the session', async () => {
    const [first, retry] = await twoCopies();
    const event = testEvent({ n: 1, 'user:u': 1, 'app:a': 1 });
    await service.appendEvent({ session: first, event });
    await service.appendEvent({ session: first, event: testEvent({ n: 2, 'user:u': 2, 'app:a': 2 }) });
    await service.appendEvent({ session: first, event: testEvent({ m: 1 }) });
    await service.appendEvent({ session: retry, event: again(event) });
    const stored = await load(first);
    expect(stored.events.map((each) => each.id)).toEqual(first.events.map((each) => each.id));
    expect(stored.state).toEqual({ n: 2, m: 1, 'user:u': 2, 'app:a': 2 });
    // The retrying copy holds the session as that write left it: its next append is stale.
    await expect(service.appendEvent({ session: retry, event: testEvent({ n: 9 }) })).rejects.toMatchObject({
      code: 'STALE_SESSION',
    });
  });

  it(`that was applied, with up to ${RECENT_WRITES - 1} writes after it, succeeds; with more, it is stale`, async () => {
    const [first, retry] = await twoCopies();
    const late = await load(first);
    const event = testEvent({ n: 1 });
    await service.appendEvent({ session: first, event });
    for (let write = 1; write < RECENT_WRITES; write++) {
      await service.appendEvent({ session: first, event: testEvent({ n: write + 1 }) });
    }
    await service.appendEvent({ session: retry, event: again(event) });
    await service.appendEvent({ session: first, event: testEvent({ m: 1 }) });
    await expect(service.appendEvent({ session: late, event: again(event) })).rejects.toMatchObject({
      code: 'STALE_SESSION',
    });
    expect((await load(first)).state).toEqual({ n: RECENT_WRITES, m: 1 });
  });

  it('of an event stored without the record of its write (an earlier version) succeeds only as the last write', async () => {
    const [first, retry] = await twoCopies();
    const late = await load(first);
    const event = testEvent({ n: 1 });
    await service.appendEvent({ session: first, event });
    const keys = sessionKeys(keyPrefix, first.appName, first.userId, first.id, clusterProtocol ? 4 : 1);
    const records = Array.from({ length: RECENT_WRITES }, (_, slot) => `${FIELD.recentWrite}${slot}`);
    expect(await client.hdel(keys.eventIds, ...records)).toBe(1);
    await service.appendEvent({ session: retry, event: again(event) });
    await service.appendEvent({ session: first, event: testEvent({ n: 2 }) });
    await expect(service.appendEvent({ session: late, event: again(event) })).rejects.toMatchObject({
      code: 'STALE_SESSION',
    });
    expect((await load(first)).state.n).toBe(2);
  });
});
