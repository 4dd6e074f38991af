/**
 * Runs the `adk-state` command from source in a child process, the way a user
 * runs the installed bin, and waits until its server answers.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort, type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
export const AGENTS_DIR = fileURLToPath(new URL('../fixtures/agents', import.meta.url));

/** A running `adk-state` process. */
export interface CliProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Sends `signal` and resolves with the exit code (rejects if it does not exit within 15 s). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `adk-state <args>` and resolves once it prints `ready` (within 60 s). */
export async function startCli(
  args: string[],
  port: number,
  ready = 'ADK API Server started',
  env: NodeJS.ProcessEnv = {},
): Promise<CliProcess> {
  return startCommand([process.execPath, '--import', 'tsx', CLI, ...args], port, ready, env);
}

/**
 * `adk-state <args>` under `script`, on a pseudo-terminal `columns` wide, as a
 * user at a terminal runs it; resolves once it prints `ready`.
 */
export function startCliOnTerminal(args: string[], columns: number, ready: string): Promise<CliProcess> {
  const quote = (text: string) => `'${text.replace(/'/g, "'\\''")}'`;
  const command = [process.execPath, '--import', 'tsx', CLI, ...args].map(quote).join(' ');
  return startCommand(['script', '-qfec', `stty cols ${columns} rows 24; exec ${command}`, '/dev/null'], 0, ready);
}

/** The path of the `adk-state` entry the tests run. */
export const CLI_ENTRY = CLI;

async function startCommand(
  argv: string[],
  port: number,
  ready: string,
  env: NodeJS.ProcessEnv = {},
): Promise<CliProcess> {
  const [file, ...rest] = argv as [string, ...string[]];
  const child = spawn(file, rest, {
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`adk-state did not start within 60 s:\n${output}`)), 60_000);
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(ready)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`adk-state exited with ${code} before starting:\n${output}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`adk-state did not exit within 15 s of ${signal}:\n${output}`));
        }, 15_000);
      });
      try {
        return await Promise.race([exited, late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Runs `adk-state <args>` to its end (within 60 s); resolves with its exit code and output. */
export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', CLI, ...args],
      { env: { ...process.env, NO_COLOR: '1', ...env }, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? ((error as { code?: unknown }).code ?? null) : 0;
        if (error && typeof code !== 'number') reject(error);
        else resolve({ code: code as number, stdout, stderr });
      },
    );
  });
}

/** A fresh redis-server and `adk-state <command>` serving the sample agents on it. */
export async function serveAgentsOnRedis(
  command: 'web' | 'api_server',
): Promise<{ redis: RedisServer; cli: CliProcess; stop(): Promise<void> }> {
  const redis = await startRedisServer();
  const port = await freePort();
  const cli = await startCli(
    [command, AGENTS_DIR, '--host', '127.0.0.1', '--port', String(port), '--session_service_uri', redis.url],
    port,
  );
  return {
    redis,
    cli,
    async stop() {
      await cli.stop();
      await redis.stop();
    },
  };
}

/** `fetch` of `path` on `base` with a JSON body; resolves with the status and the parsed body. */
export async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}
