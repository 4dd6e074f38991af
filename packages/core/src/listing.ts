/**
 * Listing rules: validation of listSessions parameters, the window a store
 * must read, and the pagination metadata, exactly as `@google/adk` 2.0.0's
 * InMemorySessionService computes them.
 */
import type { ListSessionsRequest } from '@google/adk';
import { InvalidArgumentError } from './errors.js';
import { assertNonEmptyString } from './requests.js';

/** What a store must read for one listSessions call. */
export interface ListQuery {
  appName: string;
  /** Only this user's sessions; every user's when undefined. */
  userId?: string;
  /** By `lastUpdateTime`, ties by `id` ascending. */
  order: 'asc' | 'desc';
  /** Sessions to skip (after ordering). */
  offset: number;
  /** Sessions to return at most; all remaining ones when undefined. */
  limit?: number;
}

/** The metadata of a listSessions response. */
export interface PageInfo {
  page: number;
  limit: number;
  totalItems: number;
  totalPages: number;
}

function assertCount(name: string, value: unknown, minimum: number): asserts value is number | undefined {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < minimum) {
    throw new InvalidArgumentError(name, `must be an integer >= ${minimum}, got ${String(value)}`);
  }
}

/** Validates a listSessions request and turns it into a store query. */
export function toListQuery(request: ListSessionsRequest): ListQuery {
  if (typeof request !== 'object' || request === null) {
    throw new InvalidArgumentError('request', 'listSessions needs { appName, userId? }');
  }
  assertNonEmptyString('appName', request.appName);
  if (request.userId !== undefined) assertNonEmptyString('userId', request.userId);
  assertCount('limit', request.limit, 0);
  assertCount('offset', request.offset, 0);
  assertCount('page', request.page, 1);
  if (request.order !== undefined && request.order !== 'asc' && request.order !== 'desc') {
    throw new InvalidArgumentError('order', `must be 'asc' or 'desc', got ${String(request.order)}`);
  }
  const { limit, page, offset } = request;
  const start = limit !== undefined && page !== undefined ? (page - 1) * limit : (offset ?? 0);
  return {
    appName: request.appName,
    ...(request.userId !== undefined ? { userId: request.userId } : {}),
    order: request.order ?? 'asc',
    offset: start,
    ...(limit !== undefined ? { limit } : {}),
  };
}

/** The pagination metadata for a query, given how many sessions match in all. */
export function pageInfo(request: ListSessionsRequest, totalItems: number): PageInfo {
  const { limit, page, offset } = request;
  if (limit === undefined) {
    return { page: 1, limit: totalItems, totalItems, totalPages: totalItems === 0 ? 0 : 1 };
  }
  const totalPages = limit === 0 ? 0 : Math.ceil(totalItems / limit);
  let effectivePage: number;
  if (page !== undefined) effectivePage = page;
  else effectivePage = limit === 0 ? 1 : Math.floor((offset ?? 0) / limit) + 1;
  return { page: effectivePage, limit, totalItems, totalPages };
}

/**
 * A string whose code-point order, and so its UTF-8 byte order (the order of
 * MongoDB, Firestore and most databases), is the UTF-16 code-unit order of
 * `text`, the order of JavaScript's `<` that {@link compareSessions} uses for
 * ties. Each code unit becomes one code point: those below U+D800 stay, the
 * rest move up past the surrogate range (+0x800), so lone surrogates need no
 * special case and most ids come back unchanged.
 */
export function utf16OrderKey(text: string): string {
  let key = '';
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    key += unit < 0xd800 ? text[i] : String.fromCodePoint(unit + 0x800);
  }
  return key;
}

/** Orders session heads as every store must: by lastUpdateTime, ties by id ascending. */
export function compareSessions(order: 'asc' | 'desc') {
  return (a: { id: string; lastUpdateTime: number }, b: { id: string; lastUpdateTime: number }): number => {
    const byTime = order === 'asc' ? a.lastUpdateTime - b.lastUpdateTime : b.lastUpdateTime - a.lastUpdateTime;
    if (byTime !== 0) return byTime;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  };
}

/** Orders session keys (as `SessionStore.listSessionKeys` gives them) by user, then id, as JavaScript compares strings. */
export function compareSessionKeys(
  a: { userId: string; sessionId: string },
  b: { userId: string; sessionId: string },
): number {
  if (a.userId !== b.userId) return a.userId < b.userId ? -1 : 1;
  return a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0;
}
