/**
 * What a store holds, read from the key names rather than from its listing
 * indexes: the apps under a key prefix (every key of an app starts with
 * `<prefix>{<tag>`, the tag being the app name, encoded: see `appTag` in
 * keys.ts), and the sessions of an app (its session hashes,
 * `<prefix>{<tag>[#<shard>]}:s:<user>\0<session>`). A SCAN visits every key
 * once; on a Cluster it runs on every master.
 */
import { compareSessionKeys, type StoredSessionKey } from '@adk-state/core/store';
import { appTag, decodeText, PART, SEPARATOR } from './keys.js';

/** The subset of an ioredis `Redis` client that a scan needs. */
interface ScanningClient {
  call(command: string, args: Array<string | number>): Promise<unknown>;
}

/** The subset of an ioredis `Cluster` client: its masters, each a `Redis` client. */
interface ClusterClient extends ScanningClient {
  readonly isCluster: true;
  nodes(role: 'master'): ScanningClient[];
}

function isCluster(client: ScanningClient): client is ClusterClient {
  return (client as Partial<ClusterClient>).isCluster === true && typeof (client as ClusterClient).nodes === 'function';
}

/** A glob that matches `text` literally (Redis MATCH treats `*?[]\` as special). */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
}

/** The inverse of the tag escapes: `%XX` back to its character, then the text decoding. */
function appOfTag(tag: string): string {
  return decodeText(
    tag.replace(/%([0-9A-F]{2})/g, (_whole, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
  );
}

/**
 * The app of one key name, or `undefined` for a key without a tag (such as
 * `<prefix>layout`) or not under the prefix.
 */
export function appOfKey(key: string, keyPrefix: string): string | undefined {
  if (!key.startsWith(`${keyPrefix}{`)) return undefined;
  const rest = key.slice(keyPrefix.length + 1);
  const close = rest.indexOf('}');
  if (close === -1) return undefined;
  const tag = rest.slice(0, close);
  const shard = tag.indexOf('#');
  return appOfTag(shard === -1 ? tag : tag.slice(0, shard));
}

/** What a scan takes: SCAN's COUNT hint (default 1000), and a signal that stops it between pages. */
export interface ScanOptions {
  signal?: AbortSignal;
  count?: number;
}

/** Every key matching `match`, on one server or on every master of a Cluster, given to `visit` page by page. */
async function scanKeys(
  client: ScanningClient,
  match: string,
  options: ScanOptions,
  visit: (key: string) => void,
): Promise<void> {
  const count = options.count ?? 1000;
  const nodes = isCluster(client) ? client.nodes('master') : [client];
  for (const node of nodes) {
    let cursor = '0';
    do {
      options.signal?.throwIfAborted();
      const reply = (await node.call('scan', [cursor, 'MATCH', match, 'COUNT', count])) as [string, string[]];
      cursor = String(reply[0]);
      for (const key of reply[1]) visit(String(key));
    } while (cursor !== '0');
  }
}

/**
 * The name of every app with at least one key under `keyPrefix` (sessions,
 * or only user or app state), sorted. `client` is an ioredis `Redis` or
 * `Cluster`; on a Cluster every master is scanned. `options.signal` stops the
 * scan between pages; `options.count` is SCAN's COUNT hint (default 1000).
 */
export async function listAppNames(
  client: ScanningClient,
  keyPrefix: string,
  options: ScanOptions = {},
): Promise<string[]> {
  const found = new Set<string>();
  await scanKeys(client, `${globLiteral(keyPrefix)}{*`, options, (key) => {
    const app = appOfKey(key, keyPrefix);
    if (app !== undefined) found.add(app);
  });
  return [...found].sort();
}

/** What every key of `appName` under `keyPrefix` begins with, whatever its shard: `<prefix>{<tag>`. */
export function appKeyHead(keyPrefix: string, appName: string): string {
  return `${keyPrefix}{${appTag(appName)}`;
}

/**
 * The user and session id of a session hash's key name, when it is one of
 * the app whose keys begin with `head` ({@link appKeyHead}), with any shard;
 * `undefined` for any other key.
 */
export function sessionOfKey(key: string, head: string): StoredSessionKey | undefined {
  if (!key.startsWith(head)) return undefined;
  // The tag never holds '}' (escaped), so the first one ends it; the shard, if any, is '#' and digits.
  const close = key.indexOf('}', head.length);
  if (close === -1) return undefined;
  const shard = key.slice(head.length, close);
  if (shard !== '' && !/^#\d+$/.test(shard)) return undefined;
  const part = `}:${PART.session}:`;
  if (!key.startsWith(part, close)) return undefined;
  const pair = key.slice(close + part.length);
  // Encoded text never holds the separator: exactly one splits user from session.
  const split = pair.indexOf(SEPARATOR);
  if (split === -1 || pair.indexOf(SEPARATOR, split + 1) !== -1) return undefined;
  return { userId: decodeText(pair.slice(0, split)), sessionId: decodeText(pair.slice(split + 1)) };
}

/**
 * Every session of `appName` stored under `keyPrefix` (of `userId` only, when
 * given), read from the names of the session hashes: a session is found
 * whether or not the listing's indexes hold it. Sorted by user, then id.
 */
export async function listSessionKeys(
  client: ScanningClient,
  keyPrefix: string,
  appName: string,
  userId: string | undefined,
  options: ScanOptions = {},
): Promise<StoredSessionKey[]> {
  // By key name: a key that moves between masters during the scan (resharding) is met twice.
  const found = new Map<string, StoredSessionKey>();
  const head = appKeyHead(keyPrefix, appName);
  await scanKeys(client, `${globLiteral(head)}*`, options, (key) => {
    const session = sessionOfKey(key, head);
    if (session && (userId === undefined || session.userId === userId)) found.set(key, session);
  });
  return [...found.values()].sort(compareSessionKeys);
}
