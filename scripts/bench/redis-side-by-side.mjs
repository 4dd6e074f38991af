#!/usr/bin/env node
/**
 * The Redis store of this tree beside the one of another build of the
 * repository (an older commit checked out and built in a git worktree), on
 * one redis-server, in interleaved rounds: each workload runs on the old
 * build, then the new (the order swapped every round), and each round gives
 * one new ÷ old ratio. Prints the spread of the ratios over the rounds, and
 * the client CPU per call of each side.
 *
 *   git worktree add /tmp/old <commit> && (cd /tmp/old && pnpm install && pnpm build)
 *   pnpm build && node scripts/bench/redis-side-by-side.mjs /tmp/old [--rounds 3] [--scale 1] [--only getSession,whole]
 *
 * On a machine shared with other work the client CPU figures are steadier with
 * the client and the server on CPUs of their own:
 *
 *   taskset -c 0 node scripts/bench/redis-side-by-side.mjs /tmp/old --server-cpus 1
 *
 * `--protocol outbox` runs both sides on the cluster protocol (`clusterProtocol`,
 * 16 shards) instead of the direct one.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '3' },
    scale: { type: 'string', default: '1' },
    only: { type: 'string' },
    protocol: { type: 'string', default: 'direct' },
    'server-cpus': { type: 'string' },
  },
});
const oldRoot = positionals[0];
if (!oldRoot) {
  console.error('usage: node scripts/bench/redis-side-by-side.mjs <old worktree> [--rounds n] [--scale x]');
  process.exit(2);
}
const rounds = Number(values.rounds);
const scale = Number(values.scale);
/**
 * `--protocol outbox`: both sides on the cluster protocol (the app's
 * `app:` keys through the shards' outboxes), on the one server.
 */
const PROTOCOLS = {
  direct: {},
  outbox: { clusterProtocol: true, shards: 16, drainIntervalMs: Number.POSITIVE_INFINITY },
};
const protocol = PROTOCOLS[values.protocol];
if (!protocol) {
  console.error(`--protocol: direct or outbox, not ${values.protocol}`);
  process.exit(2);
}
const newRoot = path.resolve(import.meta.dirname, '../..');

/** The adapter of a tree, loaded from its build, with the ioredis and ADK that tree resolves. */
async function load(root) {
  const adapterDir = path.join(root, 'packages/adapter-redis');
  const require = createRequire(path.join(adapterDir, 'package.json'));
  const adapter = await import(pathToFileURL(path.join(adapterDir, 'dist/index.js')).href);
  const ioredis = await import(pathToFileURL(require.resolve('ioredis')).href);
  const adk = await import(pathToFileURL(require.resolve('@google/adk')).href);
  return { adapter, Redis: ioredis.default.default ?? ioredis.default, adk };
}

