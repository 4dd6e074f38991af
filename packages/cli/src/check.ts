/**
 * The start-up check of a store: before `web`, `api_server`, `inspect` or
 * `migrate` uses a store, one bounded read tells whether it answers, and if
 * not, why: refused, timed out, authentication, unknown database, host not
 * found. A Redis URI is first probed with a client of its own (connect,
 * AUTH, SELECT of the database, PING), because ioredis would otherwise go on
 * in database 0 when the server has no such database.
 */
import { isAdkStateError } from '@adk-state/core';
import { loadOptional } from './packages.js';
import { redactUri } from './redact.js';
import { clusterNodes, type UriSessionService } from './uri.js';

/** Why a store failed its start-up check. */
export type StoreProblem =
  | 'refused'
  | 'timed out'
  | 'authentication'
  | 'unknown database'
  | 'host not found'
  | 'failed';

/** A store did not pass its start-up check. The message names the store (redacted) and the cause. */
export class StoreCheckError extends Error {
  readonly code = 'STORE_CHECK_FAILED';
  readonly problem: StoreProblem;
  /** The store's URI, redacted. */
  readonly store: string;

  constructor(uri: string, problem: StoreProblem, detail: string, options?: { cause?: unknown }) {
    const store = redactUri(uri);
    super(`the session store ${store} ${EXPLAIN[problem]}${detail === '' ? '' : `: ${detail}`}`, options);
    this.name = 'StoreCheckError';
    this.problem = problem;
    this.store = store;
  }
}

const EXPLAIN: Record<StoreProblem, string> = {
  refused: 'refused the connection (nothing listens at that address, or a firewall says no)',
  'timed out': 'did not answer in time',
  authentication:
    'refused the credentials (authentication failed: check the user and password, the key, or the default credentials it connects with)',
  'unknown database': 'has no such database',
  'host not found': 'names a host that cannot be resolved',
  failed: 'failed its start-up check',
};

/** Default bound of the start-up check. */
export const DEFAULT_CHECK_TIMEOUT_MS = 10_000;

/** An error and the causes under it (ioredis's cluster errors keep theirs in `lastNodeError`). */
export function chain(error: unknown): unknown[] {
  const all: unknown[] = [];
  let current = error;
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    all.push(current);
    current = (current as { cause?: unknown }).cause ?? (current as { lastNodeError?: unknown }).lastNodeError;
  }
  return all;
}

function textOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What an error says about a store: the first clear cause in its chain. */
export function problemOf(error: unknown): StoreProblem {
  const links = chain(error);
  const text = links.map(textOf).join(' | ');
  const codes = links.map((link) => String((link as { code?: unknown }).code ?? ''));
  for (const link of links) {
    if (isAdkStateError(link, 'BACKEND_ERROR')) {
      const kind = (link as { kind?: string }).kind;
      if (kind === 'authentication') return 'authentication';
      if (kind === 'unknown-database') return 'unknown database';
    }
  }
  if (
    /WRONGPASS|NOAUTH|NOPERM|invalid password|Authentication failed|password authentication failed|Access denied|unauthenticated|invalid username-password/i.test(
      text,
    ) ||
    codes.includes('18')
  ) {
    return 'authentication';
  }
  if (/DB index is out of range|invalid DB index|database "[^"]*" does not exist|Unknown database/i.test(text)) {
    return 'unknown database';
  }
  if (codes.includes('ENOTFOUND') || codes.includes('EAI_AGAIN') || /ENOTFOUND|EAI_AGAIN/.test(text)) {
    return 'host not found';
  }
  if (codes.includes('ECONNREFUSED') || /ECONNREFUSED|None of startup nodes is available/i.test(text)) {
    return 'refused';
  }
  for (const link of links) if ((link as { timedOut?: unknown }).timedOut === true) return 'timed out';
  if (codes.includes('ETIMEDOUT') || /ETIMEDOUT|timed out|timeout/i.test(text)) return 'timed out';
  return 'failed';
}

class CheckTimeout extends Error {
  constructor(ms: number) {
    super(`no answer within ${formatSeconds(ms)}`);
    this.name = 'CheckTimeout';
  }
}

function formatSeconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

