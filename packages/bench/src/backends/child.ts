/**
 * Servers written in TypeScript that the bench runs in a child process of
 * their own, so that serving requests never competes with the measured
 * client for the bench's event loop. The script prints one JSON line when it
 * is ready and serves until SIGTERM.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ChildServer {
  /** The JSON line the script printed when it was ready. */
  info: Record<string, unknown>;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

export async function startChildServer(script: string, args: string[] = [], timeoutMs = 30_000): Promise<ChildServer> {
  const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), script, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  exited.then(() => children.delete(child));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.kill('SIGTERM');
    await exited;
    clearTimeout(timer);
  };
  try {
    const info = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${script} was not ready within ${timeoutMs} ms`)), timeoutMs);
      const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
      lines.on('line', (line) => {
        if (!line.startsWith('{')) return;
        clearTimeout(timer);
        lines.close();
        try {
          resolve(JSON.parse(line) as Record<string, unknown>);
        } catch (error) {
          reject(error);
        }
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${script} exited (${code ?? signal}) before it was ready: ${stderr.trim()}`));
      });
    });
    // Drain the rest of its output so that the pipe never fills.
    child.stdout?.resume();
    return { info, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
