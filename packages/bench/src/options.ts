/**
 * The sizes and knobs of a bench run, their defaults, the `--quick` preset
 * and the command-line parser.
 */
import { parseArgs } from 'node:util';

/** How much work each workload does. */
export interface BenchSizes {
  /** Workload 1 and 2: events appended per sample (in all, over every session). */
  appendEvents: number;
  /** Workload 2: sessions appending at the same time through one service. */
  concurrentSessions: number;
  /** Workload 3: the short history. */
  smallHistory: number;
  /** Workload 3: the long history. */
  largeHistory: number;
  /** Workload 3: `numRecentEvents`. */
  recentEvents: number;
  /** Workload 4: the history read whole. */
  wholeHistory: number;
  /** Workload 5: sessions of the listed app. */
  listSessions: number;
  /** Workload 5: users those sessions belong to. */
  listUsers: number;
  /** Workload 5: the page size. */
  listPage: number;
  /** Workload 7: events stored to measure the heap. */
  memoryEvents: number;
  /** Raw round trips per sample of a backend's physical limit. */
  rawOps: number;
  /** Workload 8 (Redis on a cluster): users of the one app. */
  clusterUsers: number;
  /** Workload 8: appends per user in each of its two phases. */
  clusterAppends: number;
  /** Workload 9: turns of the conversation through ADK's Runner (figures at turns 10, 100 and 1,000, as far as it goes). */
  conversationTurns: number;
}

export interface BenchOptions {
  sizes: BenchSizes;
  /** Recorded samples per workload and store (a warm-up sample comes first and is dropped). */
  repetitions: number;
  /** Read workloads: each sample repeats the read for at least this long. */
  minSampleMs: number;
  /**
   * Append workloads: a sample stops early once it has run this long, so a
   * slow store costs bounded time; the table shows how many events it did.
   */
  maxSampleMs: number;
  /** A raw round-trip sample stops early after this long. */
  probeMaxMs: number;
  /**
   * Untimed work each sample of workloads 1–5, 9 and 10 and of the raw round
   * trips runs first, for this long: the collection forced before a sample
   * deoptimizes code the sample runs, and this lets it be optimized again
   * before the clock starts (README, "Warm-up").
   */
  warmMs: number;
  /** Concurrent requests of the raw round-trip probes' concurrent variant. */
  rawConcurrency: number;
  /** Pin the bench and the servers to separate cores (see affinity.ts); `--no-pin` leaves placement to the scheduler. */
  pin: boolean;
  /** Only these target ids (every target when undefined). */
  only: string[] | undefined;
  /** Where results.json, results.md and chart.svg go; undefined writes nothing. */
  outDir: string | undefined;
  quick: boolean;
  /** The command line to print with the results. */
  command: string;
}

export const DEFAULT_SIZES: BenchSizes = {
  appendEvents: 5_000,
  concurrentSessions: 32,
  smallHistory: 100,
  largeHistory: 10_000,
  recentEvents: 10,
  wholeHistory: 1_000,
  listSessions: 10_000,
  listUsers: 100,
  listPage: 50,
  memoryEvents: 10_000,
  conversationTurns: 1_000,
  rawOps: 2_000,
  clusterUsers: 600,
  clusterAppends: 5,
};

export const QUICK_SIZES: BenchSizes = {
  appendEvents: 300,
  concurrentSessions: 8,
  smallHistory: 20,
  largeHistory: 500,
  recentEvents: 10,
  wholeHistory: 100,
  listSessions: 300,
  listUsers: 10,
  listPage: 50,
  memoryEvents: 1_000,
  rawOps: 300,
  clusterUsers: 120,
  clusterAppends: 2,
  conversationTurns: 100,
};

export function defaultOptions(quick = false): BenchOptions {
  return {
    sizes: { ...(quick ? QUICK_SIZES : DEFAULT_SIZES) },
    repetitions: quick ? 2 : 5,
    minSampleMs: quick ? 20 : 200,
    maxSampleMs: quick ? 500 : 3_000,
    probeMaxMs: quick ? 200 : 750,
    warmMs: quick ? 50 : 400,
    rawConcurrency: 32,
    pin: !quick,
    only: undefined,
    outDir: undefined,
    quick,
    command: 'pnpm bench',
  };
}

