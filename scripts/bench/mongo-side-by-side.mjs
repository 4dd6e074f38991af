#!/usr/bin/env node
/**
 * The MongoDB store of this tree beside the one of another build of the
 * repository (an older commit checked out and built in a git worktree), on
 * one server, in interleaved rounds: each workload runs on the old build,
 * then the new (the order swapped every round), and each round gives one
 * new ÷ old ratio. Prints the median and the spread of the ratios over the
 * rounds after the first.
 *
 *   git worktree add /tmp/old <commit> && (cd /tmp/old && pnpm install && pnpm build)
 *   pnpm build && node scripts/bench/mongo-side-by-side.mjs /tmp/old [--rounds 21] [--url mongodb://…]
 *
 * Without `--url` it starts the repository's MongoDB stand-in (as MongoDB
 * 8.0) in a process of its own, on the CPUs `--server-cpus` names (all when
 * left out); pin this process too, e.g. `taskset -c 0 node …`.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '9' },
    url: { type: 'string' },
    'server-cpus': { type: 'string' },
  },
});
const oldRoot = positionals[0];
if (!oldRoot) {
  console.error('usage: mongo-side-by-side.mjs <old checkout, built> [--rounds N] [--url U] [--server-cpus LIST]');
  process.exit(2);
}
const newRoot = path.resolve(import.meta.dirname, '../..');
const rounds = Number(values.rounds);

/** The stand-in as MongoDB 8.0, in a process of its own; resolves its url and a stop function. */
async function standIn() {
  const args = ['--import', 'tsx', 'src/cli.ts', '--server-version', '8.0'];
  const cpus = values['server-cpus'];
  const [command, argv] = cpus ? ['taskset', ['-c', cpus, process.execPath, ...args]] : [process.execPath, args];
  const child = spawn(command, argv, {
    cwd: path.join(newRoot, 'packages/mongo-standin'),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (chunk) => {
      text += chunk;
      const end = text.indexOf('\n');
      if (end >= 0) resolve(text.slice(0, end));
    });
    child.once('exit', (code) => reject(new Error(`the stand-in exited (${code}) before it served`)));
  });
  return { url: JSON.parse(line).url, stop: () => child.kill('SIGTERM') };
}

const server = values.url ? { url: values.url, stop() {} } : await standIn();
const app = `side-${randomUUID().slice(0, 8)}`;
const sides = {};
for (const [name, root] of [
  ['old', oldRoot],
  ['new', newRoot],
]) {
  const load = (file) => import(pathToFileURL(path.join(root, file)).href);
  const { MongoSessionService } = await load('packages/adapter-mongo/dist/index.js');
  const adk = await load('packages/core/node_modules/@google/adk/dist/esm/index.js');
  sides[name] = { adk, service: new MongoSessionService({ url: server.url, dbName: `side_${name}` }) };
}

let serial = 0;
/** A model's reply with a session, a `user:`, an `app:` and a `temp:` key. */
const reply = (adk, i) =>
  adk.createEvent({
    invocationId: 'inv',
    author: 'agent',
    content: { role: 'model', parts: [{ text: `reply number ${i} with some words in it` }] },
    actions: adk.createEventActions({ stateDelta: { count: i, 'user:seen': i, 'app:hits': i, 'temp:draft': i } }),
  });

/** A session of `events` replies, read whole once (so the service holds it). */
async function held({ adk, service }, events) {
  const key = { appName: app, userId: 'u', sessionId: `s${serial++}` };
  const session = await service.createSession(key);
  for (let i = 0; i < events; i++) await service.appendEvent({ session, event: reply(adk, i) });
  await service.getSession(key);
  return key;
}

async function rate(count, run) {
  const started = performance.now();
  for (let i = 0; i < count; i++) await run(i);
  return count / ((performance.now() - started) / 1000);
}

const workloads = {
  'appendEvent, one session': async (side) => {
    const key = await held(side, 0);
    const session = await side.service.getSession(key);
    return rate(200, (i) => side.service.appendEvent({ session, event: reply(side.adk, i) }));
  },
  'a turn: whole getSession of a session read before (100 events), then an append': async (side) => {
    const key = await held(side, 100);
    return rate(100, async (i) => {
      const session = await side.service.getSession(key);
      await side.service.appendEvent({ session, event: reply(side.adk, 100 + i) });
    });
  },
  'whole getSession of a session read before, unchanged (100 events)': async (side) => {
    const key = await held(side, 100);
    return rate(200, () => side.service.getSession(key));
  },
};

const median = (list) => list.slice().sort((a, b) => a - b)[list.length >> 1];
const ratios = {};
const rates = {};
try {
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? ['old', 'new'] : ['new', 'old'];
    for (const [label, run] of Object.entries(workloads)) {
      const got = {};
      for (const name of order) got[name] = await run(sides[name]);
      if (round === 0) continue;
      ratios[label] ??= [];
      rates[label] ??= { old: [], new: [] };
      ratios[label].push(got.new / got.old);
      for (const name of order) rates[label][name].push(got[name]);
    }
  }
  for (const [label, list] of Object.entries(ratios)) {
    const { old, new: now } = rates[label];
    console.log(
      `${label}: new ÷ old ${median(list).toFixed(3)} (rounds ${Math.min(...list).toFixed(2)}–${Math.max(...list).toFixed(2)}); ` +
        `old ${median(old).toFixed(0)}/s, new ${median(now).toFixed(0)}/s`,
    );
  }
} finally {
  for (const { service } of Object.values(sides)) await service.close();
  server.stop();
}
