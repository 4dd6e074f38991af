/**
 * `adk-state inspect`: the sessions of an app as a table, one session's state
 * by scope and its timeline, as text, JSON, or a small page on 127.0.0.1.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BaseSessionService, Session } from '@google/adk';
import { INSPECTOR_PAGE } from './inspect-page.js';
import { buildTimeline, formatSessionTable, formatTimeline, type Timeline } from './timeline.js';

/** What to look at. */
export interface InspectQuery {
  appName: string;
  /** Every user of the app when absent (listing only). */
  userId?: string;
  /** One session's timeline (needs `userId`). */
  sessionId?: string;
}

/** The sessions of an app (or of one user), newest first. */
export async function listForInspection(service: BaseSessionService, query: InspectQuery): Promise<Session[]> {
  const { sessions } = await service.listSessions({
    appName: query.appName,
    ...(query.userId === undefined ? {} : { userId: query.userId }),
  });
  return [...sessions].sort((a, b) => b.lastUpdateTime - a.lastUpdateTime);
}

/** One session's timeline; `undefined` when the session is not stored. */
export async function timelineOf(
  service: BaseSessionService,
  query: Required<InspectQuery>,
): Promise<Timeline | undefined> {
  const session = await service.getSession({
    appName: query.appName,
    userId: query.userId,
    sessionId: query.sessionId,
  });
  return session ? buildTimeline(session) : undefined;
}

/** What `adk-state inspect` prints for a query: a table, or a timeline (text or JSON). */
export async function inspectText(service: BaseSessionService, query: InspectQuery, json: boolean): Promise<string> {
  if (query.sessionId !== undefined) {
    if (query.userId === undefined) throw new Error('--session needs --user (sessions belong to one user)');
    const timeline = await timelineOf(service, { ...query, userId: query.userId, sessionId: query.sessionId });
    if (!timeline) throw new Error(`no session ${query.sessionId} of user ${query.userId} in app ${query.appName}`);
    return json ? JSON.stringify(timeline, null, 2) : formatTimeline(timeline);
  }
  const sessions = await listForInspection(service, query);
  if (json) {
    return JSON.stringify(
      sessions.map((session) => ({ userId: session.userId, id: session.id, lastUpdateTime: session.lastUpdateTime })),
      null,
      2,
    );
  }
  return sessions.length === 0 ? `no sessions in app ${query.appName}` : formatSessionTable(sessions);
}

/** A running inspector page. */
export interface Inspector {
  readonly url: string;
  close(): Promise<void>;
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  response.end(JSON.stringify(body));
}

/**
 * Serves the inspector page and its two JSON routes on `host` (default
 * 127.0.0.1): `/api/sessions?app=&user=` and `/api/timeline?app=&user=&session=`.
 * Read only: nothing on the page writes to the store.
 */
export async function serveInspector(
  service: BaseSessionService,
  options: {
    host?: string;
    port?: number;
    appName?: string;
    /** Applied to every error message the page shows (hides the secrets of store URIs). */
    redact?: (text: string) => string;
  } = {},
): Promise<Inspector> {
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://inspector');
    if (request.method !== 'GET') return sendJson(response, 405, { error: 'read only' });
    const appName = url.searchParams.get('app') ?? '';
    const userId = url.searchParams.get('user') || undefined;
    if (url.pathname === '/') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      return response.end(INSPECTOR_PAGE.replace('__APP__', JSON.stringify(options.appName ?? '')));
    }
    if (url.pathname === '/api/sessions') {
      if (appName === '') return sendJson(response, 400, { error: 'give ?app=' });
      const sessions = await listForInspection(service, { appName, ...(userId ? { userId } : {}) });
      return sendJson(response, 200, {
        sessions: sessions.map((s) => ({ userId: s.userId, id: s.id, lastUpdateTime: s.lastUpdateTime })),
      });
    }
    if (url.pathname === '/api/timeline') {
      const sessionId = url.searchParams.get('session') ?? '';
      if (appName === '' || !userId || sessionId === '') {
        return sendJson(response, 400, { error: 'give ?app=&user=&session=' });
      }
      const timeline = await timelineOf(service, { appName, userId, sessionId });
      return timeline ? sendJson(response, 200, timeline) : sendJson(response, 404, { error: 'no such session' });
    }
    return sendJson(response, 404, { error: 'not found' });
  };
  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      const message = error instanceof Error ? error.message : String(error);
      if (!response.headersSent) sendJson(response, 500, { error: options.redact ? options.redact(message) : message });
      else response.end();
    });
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
