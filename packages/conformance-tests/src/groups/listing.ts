/** Listing and pagination, with @google/adk 2.0.0's metadata rules. */
import type { ListSessionsResponse, Session } from '@google/adk';
import { expect } from 'vitest';
import { expectCode, type Group, plain, put } from '../kit.js';
import type { ConformanceService } from '../target.js';

/** Sessions with known update times: u1 owns s1..s5, u2 owns t1, t2; s2 and s4 tie at 4,000. */
async function seed(service: ConformanceService, appName: string): Promise<void> {
  const plan: Array<[string, string, number]> = [
    ['u1', 's1', 5_000],
    ['u1', 's2', 4_000],
    ['u1', 's3', 1_000],
    ['u1', 's4', 4_000],
    ['u1', 's5', 2_000],
    ['u2', 't1', 3_000],
    ['u2', 't2', 6_000],
  ];
  for (const [userId, sessionId, timestamp] of plan) {
    const session = await service.createSession({ appName, userId, sessionId, state: { own: sessionId } });
    await put(service, session, { [`user:${userId}`]: true }, { timestamp });
  }
}

const names = (sessions: Session[]) => sessions.map((session) => session.id);

/** A response reduced to what these tests compare: the ids in order and the metadata. */
function summary(response: ListSessionsResponse) {
  const { page, limit, totalItems, totalPages } = response;
  return { ids: names(response.sessions), page, limit, totalItems, totalPages };
}

