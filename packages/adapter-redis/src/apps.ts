/**
 * The apps stored under a key prefix, read from the key names: every key of
 * an app starts with `<prefix>{<tag>` and the tag is the app name, encoded
 * (see `appTag` in keys.ts). A SCAN visits every key once; on a Cluster it
 * runs on every master.
 */
import { decodeText } from './keys.js';

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

async function scanNode(
  node: ScanningClient,
  keyPrefix: string,
  found: Set<string>,
  count: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  let cursor = '0';
  do {
    signal?.throwIfAborted();
    const reply = (await node.call('scan', [cursor, 'MATCH', `${globLiteral(keyPrefix)}{*`, 'COUNT', count])) as [
      string,
      string[],
    ];
    cursor = String(reply[0]);
    for (const key of reply[1]) {
      const app = appOfKey(String(key), keyPrefix);
      if (app !== undefined) found.add(app);
    }
  } while (cursor !== '0');
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
  options: { signal?: AbortSignal; count?: number } = {},
): Promise<string[]> {
  const found = new Set<string>();
  const count = options.count ?? 1000;
  const nodes = isCluster(client) ? client.nodes('master') : [client];
  for (const node of nodes) await scanNode(node, keyPrefix, found, count, options.signal);
  return [...found].sort();
}
