/**
 * Starts real `redis-server` processes for tests and benchmarks: a single
 * server (clusters are in `cluster.ts`), on 127.0.0.1 with free ports and a private
 * temporary directory each. Nothing is installed; the binary comes from
 * REDIS_SERVER_BIN, /usr/bin/redis-server or the PATH (Debian: `apt-get
 * install redis-server`). Every process started here is killed when the Node
 * process exits, even if a test forgets to stop it (and resumed first, if a
 * test paused it).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../ports.js';

const run = promisify(execFile);
const HOST = '127.0.0.1';

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /** Turn the append-only file on (default off, and no RDB snapshots either). */
  appendonly?: boolean;
  /** `appendfsync` when `appendonly` is on (default `always`). */
  appendfsync?: 'always' | 'everysec' | 'no';
  /** Data directory (default: a new temporary directory, removed by `stop()`). */
  dir?: string;
  /** Port (default: a free one). */
  port?: number;
  /** More `--name value` arguments for redis-server. */
  args?: string[];
}

/** A running redis-server started by {@link startRedisServer}. */
export interface RedisServer {
  host: string;
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  dir: string;
  /** The process id of the current process (changes on restart). */
  readonly pid: number;
  /** Stops the server (SIGTERM, or SIGKILL after 5 s) and removes a temporary directory. */
  stop(): Promise<void>;
  /** Kills the server at once (SIGKILL by default): no shutdown, no final AOF rewrite. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the server again on the same port and directory (after `kill`). */
  restart(): Promise<void>;
  /**
   * Freezes the process (SIGSTOP): its port still accepts connections and
   * its memory keeps every key, but nothing is answered until {@link resume}.
   * Resolves once the process is stopped.
   */
  pause(): Promise<void>;
  /** Lets a paused process run again (SIGCONT); a no-op when it is not paused. */
  resume(): void;
  /** True between {@link pause} and {@link resume}. */
  readonly paused: boolean;
}

/** The pids of the servers started by this process that are paused right now (resumed on exit). */
const pausedPids = new Set<number>();

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const pid of pausedPids) signalPid(pid, 'SIGCONT');
  for (const child of running) child.kill('SIGKILL');
});

/** Sends `signal` to `pid`; false when there is no such process any more. */
function signalPid(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** The redis-server binary: REDIS_SERVER_BIN, /usr/bin/redis-server, else `redis-server` from the PATH. */
export function redisServerBinary(): string {
  if (process.env.REDIS_SERVER_BIN) return process.env.REDIS_SERVER_BIN;
  return existsSync('/usr/bin/redis-server') ? '/usr/bin/redis-server' : 'redis-server';
}

/** The redis-cli binary: REDIS_CLI_BIN, /usr/bin/redis-cli, else `redis-cli` from the PATH. */
export function redisCliBinary(): string {
  if (process.env.REDIS_CLI_BIN) return process.env.REDIS_CLI_BIN;
  return existsSync('/usr/bin/redis-cli') ? '/usr/bin/redis-cli' : 'redis-cli';
}

/** True when a redis-server binary can be started here. */
export async function hasRedisServer(): Promise<boolean> {
  try {
    await run(redisServerBinary(), ['--version']);
    return true;
  } catch {
    return false;
  }
}

/** Runs redis-cli against a local port and returns its output. */
export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run(redisCliBinary(), ['-h', HOST, '-p', String(port), ...args]);
  return stdout.trim();
}

/** Starts one redis-server on 127.0.0.1; resolves once it answers PING. */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'adk-state-redis-')));
  let port = options.port ?? (await freePort());
  let child: ChildProcess | undefined;
  const args = () => [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.appendonly ? 'yes' : 'no',
    '--appendfsync',
    options.appendfsync ?? 'always',
    '--daemonize',
    'no',
    '--protected-mode',
    'yes',
    ...(options.args ?? []),
  ];

  const launch = async (): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      try {
        child = await spawnServer(args());
        return;
      } catch (error) {
        // Another process may have taken the free port in between: try another one.
        if (options.port !== undefined || attempt >= 4 || !String(error).includes('Address already in use'))
          throw error;
        port = await freePort();
      }
    }
  };
  await launch();

  let pausedPid: number | undefined;
  const resume = () => {
    if (pausedPid === undefined) return;
    signalPid(pausedPid, 'SIGCONT');
    pausedPids.delete(pausedPid);
    pausedPid = undefined;
  };

  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    const current = child;
    // A stopped process acts on SIGTERM only once it runs again.
    resume();
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => current.once('exit', () => resolve()));
    current.kill(signal);
    await exited;
  };

  return {
    host: HOST,
    get port() {
      return port;
    },
    get url() {
      return `redis://${HOST}:${port}`;
    },
    dir,
    get pid() {
      return child?.pid ?? -1;
    },
    kill,
    async pause() {
      const current = child;
      if (pausedPid !== undefined || !current?.pid || current.exitCode !== null || current.signalCode !== null) return;
      if (!signalPid(current.pid, 'SIGSTOP')) return;
      pausedPid = current.pid;
      pausedPids.add(current.pid);
      await untilStopped(current.pid);
    },
    resume,
    get paused() {
      return pausedPid !== undefined;
    },
    async restart() {
      await kill();
      child = await spawnServer(args());
    },
    async stop() {
      resume();
      const current = child;
      if (current && current.exitCode === null && current.signalCode === null) {
        const timer = setTimeout(() => current.kill('SIGKILL'), 5_000);
        await kill('SIGTERM');
        clearTimeout(timer);
      }
      if (ownDir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Waits (up to 2 s) until Linux reports `pid` stopped; elsewhere, a short pause instead. */
async function untilStopped(pid: number): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    let stat: string;
    try {
      stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return;
    }
    // The state follows the command name, which is in parentheses.
    if (/^[Tt]$/.test(stat.slice(stat.lastIndexOf(')') + 2).charAt(0))) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Spawns redis-server and waits for "Ready to accept connections" (or its early exit). */
function spawnServer(args: string[]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(redisServerBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    let output = '';
    let ready = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`redis-server did not start within 20 s:\n${output}`));
    }, 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (!ready && output.includes('Ready to accept connections')) {
        ready = true;
        clearTimeout(timer);
        resolve(child);
      }
      // Keep only the tail of the log (it is only used in error messages).
      if (output.length > 20_000) output = output.slice(-10_000);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('error', (error) => {
      clearTimeout(timer);
      running.delete(child);
      reject(error);
    });
    child.once('exit', (code, signal) => {
      running.delete(child);
      if (!ready) {
        clearTimeout(timer);
        reject(new Error(`redis-server exited (${code ?? signal}) before it was ready:\n${output}`));
      }
    });
  });
}
