/** Small helpers for the servers the bench starts: free ports and commands. */
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (typeof address === 'object' && address) resolve(address.port);
        else reject(new Error('could not find a free port'));
      });
    });
  });
}

/** Runs a command and returns its trimmed stdout; the error carries stderr. */
export async function run(command: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(command, args, { maxBuffer: 16 * 1024 * 1024 });
    return stdout.trim();
  } catch (error) {
    const detail = (error as { stderr?: string }).stderr?.trim();
    throw new Error(`${command} ${args.join(' ')} failed${detail ? `:\n${detail}` : ''}`, { cause: error });
  }
}

/** Runs `count` calls of `operation` on `workers` concurrent loops. */
export async function runConcurrently(
  count: number,
  workers: number,
  operation: () => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const loop = async () => {
    while (next < count) {
      next++;
      await operation();
    }
  };
  await Promise.all(Array.from({ length: Math.min(workers, count) }, loop));
}
