/**
 * Concurrent writers on separate clients (separate connection pools, as two
 * processes would have): exactly one winner per revision, and no event lost,
 * duplicated or reordered.
 */
import type { Session } from '@google/adk';
import { afterAll, describe, expect, it } from 'vitest';
import type { MongoSessionService } from '../src/index.js';
import { dropDatabase, event, openService, uniqueApp, uniqueDbName } from './support.js';

const dbName = uniqueDbName('concurrency');
const opened: MongoSessionService[] = [];

function service(options: Parameters<typeof openService>[1] = {}): MongoSessionService {
  const made = openService(dbName, options);
  opened.push(made);
  return made;
}

afterAll(async () => {
  for (const made of opened) await made.close();
  await dropDatabase(dbName);
});

describe('concurrent appends from separate clients', () => {
  it('from the same revision, exactly one of two clients wins each round and the log holds every winner once', async () => {
    const first = service();
    const second = service();
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    await first.createSession(key);
    const winners: string[] = [];
    for (let round = 0; round < 20; round++) {
      const [a, b] = (await Promise.all([first.getSession(key), second.getSession(key)])) as [Session, Session];
      const results = await Promise.allSettled([
        first.appendEvent({ session: a, event: event({ round, who: 'first' }) }),
        second.appendEvent({ session: b, event: event({ round, who: 'second' }) }),
      ]);
      const won = results.filter((result) => result.status === 'fulfilled');
      const lost = results.filter((result) => result.status === 'rejected');
      expect(won, `round ${round}`).toHaveLength(1);
      expect((lost[0] as PromiseRejectedResult).reason.code, `round ${round}`).toBe('STALE_SESSION');
      winners.push((won[0] as PromiseFulfilledResult<{ id: string }>).value.id);
    }
    const loaded = await first.getSession(key);
    expect(loaded?.events.map((e) => e.id)).toEqual(winners);
    expect(loaded?.state.round).toBe(19);
  });

  it("with onStale: 'reload', two clients appending in loops lose, duplicate and reorder nothing", async () => {
    const first = service({ onStale: 'reload' });
    const second = service({ onStale: 'reload' });
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    await first.createSession(key);
    const written: Record<string, string[]> = { first: [], second: [] };
    await Promise.all(
      (
        [
          ['first', first],
          ['second', second],
        ] as const
      ).map(async ([name, writer]) => {
        const session = (await writer.getSession(key)) as Session;
        for (let i = 0; i < 15; i++) {
          written[name]?.push((await writer.appendEvent({ session, event: event({ [name]: i, 'user:total': i }) })).id);
        }
      }),
    );
    const loaded = await first.getSession(key);
    const stored = loaded?.events.map((e) => e.id) ?? [];
    expect(stored).toHaveLength(30);
    expect(new Set(stored).size).toBe(30);
    for (const name of ['first', 'second']) {
      expect(stored.filter((id) => written[name]?.includes(id))).toEqual(written[name]);
    }
    expect(loaded?.state.first).toBe(14);
    expect(loaded?.state.second).toBe(14);
  });

  it('of concurrent creations of one key from two clients, exactly one succeeds', async () => {
    const first = service();
    const second = service();
    const appName = uniqueApp();
    const attempts = Array.from({ length: 6 }, (_, i) =>
      (i % 2 === 0 ? first : second).createSession({
        appName,
        userId: 'u1',
        sessionId: 's1',
        state: { by: i, 'user:n': i },
      }),
    );
    const results = await Promise.allSettled(attempts);
    const created = results.filter((result) => result.status === 'fulfilled');
    expect(created).toHaveLength(1);
    for (const result of results) {
      if (result.status === 'rejected') expect(result.reason.code).toBe('ALREADY_EXISTS');
    }
    const winner = (created[0] as PromiseFulfilledResult<Session>).value;
    const loaded = await second.getSession({ appName, userId: 'u1', sessionId: 's1' });
    expect(loaded?.state).toEqual(winner.state);
    expect(await first.getUserState({ appName, userId: 'u1' })).toEqual({ n: winner.state.by });
  });

  it('a delete racing appends leaves either the whole session or nothing', async () => {
    const writer = service();
    const deleter = service();
    const appName = uniqueApp();
    const key = { appName, userId: 'u1', sessionId: 's1' };
    const session = await writer.createSession(key);
    const appending = (async () => {
      for (let i = 0; i < 10; i++) {
        try {
          await writer.appendEvent({ session, event: event({ i }) });
        } catch (error) {
          return (error as { code?: string }).code;
        }
      }
      return 'done';
    })();
    await deleter.deleteSession(key);
    const outcome = await appending;
    expect(['SESSION_NOT_FOUND', 'done']).toContain(outcome);
    const after = await deleter.getSession(key);
    if (outcome === 'SESSION_NOT_FOUND') expect(after).toBeUndefined();
    const recreated = await deleter.createSession({ ...key, sessionId: 's2' });
    expect(recreated.events).toEqual([]);
  });
});
