/**
 * One string names a store: `sessionServiceFromUri` turns a URI into a ready
 * `sessionService`, loading the adapter it needs only when it is asked for.
 */
import { InvalidArgumentError, type StateSessionServiceOptions } from '@adk-state/core';
import type { BaseSessionService } from '@google/adk';
import { loadOptional } from './packages.js';
import { redactUri } from './redact.js';

export { redactUri };

/** Options of {@link sessionServiceFromUri}: core's options, given to every adk-state store it makes. */
export type UriServiceOptions = StateSessionServiceOptions;

/** A session service that may own a client; `close()` releases it (absent for ADK's own services). */
export type UriSessionService = BaseSessionService & { close?: () => Promise<void> };

/** The schemes adk-state serves itself; any other scheme goes to `@google/adk`'s own factory. */
export const ADK_STATE_SCHEMES = [
  'memory',
  'redis',
  'rediss',
  'redis+cluster',
  'rediss+cluster',
  'mongodb',
  'mongodb+srv',
  'firestore',
] as const;

function malformed(uri: string, detail: string): InvalidArgumentError {
  return new InvalidArgumentError('uri', `${redactUri(uri)}: ${detail}`);
}

function schemeOf(uri: string): string {
  const match = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri);
  if (!match?.[1]) {
    throw malformed(
      uri,
      'not a URI: expected <scheme>://…, e.g. memory://, redis://127.0.0.1:6379 or firestore://my-project',
    );
  }
  return match[1].toLowerCase();
}

function parse(uri: string): URL {
  try {
    return new URL(uri);
  } catch {
    throw malformed(
      uri,
      uri.includes('@')
        ? 'not a valid URI (a password must be percent-encoded: / as %2F, # as %23, ? as %3F, @ as %40, % as %25)'
        : 'not a valid URI',
    );
  }
}

