/**
 * `adk-state migrate` from an ADK SQL store whose server accepts the
 * connection and never says a word: the opening of the source is bounded by
 * `--check-timeout`, on each scheme opened read-only over the network.
 */
import { type AddressInfo, createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runCli } from './support/cli-process.js';

describe('adk-state migrate from a SQL server that never answers', () => {
  it.each([
    'postgresql',
    'mysql',
    'mariadb',
  ])('stops within the start-up check bound on %s://, exit 1, without the password', async (scheme) => {
    const silent = createServer(() => {});
    await new Promise<void>((listening) => silent.listen(0, '127.0.0.1', listening));
    const { port } = silent.address() as AddressInfo;
    try {
      const url = `${scheme}://ada:secret@127.0.0.1:${port}/adk`;
      const started = Date.now();
      const run = await runCli(['migrate', '--from', url, '--to', 'redis://127.0.0.1:1', '--check-timeout', '1']);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(run.stderr.trim()).toBe(
        `adk-state migrate: the session store ${scheme}://ada:***@127.0.0.1:${port}/adk did not answer in time: no answer within 1 s`,
      );
      // The bound holds: well under the 10 s default, with the process's own start-up.
      expect(Date.now() - started).toBeLessThan(9_000);
    } finally {
      silent.close();
    }
  });
});
