// Core's cost per call, this build against another one, in one process: the
// memory store of each build (its own core, its own @google/adk) takes turns
// in every round, the order flipped each round, and the medians of the rounds
// after the first are compared.
//
//   git worktree add /tmp/base <commit> && (cd /tmp/base && pnpm install --offline && pnpm build)
//   node packages/bench/side-by-side/core.mjs [workload,...]
//   SIDE=new node --cpu-prof packages/bench/side-by-side/core.mjs append10   # one build only, for a profile
//
// BASE_ROOT (default /tmp/base) and NEW_ROOT (default: this checkout) are the
// two checkouts; ROUNDS (default 7) the rounds; N overrides each workload's size.
import { fileURLToPath } from 'node:url';

const ADK = '/packages/core/node_modules/@google/adk/dist/esm/index.js';
const MEMORY = '/packages/adapter-memory/dist/index.js';
const roots = {
  base: process.env.BASE_ROOT ?? '/tmp/base',
  new: process.env.NEW_ROOT ?? fileURLToPath(new URL('../../..', import.meta.url)),
};
const sideNames = process.env.SIDE ? [process.env.SIDE] : ['base', 'new'];
const sides = {};
for (const name of sideNames) {
  sides[name] = { mem: await import(roots[name] + MEMORY), adk: await import(roots[name] + ADK) };
}
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const size = (n) => (process.env.N ? Number(process.env.N) : n);
let serial = 0;

/** An event as a model turn makes it: text, and a delta with a session, user:, app: and temp: key. */
function turn(adk, i, withApp = true) {
  const stateDelta = { count: i, 'user:seen': i, 'temp:scratch': i };
  if (withApp) stateDelta['app:hits'] = i;
  return adk.createEvent({
    invocationId: 'inv',
    author: 'agent',
    timestamp: Date.now() / 1000 + i,
    content: { role: 'model', parts: [{ text: `reply number ${i} with some words in it` }] },
    actions: adk.createEventActions({ stateDelta }),
  });
}

async function appends(service, adk, n, prepare) {
  let session;
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    if (i % 10 === 0) {
      session = await service.createSession({ appName: 'a', userId: 'u', sessionId: `s${serial++}` });
    }
    const event = turn(adk, i, !prepare);
    if (prepare) prepare(adk, session, event, i);
    await service.appendEvent({ session, event });
  }
  return n / ((performance.now() - started) / 1000);
}

async function reads(service, key, n) {
  const started = performance.now();
  for (let i = 0; i < n; i++) await service.getSession(key);
  return n / ((performance.now() - started) / 1000);
}

async function history(service, adk, sessionId, events) {
  const session = await service.createSession({ appName: 'a', userId: 'u', sessionId });
  for (let i = 0; i < events; i++) await service.appendEvent({ session, event: turn(adk, i) });
}

/** Turns per second on a session that holds `events` events: a whole read of it, then 4 appends through the read. */
async function turns(mem, adk, events, options) {
  const service = new mem.MemorySessionService({ ...options, logCacheBytes: 256 * 1024 * 1024 });
  const sessionId = `t${serial++}`;
  await history(service, adk, sessionId, events);
  const key = { appName: 'a', userId: 'u', sessionId };
  await service.getSession(key);
  const n = size(100);
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const session = await service.getSession(key);
    for (let k = 0; k < 4; k++) await service.appendEvent({ session, event: turn(adk, events + i * 4 + k) });
  }
  return n / ((performance.now() - started) / 1000);
}

const workloads = {
  /** appendEvent into sessions of up to 10 events. */
  append10: ({ mem, adk }) => appends(new mem.MemorySessionService(), adk, size(4000)),
  /** The same through @google/adk's InMemorySessionService (measured once, with the base build's ADK). */
  adkAppend10: ({ adk }) => appends(new adk.InMemorySessionService(), adk, size(4000)),
  /** appendEvent of events whose writes went through ADK's State (write-order marks on the delta). */
  appendMarked: ({ mem, adk }) =>
    appends(new mem.MemorySessionService(), adk, size(4000), (adk, session, event, i) => {
      const state = new adk.State(session.state, event.actions.stateDelta);
      state.set('tool', i);
      state.set('user:tool', i);
    }),
  /** getSession with numRecentEvents: 10 of a 100-event history. */
  async get10({ mem, adk }) {
    const service = new mem.MemorySessionService();
    await history(service, adk, 'g', 100);
    return reads(service, { appName: 'a', userId: 'u', sessionId: 'g', config: { numRecentEvents: 10 } }, size(4000));
  },
  /** getSession of a whole 1,000-event history. */
  async getFull1000({ mem, adk }) {
    const service = new mem.MemorySessionService();
    await history(service, adk, 'f', 1000);
    return reads(service, { appName: 'a', userId: 'u', sessionId: 'f' }, size(60));
  },
  /** The same without the log cache: each read decodes every event. */
  async getFull1000uncached({ mem, adk }) {
    const service = new mem.MemorySessionService({ logCacheBytes: 0 });
    await history(service, adk, 'f', 1000);
    return reads(service, { appName: 'a', userId: 'u', sessionId: 'f' }, size(60));
  },
  /** A Runner's turn on a session of 4,000 events read before: a whole getSession, then 4 appends through it. */
  turns4000: ({ mem, adk }) => turns(mem, adk, 4000, { shareReadEvents: true }),
  /** The same at 20,000 events. */
  turns20000: ({ mem, adk }) => turns(mem, adk, 20_000, { shareReadEvents: true }),
  /** The same at 4,000 events, each read with its own copies of the events (the default). */
  turns4000copies: ({ mem, adk }) => turns(mem, adk, 4000, {}),
  /** getSession (10 recent events) of a session whose app has 10,000 app: keys. */
  async getApp10k({ mem }) {
    const service = new mem.MemorySessionService();
    const state = {};
    for (let i = 0; i < 10_000; i++) state[`app:k${i}`] = { v: i, name: `value ${i}` };
    await service.createSession({ appName: 'big', userId: 'u', sessionId: 'b', state });
    return reads(service, { appName: 'big', userId: 'u', sessionId: 'b', config: { numRecentEvents: 10 } }, size(200));
  },
};

const chosen = process.argv[2] ? process.argv[2].split(',') : Object.keys(workloads);
const samples = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const name of chosen) {
    const order = round % 2 === 0 ? sideNames : [...sideNames].reverse();
    for (const side of order) {
      if (name === 'adkAppend10' && side !== sideNames[0]) continue;
      const rate = await workloads[name](sides[side]);
      if (round === 0 && ROUNDS > 1) continue; // the first round warms up
      const cell = `${name}/${side}`;
      samples[cell] = [...(samples[cell] ?? []), rate];
    }
  }
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
for (const name of chosen) {
  const cells = sideNames.map((side) => samples[`${name}/${side}`]).map((values) => (values ? median(values) : NaN));
  const line = sideNames.map((side, index) => `${side} ${cells[index].toFixed(0).padStart(8)}/s`).join('  ');
  const ratio =
    cells.length === 2 && Number.isFinite(cells[1]) ? `  new/base ${(cells[1] / cells[0]).toFixed(2)}×` : '';
  console.log(`${name.padEnd(13)} ${line}${ratio}`);
}