/** `work()`, or a {@link CheckTimeout} after `ms`; a late outcome of `work` is ignored. */
export async function bounded<T>(ms: number, work: () => Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new CheckTimeout(ms)), ms);
  });
  const running = work();
  running.catch(() => {});
  try {
    return await Promise.race([running, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The database index of a `redis://host:port/<db>` URI (0 without one). */
function redisDatabase(uri: string): number {
  const path = /^[a-z+]+:\/\/[^/]*\/(\d*)/i.exec(uri.replace(/\?.*$/, ''))?.[1] ?? '';
  return path === '' ? 0 : Number(path);
}

/**
 * Connects a client of its own to one Redis server: AUTH as the URI says,
 * SELECT of its database, PING. Rejects with the server's own reason (not
 * ioredis's "Connection is closed").
 */
async function probeRedis(
  target: string | { host: string; port: number; username?: string; password?: string; tls?: object },
  db: number,
  ms: number,
): Promise<void> {
  const { Redis } = await loadOptional('ioredis', 'redis', ['@adk-state/adapter-redis']);
  const options = {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: ms,
    db: 0,
  };
  const client = typeof target === 'string' ? new Redis(target, options) : new Redis({ ...target, ...options });
  let lastError: Error | undefined;
  client.on('error', (error: Error) => {
    lastError ??= error;
  });
  try {
    await bounded(ms, async () => {
      try {
        await client.connect();
      } catch (error) {
        throw lastError ?? error;
      }
      if (db !== 0) await client.call('select', [db]);
      await client.call('ping', []);
    });
  } finally {
    client.disconnect();
  }
}

/**
 * Checks that the store of `uri` answers a read within `timeoutMs`; rejects
 * with a {@link StoreCheckError} that names the store and the cause.
 */
export async function checkStore(
  uri: string,
  service: UriSessionService,
  options: { timeoutMs?: number } = {},
): Promise<void> {
  const ms = options.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS;
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri)?.[1]?.toLowerCase() ?? '';
  const fail = (error: unknown): never => {
    throw checkFailure(uri, ms, error);
  };
  if (scheme === 'redis' || scheme === 'rediss') {
    await probeRedis(uri, redisDatabase(uri), ms).catch(fail);
  } else if (scheme === 'redis+cluster' || scheme === 'rediss+cluster') {
    await probeCluster(uri, scheme, ms).catch(fail);
  }
  const probe = '__adk_state_startup_check__';
  await bounded(ms, () => service.getSession({ appName: probe, userId: probe, sessionId: probe })).catch(fail);
}

/** The {@link StoreCheckError} of a store that failed a step of its start-up check bounded by `ms`. */
export function checkFailure(uri: string, ms: number, error: unknown): StoreCheckError {
  const problem = error instanceof CheckTimeout ? 'timed out' : problemOf(error);
  // A refusal of the credentials in the backend's own words (the last cause), not the store's sentence around them.
  const detail =
    error instanceof CheckTimeout || problem === 'timed out'
      ? `no answer within ${formatSeconds(ms)}`
      : textOf(problem === 'authentication' ? chain(error).at(-1) : error);
  return new StoreCheckError(uri, problem, detail, { cause: error });
}

/** A cluster passes when one of its listed nodes answers; else the first node's reason is the cluster's. */
async function probeCluster(uri: string, scheme: string, ms: number): Promise<void> {
  const userInfo = /^[a-z+]+:\/\/([^@]*)@/i.exec(uri.replace(/[?#].*$/, ''))?.[1];
  const colon = userInfo?.indexOf(':') ?? -1;
  const credentials =
    userInfo === undefined
      ? {}
      : {
          ...(colon === 0 || userInfo === ''
            ? {}
            : { username: decodeURIComponent(colon === -1 ? userInfo : userInfo.slice(0, colon)) }),
          ...(colon === -1 ? {} : { password: decodeURIComponent(userInfo.slice(colon + 1)) }),
        };
  const failures = await Promise.all(
    clusterNodes(uri).map((node) =>
      probeRedis({ ...node, ...credentials, ...(scheme === 'rediss+cluster' ? { tls: {} } : {}) }, 0, ms).then(
        () => undefined,
        (error: unknown) => error,
      ),
    ),
  );
  if (failures.every((failure) => failure !== undefined)) throw failures[0];
}

/** Closes a service, waiting at most `ms` (a hung server may never answer the client's goodbye). */
export async function closeWithin(service: UriSessionService | undefined, ms = 2_000): Promise<void> {
  if (!service?.close) return;
  await bounded(ms, () => (service.close as () => Promise<void>)()).catch(() => {});
}