export const USAGE = `pnpm bench [-- options]

  --quick                 tiny sizes, 2 repetitions, writes nothing unless --out is given
  --only <ids>            comma-separated target ids (e.g. memory,redis,adk-db-postgresql)
  --repetitions <n>       recorded samples per workload and store (default 5)
  --events <n>            events per append sample (default 5000)
  --sessions <n>          concurrent sessions of workload 2 (default 32)
  --large-history <n>     long history of workload 3 (default 10000)
  --whole-history <n>     history read whole in workload 4 (default 1000)
  --list-sessions <n>     sessions of the listed app in workload 5 (default 10000)
  --conversation-turns <n>  turns of the conversation in workload 9 (default 1000)
  --max-sample-ms <ms>    an append sample stops after this long (default 3000)
  --min-sample-ms <ms>    a read sample repeats the read for at least this long (default 200)
  --warm-ms <ms>          untimed work before each sample, after its forced collection (default 400)
  --out <dir>             where to write results.json, results.md, chart.svg (default docs/bench)
  --no-write              print the table only
  --no-pin                leave the bench and the servers wherever the scheduler puts them
  --help`;

/** Parses the command line; `defaultOutDir` is used unless --quick, --out or --no-write say otherwise. */
export function parseOptions(argv: string[], defaultOutDir: string): BenchOptions | 'help' {
  const { values } = parseArgs({
    args: argv.filter((arg) => arg !== '--'),
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      repetitions: { type: 'string' },
      events: { type: 'string' },
      sessions: { type: 'string' },
      'large-history': { type: 'string' },
      'whole-history': { type: 'string' },
      'list-sessions': { type: 'string' },
      'conversation-turns': { type: 'string' },
      'max-sample-ms': { type: 'string' },
      'min-sample-ms': { type: 'string' },
      'warm-ms': { type: 'string' },
      out: { type: 'string' },
      'no-write': { type: 'boolean', default: false },
      'no-pin': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) return 'help';
  const options = defaultOptions(values.quick);
  const sizes = options.sizes;
  if (values.only !== undefined) {
    options.only = values.only
      .split(',')
      .map((id) => id.trim())
      .filter((id) => id !== '');
  }
  if (values.repetitions !== undefined) options.repetitions = positive('repetitions', values.repetitions);
  if (values.events !== undefined) sizes.appendEvents = positive('events', values.events);
  if (values.sessions !== undefined) sizes.concurrentSessions = positive('sessions', values.sessions);
  if (values['large-history'] !== undefined) sizes.largeHistory = positive('large-history', values['large-history']);
  if (values['whole-history'] !== undefined) sizes.wholeHistory = positive('whole-history', values['whole-history']);
  if (values['list-sessions'] !== undefined) sizes.listSessions = positive('list-sessions', values['list-sessions']);
  if (values['conversation-turns'] !== undefined) {
    sizes.conversationTurns = positive('conversation-turns', values['conversation-turns']);
  }
  if (values['max-sample-ms'] !== undefined) options.maxSampleMs = positive('max-sample-ms', values['max-sample-ms']);
  if (values['min-sample-ms'] !== undefined) options.minSampleMs = positive('min-sample-ms', values['min-sample-ms']);
  if (values['warm-ms'] !== undefined) options.warmMs = positive('warm-ms', values['warm-ms']);
  sizes.listUsers = Math.min(sizes.listUsers, sizes.listSessions);
  if (values['no-pin']) options.pin = false;
  if (values['no-write']) options.outDir = undefined;
  else if (values.out !== undefined) options.outDir = values.out;
  else if (!values.quick) options.outDir = defaultOutDir;
  options.command = ['pnpm bench', ...argv.filter((arg) => arg !== '--')].join(' ');
  return options;
}

function positive(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive integer, got ${text}`);
  return value;
}