export const listing: Group = {
  title: 'listing and pagination',
  define({ test }) {
    test("no parameters, or only an order, list every session of the user as page 1: oldest update first ('asc' too), newest first with 'desc', ties by id", async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      const oldestFirst = ['s3', 's5', 's2', 's4', 's1'];
      const cases = [
        [undefined, oldestFirst],
        ['asc', oldestFirst],
        ['desc', ['s1', 's2', 's4', 's5', 's3']],
      ] as const;
      for (const [order, ids] of cases) {
        const response = await service.listSessions({ appName, userId: 'u1', ...(order ? { order } : {}) });
        expect(summary(response), String(order)).toEqual({ ids, page: 1, limit: 5, totalItems: 5, totalPages: 1 });
      }
    });

    test("userId omitted lists every user of the app; other apps never appear, nor the same user's sessions there", async (kit) => {
      const service = await kit.service();
      const appName = kit.app('app');
      await seed(service, appName);
      await service.createSession({ appName: `${appName}2`, userId: 'u1', sessionId: 'elsewhere' });
      await service.createSession({ appName: `${appName}2`, userId: 'u2', sessionId: 'elsewhere2' });
      const response = await service.listSessions({ appName });
      expect(names(response.sessions)).toEqual(['s3', 's5', 't1', 's2', 's4', 's1', 't2']);
      expect(response.totalItems).toBe(7);
      expect(response.sessions.map((s) => s.userId)).toEqual(['u1', 'u1', 'u2', 'u1', 'u1', 'u1', 'u2']);
      const mine = await service.listSessions({ appName, userId: 'u1' });
      expect(names(mine.sessions)).toEqual(['s3', 's5', 's2', 's4', 's1']);
      expect(mine.sessions.every((each) => each.appName === appName && each.userId === 'u1')).toBe(true);
      const other = await service.listSessions({ appName: `${appName}2`, userId: 'u1' });
      expect(names(other.sessions)).toEqual(['elsewhere']);
    });

    test('order desc lists newest first, ties still by id ascending', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      const response = await service.listSessions({ appName, userId: 'u1', order: 'desc' });
      expect(names(response.sessions)).toEqual(['s1', 's2', 's4', 's5', 's3']);
    });

    test('each listed session has its combined state and no events', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      const t1 = await kit.reload({ appName, userId: 'u2', id: 't1' });
      await put(service, t1, { 'app:shared': 1 }, { timestamp: 3_000 });
      const response = await service.listSessions({ appName });
      const listedT1 = response.sessions.find((s) => s.id === 't1');
      const s1 = response.sessions.find((s) => s.id === 's1');
      expect(plain(listedT1?.state)).toEqual({ own: 't1', 'user:u2': true, 'app:shared': 1 });
      expect(plain(s1?.state)).toEqual({ own: 's1', 'user:u1': true, 'app:shared': 1 });
      expect(listedT1?.events).toEqual([]);
      expect(s1?.lastUpdateTime).toBe(5_000);
    });

    test('limit and page give that page with page, limit, totalItems and totalPages; a limit alone, page 1', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      const first = await service.listSessions({ appName, userId: 'u1', limit: 3 });
      expect(summary(first)).toEqual({ ids: ['s3', 's5', 's2'], page: 1, limit: 3, totalItems: 5, totalPages: 2 });
      const page2 = await service.listSessions({ appName, userId: 'u1', limit: 2, page: 2 });
      expect(summary(page2)).toEqual({
        ids: ['s2', 's4'],
        page: 2,
        limit: 2,
        totalItems: 5,
        totalPages: 3,
      });
      const page3 = await service.listSessions({ appName, userId: 'u1', limit: 2, page: 3 });
      expect(names(page3.sessions)).toEqual(['s1']);
      const beyond = await service.listSessions({ appName, userId: 'u1', limit: 2, page: 9 });
      expect(names(beyond.sessions)).toEqual([]);
      expect(beyond.page).toBe(9);
      expect(beyond.totalPages).toBe(3);
    });

    test('page wins over offset', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      // ADK 2.0.0's own listSessions reads page first and ignores offset when both are given.
      const response = await service.listSessions({ appName, userId: 'u1', limit: 2, page: 1, offset: 3 });
      expect(names(response.sessions)).toEqual(['s3', 's5']);
      expect(response.page).toBe(1);
    });

    test('limit with offset starts at the offset and reports the page it falls in', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      const response = await service.listSessions({ appName, userId: 'u1', limit: 2, offset: 3 });
      expect(summary(response)).toEqual({
        ids: ['s4', 's1'],
        page: 2,
        limit: 2,
        totalItems: 5,
        totalPages: 3,
      });
    });

    test('limit 0 gives no sessions and totalPages 0', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      const response = await service.listSessions({ appName, userId: 'u1', limit: 0 });
      expect(response).toEqual({ sessions: [], page: 1, limit: 0, totalItems: 5, totalPages: 0 });
      const paged = await service.listSessions({ appName, userId: 'u1', limit: 0, page: 4 });
      expect(paged).toEqual({ sessions: [], page: 4, limit: 0, totalItems: 5, totalPages: 0 });
    });

    test('offset without limit skips sessions and still reports page 1 of everything', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      // ADK 2.0.0 reports a list without limit as one page of everything, whatever offset skipped.
      const response = await service.listSessions({ appName, userId: 'u1', offset: 3 });
      expect(summary(response)).toEqual({
        ids: ['s4', 's1'],
        page: 1,
        limit: 5,
        totalItems: 5,
        totalPages: 1,
      });
      const pageOnly = await service.listSessions({ appName, userId: 'u1', page: 2 });
      expect(names(pageOnly.sessions)).toEqual(['s3', 's5', 's2', 's4', 's1']);
      expect(pageOnly.page).toBe(1);
    });

    test('an app or user without sessions gives an empty first page', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      expect(await service.listSessions({ appName })).toEqual({
        sessions: [],
        page: 1,
        limit: 0,
        totalItems: 0,
        totalPages: 0,
      });
      expect(await service.listSessions({ appName, limit: 10 })).toEqual({
        sessions: [],
        page: 1,
        limit: 10,
        totalItems: 0,
        totalPages: 0,
      });
      await seed(service, appName);
      // An offset past the end: no sessions, the page the offset falls in, the true totals.
      expect(await service.listSessions({ appName, userId: 'u1', limit: 2, offset: 10 })).toEqual({
        sessions: [],
        page: 6,
        limit: 2,
        totalItems: 5,
        totalPages: 3,
      });
      expect(await service.listSessions({ appName, userId: 'nobody', limit: 10, offset: 20 })).toEqual({
        sessions: [],
        page: 3,
        limit: 10,
        totalItems: 0,
        totalPages: 0,
      });
    });

    test("userId '' is an InvalidArgumentError, never all users", async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      await expectCode(service.listSessions({ appName, userId: '' }), 'INVALID_ARGUMENT', 'InvalidArgumentError');
      await expectCode(service.listSessions({ appName: '' }), 'INVALID_ARGUMENT');
    });

    test('negative or fractional limit, offset or page are InvalidArgumentErrors', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      for (const bad of [
        { limit: -1 },
        { limit: 1.5 },
        { offset: -2 },
        { page: 0, limit: 2 },
        { page: 1.5, limit: 2 },
      ]) {
        await expectCode(service.listSessions({ appName, ...bad }), 'INVALID_ARGUMENT');
      }
    });

    test('an update moves a session in the order', async (kit) => {
      const service = await kit.service();
      const appName = kit.app();
      await seed(service, appName);
      const s3 = await kit.reload({ appName, userId: 'u1', id: 's3' });
      await put(service, s3, {}, { timestamp: 9_000 });
      const response = await service.listSessions({ appName, userId: 'u1', limit: 2, page: 3 });
      expect(names(response.sessions)).toEqual(['s3']);
    });
  },
};