/** A redis-server of its own on a free loopback port, without persistence. */
async function startServer() {
  const port = await new Promise((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address();
      probe.close(() => resolve(free));
    });
  });
  const server = ['redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const command = values['server-cpus'] ? ['taskset', '-c', values['server-cpus'], ...server] : server;
  const child = spawn(command[0], command.slice(1), {
    stdio: 'ignore',
  });
  for (let attempt = 0; ; attempt++) {
    const up = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (up) break;
    if (attempt > 200) throw new Error('redis-server did not start');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

const server = await startServer();

const sides = { old: await load(path.resolve(oldRoot)), new: await load(newRoot) };

function event(adk, delta, timestamp) {
  return adk.createEvent({
    invocationId: 'inv',
    author: 'agent',
    timestamp,
    actions: { stateDelta: delta, artifactDelta: {}, requestedAuthConfigs: {}, requestedToolConfirmations: {} },
  });
}

/** One workload on one side: { perSecond, cpuMicrosPerCall }. */
async function measure(side, name) {
  const { adapter, Redis, adk } = sides[side];
  const client = new Redis(server.url);
  const keyPrefix = `sbs-${side}-${randomUUID().slice(0, 6)}:`;
  // A build without the option ignores it (and has no log cache to turn off).
  const logCacheBytes = name.endsWith('logCacheBytes: 0') ? { logCacheBytes: 0 } : {};
  const service = new adapter.RedisSessionService({ client, keyPrefix, ...logCacheBytes, ...protocol });
  const appName = 'app';
  try {
    let calls = 0;
    let run;
    const n = Math.round(2000 * scale);
    if (name === 'append (app: key)' || name === 'append (no app: key)') {
      const session = await service.createSession({ appName, userId: 'u1' });
      const withApp = name === 'append (app: key)';
      run = async () => {
        for (let index = 0; index < n; index++) {
          const delta = withApp ? { n: index, 'user:u': index, 'app:a': index } : { n: index, 'user:u': index };
          await service.appendEvent({ session, event: event(adk, delta, 1000 + index) });
        }
        calls = n;
      };
    } else if (name === '32 callers (app: key)') {
      const sessions = await Promise.all(
        Array.from({ length: 32 }, (_, index) => service.createSession({ appName, userId: `u${index}` })),
      );
      run = async () => {
        await Promise.all(
          sessions.map(async (session, caller) => {
            for (let index = 0; index < n / 32; index++) {
              await service.appendEvent({
                session,
                event: event(adk, { n: index, 'user:u': index, [`app:a${caller % 4}`]: index }, 1000 + index),
              });
            }
          }),
        );
        calls = n;
      };
    } else if (name === 'getSession(10)') {
      const session = await service.createSession({ appName, userId: 'u1', state: { 'app:x': 1 } });
      for (let index = 0; index < 100; index++) {
        await service.appendEvent({ session, event: event(adk, { n: index, 'user:u': index }, 1000 + index) });
      }
      run = async () => {
        for (let index = 0; index < n; index++) {
          await service.getSession({ appName, userId: 'u1', sessionId: session.id, config: { numRecentEvents: 10 } });
        }
        calls = n;
      };
    } else if (name.startsWith('whole getSession of 100')) {
      const session = await service.createSession({ appName, userId: 'u1', state: { 'app:x': 1 } });
      for (let index = 0; index < 100; index++) {
        await service.appendEvent({ session, event: event(adk, { n: index, 'user:u': index }, 1000 + index) });
      }
      const reads = Math.round(500 * scale);
      run = async () => {
        for (let index = 0; index < reads; index++) {
          await service.getSession({ appName, userId: 'u1', sessionId: session.id });
        }
        calls = reads;
      };
    } else if (name === 'listSessions page of 50 of 1,000') {
      for (let from = 0; from < 1000; from += 100) {
        await Promise.all(
          Array.from({ length: 100 }, (_, index) =>
            service.createSession({ appName, userId: `u${(from + index) % 97}`, state: { 'user:k': 1 } }),
          ),
        );
      }
      const pages = Math.round(300 * scale);
      run = async () => {
        for (let index = 0; index < pages; index++) await service.listSessions({ appName, limit: 50, order: 'desc' });
        calls = pages;
      };
    }
    const cpu = process.cpuUsage();
    const started = performance.now();
    await run();
    const elapsed = performance.now() - started;
    const used = process.cpuUsage(cpu);
    return { perSecond: (calls / elapsed) * 1000, cpuMicrosPerCall: (used.user + used.system) / calls };
  } finally {
    await service.close?.();
    client.disconnect();
  }
}

const workloads = [
  'append (app: key)',
  'append (no app: key)',
  '32 callers (app: key)',
  'getSession(10)',
  'whole getSession of 100, read before',
  'whole getSession of 100, logCacheBytes: 0',
  'listSessions page of 50 of 1,000',
].filter((name) => values.only === undefined || values.only.split(',').some((part) => name.startsWith(part)));
const results = Object.fromEntries(workloads.map((name) => [name, { ratios: [], old: [], new: [] }]));
try {
  for (let round = 0; round < rounds; round++) {
    for (const name of workloads) {
      const order = round % 2 === 0 ? ['old', 'new'] : ['new', 'old'];
      const figures = {};
      for (const side of order) figures[side] = await measure(side, name);
      const entry = results[name];
      entry.ratios.push(figures.new.perSecond / figures.old.perSecond);
      entry.old.push(figures.old);
      entry.new.push(figures.new);
      console.error(
        `round ${round + 1} ${name}: new/old ${(figures.new.perSecond / figures.old.perSecond).toFixed(2)}`,
      );
    }
  }
} finally {
  await server.stop();
}

const median = (list) => {
  const sorted = [...list].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const fmt = (list) =>
  `${Math.min(...list).toFixed(2)}-${Math.max(...list).toFixed(2)} (median ${median(list).toFixed(2)})`;
console.log(
  `| workload | new ÷ old calls/s (${rounds} rounds) | old calls/s | new calls/s | client CPU µs/call old → new |`,
);
console.log('|---|---|---|---|---|');
for (const name of workloads) {
  const { ratios, old, new: fresh } = results[name];
  console.log(
    `| ${name} | ${fmt(ratios)} | ${median(old.map((f) => f.perSecond)).toFixed(0)} | ${median(fresh.map((f) => f.perSecond)).toFixed(0)} | ${median(old.map((f) => f.cpuMicrosPerCall)).toFixed(0)} → ${median(fresh.map((f) => f.cpuMicrosPerCall)).toFixed(0)} |`,
  );
}
