/**
 * `@adk-state/test-servers/child`: runs a Node script (TypeScript through
 * tsx, or JavaScript) in a child process that a test can kill at the moment
 * it chooses, and talks with it in lines: the child tells the parent what it
 * did (`acked 3`) on its stdout, the parent tells the child what to do next on
 * its stdin. Both ends are here: {@link startChild} for the test,
 * {@link tellParent} and {@link nextFromParent} for the script.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** How a child ended. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What a line is waited for with: the whole line, a pattern, or a test. */
export type LineMatch = string | RegExp | ((line: string) => boolean);

/** Options of {@link startChild}. */
export interface ChildOptions {
  /** Arguments after the script path (`process.argv.slice(2)` in the child). */
  args?: string[];
  /** Added to this process's environment. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** More arguments for `node`, before the script. */
  nodeArgs?: string[];
}

/** A running script started by {@link startChild}. */
export interface ChildScript {
  readonly pid: number;
  /** Every line the child wrote to its stdout so far. */
  readonly lines: readonly string[];
  /** What the child wrote to its stderr so far. */
  readonly stderr: string;
  /**
   * The next line (after those this returned before) that matches `match`
   * (any line if omitted); the lines in between are skipped. Rejects if the
   * child ends first, or after `timeoutMs` (default 30 s).
   */
  nextLine(match?: LineMatch, timeoutMs?: number): Promise<string>;
  /** Writes `line` and a newline to the child's stdin (see {@link nextFromParent}). */
  send(line: string): void;
  /** Closes the child's stdin: {@link nextFromParent} then returns undefined. */
  endInput(): void;
  /** Sends `signal` (default SIGKILL) and resolves once the child is gone and its output read. */
  kill(signal?: NodeJS.Signals): Promise<ChildExit>;
  /** Resolves once the child is gone and all its output is read. */
  readonly exited: Promise<ChildExit>;
  /** How the child ended, once it did. */
  readonly exit: ChildExit | undefined;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

const TYPESCRIPT = /\.(c|m)?tsx?$/;

/** The `--import` argument that lets Node run TypeScript: tsx, as this package resolves it. */
function tsxImport(): string {
  const path = createRequire(import.meta.url).resolve('tsx');
  return pathToFileURL(path).href;
}

const matches = (match: LineMatch | undefined, line: string): boolean =>
  match === undefined ||
  (typeof match === 'string' ? line === match : match instanceof RegExp ? match.test(line) : match(line));

/**
 * Starts `node <script> ...args` (with `--import tsx` for a `.ts` script),
 * its stdin and stdout pipes for the line channel, and resolves once it runs.
 */
export async function startChild(script: string | URL, options: ChildOptions = {}): Promise<ChildScript> {
  const path = script instanceof URL ? fileURLToPath(script) : script;
  const nodeArgs = [...(TYPESCRIPT.test(path) ? ['--import', tsxImport()] : []), ...(options.nodeArgs ?? [])];
  const child = spawn(process.execPath, [...nodeArgs, path, ...(options.args ?? [])], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);

  const lines: string[] = [];
  let stderr = '';
  let cursor = 0;
  let exit: ChildExit | undefined;
  let wake: Array<() => void> = [];
  const notify = () => {
    const waiting = wake;
    wake = [];
    for (const resolve of waiting) resolve();
  };

  let partial = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    partial += text;
    const parts = partial.split('\n');
    partial = parts.pop() as string;
    for (const line of parts) lines.push(line.endsWith('\r') ? line.slice(0, -1) : line);
    if (parts.length > 0) notify();
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => {
    stderr += text;
    if (stderr.length > 100_000) stderr = stderr.slice(-50_000);
  });
  // The child may die before it reads what the parent sends.
  child.stdin.on('error', () => {});

  const exited = new Promise<ChildExit>((resolve) => {
    child.once('close', (code, signal) => {
      children.delete(child);
      if (partial.length > 0) lines.push(partial);
      partial = '';
      exit = { code, signal };
      notify();
      resolve(exit);
    });
  });

  await new Promise<void>((resolve, reject) => {
    child.once('spawn', () => resolve());
    child.once('error', reject);
  });

  return {
    get pid() {
      return child.pid ?? -1;
    },
    get lines() {
      return lines;
    },
    get stderr() {
      return stderr;
    },
    async nextLine(match, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        while (cursor < lines.length) {
          const line = lines[cursor++] as string;
          if (matches(match, line)) return line;
        }
        if (exit) {
          throw new Error(
            `the child ended (${exit.code ?? exit.signal}) before it wrote the line awaited; stderr:\n${stderr}`,
          );
        }
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`the child did not write the line awaited within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wake.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    send(line) {
      child.stdin.write(`${line}\n`);
    },
    endInput() {
      child.stdin.end();
    },
    async kill(signal = 'SIGKILL') {
      if (!exit) child.kill(signal);
      return exited;
    },
    exited,
    get exit() {
      return exit;
    },
  };
}

/**
 * In the child: writes `line` and a newline to stdout at once (a synchronous
 * write), so that once this returns, the parent gets the line even if the
 * child is killed right after. Use it rather than `console.log`, whose writes
 * to a pipe may still wait in this process when it is killed.
 */
export function tellParent(line: string): void {
  let bytes = Buffer.from(`${line}\n`);
  while (bytes.length > 0) {
    try {
      bytes = bytes.subarray(writeSync(1, bytes));
    } catch (error) {
      // A full pipe: the parent reads it soon.
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
    }
  }
}

let input: { lines: string[]; waiting: Array<(line: string | undefined) => void>; closed: boolean } | undefined;

/** In the child: the next line the parent sent (see {@link ChildScript.send}); undefined once its input is closed. */
export function nextFromParent(): Promise<string | undefined> {
  if (!input) {
    const state = { lines: [] as string[], waiting: [] as Array<(line: string | undefined) => void>, closed: false };
    input = state;
    const reader = createInterface({ input: process.stdin });
    reader.on('line', (line) => {
      const waiter = state.waiting.shift();
      if (waiter) waiter(line);
      else state.lines.push(line);
    });
    reader.on('close', () => {
      state.closed = true;
      for (const waiter of state.waiting.splice(0)) waiter(undefined);
    });
  }
  const state = input;
  if (state.lines.length > 0) return Promise.resolve(state.lines.shift());
  if (state.closed) return Promise.resolve(undefined);
  return new Promise((resolve) => state.waiting.push(resolve));
}
