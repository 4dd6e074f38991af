import { InMemorySessionService, type ListSessionsRequest } from '@google/adk';
import { describe, expect, it } from 'vitest';
import { pageInfo, toListQuery } from '../src/listing.js';
import { compareSessions, utf16OrderKey } from '../src/store-kit.js';

/** Applies a store query to an ordered list of ids, as any store must. */
function window(ids: string[], request: ListSessionsRequest): string[] {
  const query = toListQuery(request);
  const end = query.limit === undefined ? undefined : query.offset + query.limit;
  return ids.slice(query.offset, end);
}

describe('listing metadata', () => {
  it("matches @google/adk 2.0.0's InMemorySessionService on every combination of limit, offset and page", async () => {
    for (const total of [0, 1, 5, 7]) {
      const adk = new InMemorySessionService();
      const ids = Array.from({ length: total }, (_, i) => `s${i}`);
      for (const sessionId of ids) await adk.createSession({ appName: 'app', userId: 'u', sessionId });
      // Same creation millisecond or not, ADK breaks ties by id: order the reference by (time, id) too.
      const reference = (await adk.listSessions({ appName: 'app', userId: 'u', order: 'asc' })).sessions.map(
        (s) => s.id,
      );
      for (const limit of [undefined, 0, 1, 2, 3, 10]) {
        for (const offset of [undefined, 0, 1, 4, 9]) {
          for (const page of [undefined, 1, 2, 4]) {
            const request: ListSessionsRequest = { appName: 'app', userId: 'u', order: 'asc' };
            if (limit !== undefined) request.limit = limit;
            if (offset !== undefined) request.offset = offset;
            if (page !== undefined) request.page = page;
            const expected = await adk.listSessions(request);
            const label = JSON.stringify({ total, limit, offset, page });
            expect({ ...pageInfo(request, total) }, label).toEqual({
              page: expected.page,
              limit: expected.limit,
              totalItems: expected.totalItems,
              totalPages: expected.totalPages,
            });
            expect(window(reference, request), label).toEqual(expected.sessions.map((s) => s.id));
          }
        }
      }
    }
  });

  it('orders by lastUpdateTime, ties by id in code-unit order', () => {
    const heads = [
      { id: 'b', lastUpdateTime: 2 },
      { id: 'a', lastUpdateTime: 2 },
      { id: 'c', lastUpdateTime: 1 },
      { id: 'B', lastUpdateTime: 2 },
    ];
    expect([...heads].sort(compareSessions('asc')).map((h) => h.id)).toEqual(['c', 'B', 'a', 'b']);
    expect([...heads].sort(compareSessions('desc')).map((h) => h.id)).toEqual(['B', 'a', 'b', 'c']);
  });

  it('defaults to ascending order and treats page as needing limit', () => {
    expect(toListQuery({ appName: 'a' })).toEqual({ appName: 'a', order: 'asc', offset: 0 });
    expect(toListQuery({ appName: 'a', page: 3, offset: 2 })).toEqual({ appName: 'a', order: 'asc', offset: 2 });
    expect(toListQuery({ appName: 'a', page: 3, limit: 5 })).toEqual({
      appName: 'a',
      order: 'asc',
      offset: 10,
      limit: 5,
    });
  });
});

describe('utf16OrderKey', () => {
  it('orders by UTF-8 bytes (code points) exactly as JavaScript orders the strings, lone surrogates included', () => {
    const texts = [
      '',
      'a',
      'b',
      'ab',
      '\u007f',
      '\u0080',
      '\ud7ff',
      '\ud800',
      '\udbff\udfff',
      '\udc00',
      '\ue000',
      '\uffff',
      '\ud83d\ude00',
      'z\ud800',
      'z',
    ];
    const utf8 = (text: string) => Buffer.from(utf16OrderKey(text), 'utf8');
    const byKey = [...texts].sort((x, y) => Buffer.compare(utf8(x), utf8(y)));
    expect(byKey).toEqual([...texts].sort());
    expect(utf16OrderKey('plain-id_42')).toBe('plain-id_42');
    expect(new Set(texts.map(utf16OrderKey)).size).toBe(texts.length);
  });
});
