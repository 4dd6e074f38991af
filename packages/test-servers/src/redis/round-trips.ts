/**
 * Counting what the server saw, not what the client meant to send:
 * {@link countRoundTrips} watches MONITOR on every node and counts the
 * commands that arrived from the measured client's own connections (found by
 * connection name), leaving out the commands that scripts ran inside the
 * server; {@link countCommands} diffs `INFO commandstats`, which counts both.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';

/** Where the server is: one URL, or every master of a cluster. */
export type RedisNodes = string | ReadonlyArray<{ host: string; port: number }>;

function nodeUrls(nodes: RedisNodes): string[] {
  return typeof nodes === 'string' ? [nodes] : nodes.map((node) => `redis://${node.host}:${node.port}`);
}

/** What {@link countRoundTrips} observed. */
export interface RoundTrips {
  /** Commands the server received from the measured client: one request/response each. */
  roundTrips: number;
  /** Their names, in the order each node received them (e.g. `['evalsha']`). */
  commands: string[];
}

/**
 * Runs `operation` and counts the commands the server received from the
 * connections named `connectionName` (set `connectionName` on the measured
 * client, or `redisOptions.connectionName` on a Cluster). Commands run by
 * scripts inside the server are not requests and are not counted.
 */
export async function countRoundTrips(
  nodes: RedisNodes,
  connectionName: string,
  operation: () => Promise<unknown>,
): Promise<RoundTrips> {
  const watchers = await Promise.all(nodeUrls(nodes).map((url) => watch(url)));
  try {
    await operation();
    const commands: string[] = [];
    for (const watcher of watchers) commands.push(...(await watcher.finish(connectionName)));
    return { roundTrips: commands.length, commands };
  } finally {
    await Promise.all(watchers.map((watcher) => watcher.close()));
  }
}

interface Watcher {
  finish(connectionName: string): Promise<string[]>;
  close(): Promise<void>;
}

async function watch(url: string): Promise<Watcher> {
  const admin = new Redis(url, { lazyConnect: true });
  await admin.connect();
  const monitor = await admin.duplicate().monitor();
  const seen: Array<{ source: string; command: string }> = [];
  const markers = new Set<string>();
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const command = String(args[0]).toLowerCase();
    if (command === 'echo' && typeof args[1] === 'string' && args[1].startsWith('adk-state-marker-')) {
      markers.add(args[1]);
      return;
    }
    seen.push({ source, command });
  });
  // MONITOR begins with the command after its reply; a first marker makes sure it is live.
  await flush(admin, markers);
  seen.length = 0;
  return {
    async finish(connectionName) {
      const list = String(await admin.call('client', 'list'));
      const addresses = new Set<string>();
      for (const line of list.split('\n')) {
        const fields = new Map(line.split(' ').map((pair) => pair.split('=', 2) as [string, string]));
        if (fields.get('name') === connectionName) addresses.add(fields.get('addr') as string);
      }
      await flush(admin, markers);
      return seen.filter((entry) => addresses.has(entry.source)).map((entry) => entry.command);
    },
    async close() {
      monitor.disconnect();
      admin.disconnect();
    },
  };
}

/** Sends a marker and waits until MONITOR reports it: everything before it has been reported too. */
async function flush(admin: Redis, markers: Set<string>): Promise<void> {
  const marker = `adk-state-marker-${randomUUID()}`;
  for (let attempt = 0; attempt < 200 && !markers.has(marker); attempt++) {
    if (attempt % 20 === 0) await admin.echo(marker);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  if (!markers.has(marker)) throw new Error('MONITOR did not report the marker');
}

/** Calls per command from `INFO commandstats`, summed over the nodes (`cmdstat_` prefix dropped). */
export async function readCommandStats(nodes: RedisNodes): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  for (const url of nodeUrls(nodes)) {
    // No ready check: it would send an INFO of its own.
    const admin = new Redis(url, { enableReadyCheck: false });
    try {
      const info = String(await admin.info('commandstats'));
      for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
        totals.set(match[1] as string, (totals.get(match[1] as string) ?? 0) + Number(match[2]));
      }
    } finally {
      admin.disconnect();
    }
  }
  return totals;
}

/**
 * Runs `operation` and returns how many times each command ran on the
 * server(s) meanwhile, from `INFO commandstats`: requests and the commands
 * scripts ran inside the server alike. Exact only when nothing else uses
 * the server at the same time; the INFO calls themselves are left out.
 */
export async function countCommands(
  nodes: RedisNodes,
  operation: () => Promise<unknown>,
): Promise<Map<string, number>> {
  const before = await readCommandStats(nodes);
  await operation();
  const after = await readCommandStats(nodes);
  const delta = new Map<string, number>();
  for (const [command, calls] of after) {
    const diff = calls - (before.get(command) ?? 0) - (command === 'info' ? nodeUrls(nodes).length : 0);
    if (diff > 0) delta.set(command, diff);
  }
  return delta;
}