/** The `host:port` list of a cluster URI: `redis+cluster://[user:pass@]h1:p1,h2:p2`. */
export function clusterNodes(uri: string): { host: string; port: number }[] {
  const match = /^[a-z+]+:\/\/(?:[^/?#@]*@)?([^/?#]*)/i.exec(uri);
  const hosts = match?.[1] ?? '';
  if (hosts === '') throw malformed(uri, 'a cluster URI lists its nodes as host:port,host:port');
  return hosts.split(',').map((node) => {
    const at = node.lastIndexOf(':');
    const host = (at === -1 ? node : node.slice(0, at)).replace(/^\[|\]$/g, '');
    const port = at === -1 ? 6379 : Number(node.slice(at + 1));
    if (host === '' || !Number.isInteger(port) || port < 1 || port > 65535) {
      throw malformed(uri, `"${node}" is not host:port`);
    }
    return { host, port };
  });
}

/** The Firestore project, database and root collection of `firestore://<project>[/<database>]?root=<collection>`. */
export function firestoreLocation(uri: string): { projectId: string; databaseId?: string; rootCollection?: string } {
  const url = parse(uri);
  const projectId = decodeURIComponent(url.hostname);
  if (projectId === '') throw malformed(uri, 'name the project: firestore://<project>[/<database>]');
  const path = url.pathname.replace(/^\/+|\/+$/g, '');
  if (path.includes('/')) throw malformed(uri, 'the path holds one database id at most');
  const root = url.searchParams.get('root');
  for (const name of url.searchParams.keys()) {
    if (name !== 'root') throw malformed(uri, `unknown parameter "${name}" (firestore:// takes ?root=<collection>)`);
  }
  return {
    projectId,
    ...(path === '' ? {} : { databaseId: decodeURIComponent(path) }),
    ...(root === null || root === '' ? {} : { rootCollection: root }),
  };
}

/**
 * The file a `sqlite://` URI names, as `@google/adk`'s DatabaseSessionService
 * reads it (all that follows `sqlite://`, taken as is; a relative path starts
 * from the working directory); `undefined` for `sqlite://:memory:` and for
 * any other scheme. ADK creates the file, and its tables, on first use.
 */
export function sqliteFile(uri: string): string | undefined {
  if (!uri.startsWith('sqlite://') || uri === 'sqlite://:memory:') return undefined;
  return uri.slice('sqlite://'.length);
}

/** Whether `uri` names a `memory://` store, which lives only in the process that makes it. */
export function isMemoryUri(uri: string): boolean {
  return /^memory:\/\//i.test(uri);
}

/**
 * A session service for `uri`:
 *
 * - `memory://`: `@adk-state/adapter-memory` (this process only).
 * - `redis://…`, `rediss://…`: `@adk-state/adapter-redis` on one server;
 *   `redis+cluster://h1:p1,h2:p2` (or `rediss+cluster://`) on a Redis Cluster.
 * - `mongodb://…`, `mongodb+srv://…`: `@adk-state/adapter-mongo`; a database
 *   name in the path is used, else the adapter's default.
 * - `firestore://<project>[/<database>]?root=<collection>`:
 *   `@adk-state/adapter-firestore` (the client honours `FIRESTORE_EMULATOR_HOST`).
 * - Any other scheme (`sqlite://`, `postgresql://`, `agentengine://`, …) goes to
 *   `@google/adk`'s own `getSessionServiceFromUri`.
 *
 * Adapters are optional: a missing one rejects with {@link MissingPackageError}
 * naming the install command. A malformed URI rejects with
 * `InvalidArgumentError`; neither message shows a password.
 */
export async function sessionServiceFromUri(uri: string, options: UriServiceOptions = {}): Promise<UriSessionService> {
  if (typeof uri !== 'string' || uri.trim() === '') {
    throw new InvalidArgumentError('uri', 'give a session service URI such as memory:// or redis://127.0.0.1:6379');
  }
  const scheme = schemeOf(uri);
  switch (scheme) {
    case 'memory': {
      const { MemorySessionService } = await import('@adk-state/adapter-memory');
      return new MemorySessionService(options);
    }
    case 'redis':
    case 'rediss':
    case 'redis+cluster':
    case 'rediss+cluster': {
      if (scheme.endsWith('+cluster')) clusterNodes(uri);
      else parse(uri);
      // The adapter makes the client from the URL: one server, or a Cluster of the listed nodes.
      const { RedisSessionService } = await loadOptional('@adk-state/adapter-redis', scheme, ['ioredis']);
      return new RedisSessionService({ ...options, url: uri });
    }
    case 'mongodb':
    case 'mongodb+srv': {
      const url = parse(uri);
      const dbName = decodeURIComponent(url.pathname.replace(/^\//, ''));
      const { MongoSessionService } = await loadOptional('@adk-state/adapter-mongo', scheme, ['mongodb']);
      return new MongoSessionService({ ...options, url: uri, ...(dbName === '' ? {} : { dbName }) });
    }
    case 'firestore':
      return firestore(uri, options);
    default:
      return adkOwn(uri);
  }
}

async function firestore(uri: string, options: UriServiceOptions): Promise<UriSessionService> {
  const { projectId, databaseId, rootCollection } = firestoreLocation(uri);
  const { FirestoreSessionService } = await loadOptional('@adk-state/adapter-firestore', 'firestore', [
    '@google-cloud/firestore',
  ]);
  const { Firestore } = await loadOptional('@google-cloud/firestore', 'firestore', ['@adk-state/adapter-firestore']);
  const client = new Firestore({ projectId, ...(databaseId === undefined ? {} : { databaseId }) });
  const service = new FirestoreSessionService({
    ...options,
    firestore: client,
    ...(rootCollection === undefined ? {} : { rootCollection }),
  });
  return releasing(service, () => client.terminate());
}

async function adkOwn(uri: string): Promise<UriSessionService> {
  const { getSessionServiceFromUri } = await import('@google/adk');
  let service: UriSessionService;
  try {
    service = getSessionServiceFromUri(uri);
  } catch (error) {
    const known = [...ADK_STATE_SCHEMES].map((scheme) => `${scheme}://`).join(', ');
    throw malformed(
      uri,
      `no store for this scheme: adk-state serves ${known}; @google/adk serves the rest (${(error as Error).message.replace(/:.*$/, '')})`,
    );
  }
  return closableAdkService(service);
}

/**
 * ADK's DatabaseSessionService has no close(); its database connection (a
 * MikroORM instance, made on first use) would otherwise keep the process
 * alive. Gives such a service a `close()` that closes it.
 */
export function closableAdkService(service: UriSessionService): UriSessionService {
  const database = service as { orm?: { close(force?: boolean): Promise<void> } };
  return service.close ? service : releasing(service, async () => database.orm?.close(true));
}

/** `service.close()` closes the service, then releases the client this module made for it. */
function releasing<S extends UriSessionService>(service: S, release: () => Promise<void>): S {
  const close = service.close?.bind(service);
  service.close = async () => {
    try {
      await close?.();
    } finally {
      await release();
    }
  };
  return service;
}
