/**
 * Workload 11: client CPU per operation on the Redis store, beside the same
 * round trips sent raw from the same process. For a read, "raw" is the very
 * command the store sent for it (captured from the store's connection, then
 * replayed with `call` on a second connection): the same script, arguments,
 * server work and reply, so the difference is what this process does around
 * it (core's checks, the adapter's arguments and reply parsing, building the
 * ADK session). An append cannot be replayed (its revision check would
 * refuse the copy), so its raw side is the append script of the backend's
 * probes: one EVALSHA running the commands of an append.
 */
import { Redis } from 'ioredis';
import { APPEND_KEYS, APPEND_SCRIPT, appendScriptArguments } from './backends/redis.js';
import { benchEvent, benchEvents } from './events.js';
import { type Summary, summarize } from './stats.js';
import { timeRead } from './workloads.js';

/** One operation's figures: CPU µs and wall ms per call, of the store and of its raw round trips. */
export interface ClientCpuRow {
  operation: string;
  /** What the raw side sends per call. */
  raw: string;
  storeCpuMicros: Summary;
  rawCpuMicros: Summary;
  storeMs: Summary;
  rawMs: Summary;
}

export interface ClientCpuResult {
  rows: ClientCpuRow[];
  /** Events in the session read, sessions in the listed app. */
  events: number;
  sessions: number;
  error?: string;
}

export interface ClientCpuOptions {
  url: string;
  /** Names this run's keys apart from other runs'. */
  runId: string;
  repetitions: number;
  /** A sample repeats its operation for at least this long. */
  minSampleMs: number;
}

/** Events of the session read, sessions of the listed app, and the page listed. */
const EVENTS = 100;
const SESSIONS = 200;
const PAGE = 50;

type Call = () => Promise<unknown>;

interface Operation {
  name: string;
  raw: string;
  store: Call;
  /** Undefined: the raw side is replayed from what `store` sent. */
  rawCall?: Call;
}

/** A command a connection sent, as `call` takes it. */
type Sent = [string, ...Array<string | Buffer | number>];

export async function measureRedisClientCpu(options: ClientCpuOptions): Promise<ClientCpuResult> {
  const { RedisSessionService } = await import('@adk-state/adapter-redis');
  const client = new Redis(options.url);
  const raw = new Redis(options.url);
  // What the store's connection sends, recorded only while `sent` is set (the warm-up call).
  let sent: Sent[] | undefined;
  const send = client.sendCommand.bind(client);
  client.sendCommand = ((command: { name: string; args: Array<string | Buffer | number> }, ...rest: unknown[]) => {
    sent?.push([command.name, ...command.args]);
    return (send as (...all: unknown[]) => unknown)(command, ...rest);
  }) as typeof client.sendCommand;
  const keyPrefix = `bench-cpu-${options.runId}:`;
  const cached = new RedisSessionService({ client, keyPrefix });
  const uncached = new RedisSessionService({ client, keyPrefix, logCacheBytes: 0 });
  try {
    const appName = 'cpu-app';
    const key = { appName, userId: 'reader', sessionId: 'history' };
    const history = await cached.createSession({ ...key, state: { 'app:seen': 0, 'user:name': 'reader' } });
    for (const event of benchEvents(EVENTS, 'cpu-history')) await cached.appendEvent({ session: history, event });
    for (let index = 0; index < SESSIONS; index++) {
      await cached.createSession({ appName, userId: `user-${index % 20}`, state: { 'user:k': index } });
    }
    const writer = await cached.createSession({ appName: 'cpu-writes', userId: 'writer' });
    let turn = 0;
    const appendSha = String(await raw.script('LOAD', APPEND_SCRIPT));
    let rawAppends = 0;
    const operations: Operation[] = [
      {
        name: 'appendEvent (one session, user: and app: keys)',
        raw: `EVALSHA of the append script (${APPEND_KEYS.length} keys, the commands of an append)`,
        store: () => cached.appendEvent({ session: writer, event: benchEvent(turn++, 'cpu-writes') }),
        rawCall: () =>
          raw.evalsha(appendSha, APPEND_KEYS.length, ...APPEND_KEYS, ...appendScriptArguments(++rawAppends)),
      },
      {
        name: `getSession, the last 10 of ${EVENTS} events`,
        raw: 'the same EVALSHA',
        store: () => cached.getSession({ ...key, config: { numRecentEvents: 10 } }),
      },
      {
        name: `getSession, all ${EVENTS} events, read before (the log cache)`,
        raw: 'the same EVALSHA (the head, no events)',
        store: () => cached.getSession(key),
      },
      {
        name: `getSession, all ${EVENTS} events, logCacheBytes: 0`,
        raw: 'the same EVALSHA',
        store: () => uncached.getSession(key),
      },
      {
        name: `listSessions, a page of ${PAGE} of ${SESSIONS}`,
        raw: 'the same EVALSHA',
        store: () => cached.listSessions({ appName, limit: PAGE, order: 'desc' }),
      },
    ];
    const figures = operations.map(() => ({
      storeCpu: [] as number[],
      rawCpu: [] as number[],
      storeMs: [] as number[],
      rawMs: [] as number[],
    }));
    for (let repetition = 0; repetition <= options.repetitions; repetition++) {
      for (const [index, operation] of operations.entries()) {
        // Warm: the store's call once, and what it sent becomes the raw side.
        const recorded: Sent[] = [];
        sent = recorded;
        try {
          await operation.store();
        } finally {
          sent = undefined;
        }
        const replay = operation.rawCall ?? replayOf(raw, recorded);
        const sides: Array<['store' | 'raw', Call]> = [
          ['store', operation.store],
          ['raw', replay],
        ];
        if (repetition % 2 === 1) sides.reverse();
        for (const [side, call] of sides) {
          const sample = await cpuSample(call, repetition === 0 ? options.minSampleMs / 4 : options.minSampleMs);
          if (repetition === 0) continue;
          const slot = figures[index] as (typeof figures)[number];
          (side === 'store' ? slot.storeCpu : slot.rawCpu).push(sample.cpuMicros);
          (side === 'store' ? slot.storeMs : slot.rawMs).push(sample.ms);
        }
      }
    }
    return {
      events: EVENTS,
      sessions: SESSIONS,
      rows: operations.map((operation, index) => {
        const slot = figures[index] as (typeof figures)[number];
        return {
          operation: operation.name,
          raw: operation.raw,
          storeCpuMicros: summarize(slot.storeCpu),
          rawCpuMicros: summarize(slot.rawCpu),
          storeMs: summarize(slot.storeMs),
          rawMs: summarize(slot.rawMs),
        };
      }),
    };
  } finally {
    client.disconnect();
    raw.disconnect();
  }
}

/** Sends what one store call sent, command after command, on `raw`. */
function replayOf(raw: Redis, commands: Sent[]): Call {
  if (commands.length === 0) throw new Error('the store sent nothing to replay');
  return async () => {
    for (const [name, ...args] of commands) await raw.call(name, ...args);
  };
}

/** Repeats `call` one at a time for at least `minMs` (and 20 calls): CPU µs and wall ms per call. */
async function cpuSample(call: Call, minMs: number): Promise<{ cpuMicros: number; ms: number }> {
  const cpu = process.cpuUsage();
  const sample = await timeRead(call, minMs, 20);
  const used = process.cpuUsage(cpu);
  return { cpuMicros: (used.user + used.system) / sample.iterations, ms: sample.msPerOperation };
}
