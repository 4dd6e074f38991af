/**
 * The start-up check, through the `adk-state` command on real Redis servers:
 * `web`, `api_server`, `inspect` and `migrate` (either side) stop at once on a
 * store that refuses the connection, does not answer, refuses the password or
 * has no such database, with exit code 1 and a message that names the store
 * and the cause, and never the password. A server that starts names its store.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENTS_DIR, call, runCli, startCli } from './support/cli-process.js';

/** The server's password: every character that needs percent-encoding in a URI. */
const PASSWORD = 'p/a#s?s@w%rd';
const WRONG = 'wr/o#n?g@pw%';
const encode = (password: string) => encodeURIComponent(password);

describe('the start-up check of a store', () => {
  let open: RedisServer;
  let guarded: RedisServer;
  let paused: RedisServer;
  let nothing: number;

  beforeAll(async () => {
    [open, guarded, paused] = await Promise.all([
      startRedisServer(),
      startRedisServer({ args: ['--requirepass', PASSWORD] }),
      startRedisServer(),
    ]);
    await paused.pause();
    nothing = await freePort();
  });
  afterAll(async () => {
    paused?.resume();
    await Promise.all([open?.stop(), guarded?.stop(), paused?.stop()]);
  });

  /** The store URI of each problem, and the words its message must hold. */
  const problems = () =>
    [
      ['refused', `redis://127.0.0.1:${nothing}`, 'refused the connection'],
      [
        'refused (a cluster, no node reachable)',
        `redis+cluster://127.0.0.1:${nothing},127.0.0.1:${nothing}`,
        'refused the connection',
      ],
      ['timed out', `${paused.url}/0`, 'did not answer in time'],
      ['authentication (encoded)', `redis://:${encode(WRONG)}@127.0.0.1:${guarded.port}/0`, 'refused the credentials'],
      [
        'authentication (?password=)',
        `redis://127.0.0.1:${guarded.port}/0?password=${WRONG}`,
        'refused the credentials',
      ],
      ['authentication (none given)', `redis://127.0.0.1:${guarded.port}/0`, 'refused the credentials'],
      ['unknown database', `${open.url}/99`, 'has no such database'],
    ] as const;

  const commands = (uri: string) =>
    [
      ['web', ['web', AGENTS_DIR, '--port', '0', '--session_service_uri', uri, '--check_timeout', '1']],
      ['api_server', ['api_server', AGENTS_DIR, '--port', '0', '--check_timeout', '1'], { DATABASE_URL: uri }],
      ['inspect', ['inspect', uri, '--app', 'greeter', '--check-timeout', '1']],
      // The other side is a store that passes its check (migrate refuses memory://).
      ['migrate --from', ['migrate', '--from', uri, '--to', `${open.url}/1`, '--app', 'a', '--check-timeout', '1']],
      ['migrate --to', ['migrate', '--from', `${open.url}/2`, '--to', uri, '--app', 'a', '--check-timeout', '1']],
    ] as const;

  for (const command of ['web', 'api_server', 'inspect', 'migrate --from', 'migrate --to']) {
    it(`${command}: exits 1 naming the store and the cause, never showing the password`, async () => {
      for (const [problem, uri, words] of problems()) {
        const [, args, env] = commands(uri).find(([name]) => name === command) as readonly [
          string,
          readonly string[],
          NodeJS.ProcessEnv?,
        ];
        const run = await runCli([...args], env);
        const output = run.stdout + run.stderr;
        expect(run.code, `${problem}: ${output}`).toBe(1);
        expect(output, problem).toContain(words);
        expect(output, problem).not.toContain('ADK API Server started');
        for (const secret of [WRONG, encode(WRONG), 'wr/o#n', PASSWORD]) expect(output, problem).not.toContain(secret);
        // The store is named, redacted.
        const port = /:(\d+)\//.exec(`${uri.replace(/\?.*/, '')}/`)?.[1];
        expect(output, problem).toContain(`127.0.0.1:${port}`);
      }
    }, 180_000);
  }

  it('the message of an unencoded password says to percent-encode it, and shows no part of the password', async () => {
    const run = await runCli(['inspect', `redis://:${WRONG}@127.0.0.1:${guarded.port}/0`, '--app', 'a']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('percent-encoded');
    expect(run.stderr).toContain('redis://:***@127.0.0.1');
    for (const part of ['wr/o', 'n?g', 'pw%']) expect(run.stderr).not.toContain(part);
  });

  it('a server that starts names its store, redacted, and where the URI came from', async () => {
    const uri = `redis://:${encode(PASSWORD)}@127.0.0.1:${guarded.port}/3`;
    for (const [args, env, origin] of [
      [['--session_service_uri', uri], {}, ''],
      [[], { DATABASE_URL: uri }, ' (from $DATABASE_URL)'],
    ] as const) {
      const port = await freePort();
      const cli = await startCli(
        ['api_server', AGENTS_DIR, '--host', '127.0.0.1', '--port', String(port), ...args],
        port,
        'with sessions in',
        env,
      );
      try {
        expect(cli.output()).toContain(`with sessions in redis://:***@127.0.0.1:${guarded.port}/3${origin}`);
        expect(cli.output()).not.toContain(PASSWORD);
        expect(cli.output()).not.toContain(encode(PASSWORD));
        expect(cli.output()).not.toContain('warning');
      } finally {
        await cli.stop();
      }
    }
    const port = await freePort();
    const memory = await startCli(['api_server', AGENTS_DIR, '--port', String(port)], port, 'with sessions in', {
      DATABASE_URL: '',
    });
    try {
      expect(memory.output()).toContain(
        'with sessions in memory:// (the default: sessions last only as long as this process)',
      );
    } finally {
      await memory.stop();
    }
  }, 120_000);

  it('hides the password in lines other code prints too (an agent that logs $DATABASE_URL)', async () => {
    const agents = await mkdtemp(join(tmpdir(), 'adk-state-loud-'));
    try {
      await mkdir(join(agents, 'loud'));
      const greeter = join(AGENTS_DIR, 'greeter', 'agent.js');
      await writeFile(
        join(agents, 'loud', 'agent.js'),
        `import { rootAgent as greeter } from ${JSON.stringify(greeter)};\n` +
          "console.log('loud agent sees ' + process.env.DATABASE_URL);\n" +
          'export const rootAgent = greeter;\n',
      );
      const uri = `redis://:${encode(PASSWORD)}@127.0.0.1:${guarded.port}/4`;
      const port = await freePort();
      const cli = await startCli(['api_server', agents, '--port', String(port)], port, 'with sessions in', {
        DATABASE_URL: uri,
      });
      try {
        expect((await call(cli.url, 'GET', '/list-apps')).body, cli.output()).toEqual(['loud']);
        expect((await call(cli.url, 'POST', '/apps/loud/users/u/sessions', {})).status).toBe(200);
        await expect.poll(() => cli.output(), { timeout: 15_000 }).toContain('loud agent sees');
        expect(cli.output()).toContain(`loud agent sees redis://:***@127.0.0.1:${guarded.port}/4`);
        expect(cli.output()).not.toContain(encode(PASSWORD));
      } finally {
        await cli.stop();
      }
    } finally {
      await rm(agents, { recursive: true, force: true });
    }
  }, 120_000);

  it('--help shows the store $DATABASE_URL names, redacted', async () => {
    const uri = `redis://me:${encode(PASSWORD)}@127.0.0.1:${guarded.port}/3`;
    const run = await runCli(['web', '--help'], { DATABASE_URL: uri });
    expect(run.code).toBe(0);
    // The help wraps its lines: compare with the wrapping undone.
    expect(run.stdout.replace(/\s+/g, ' ')).toContain(
      `now $DATABASE_URL is redis://me:***@127.0.0.1:${guarded.port}/3`,
    );
    expect(run.stdout).not.toContain(encode(PASSWORD));
  });

  it('--host that is not a loopback address: a warning that says what ADK does not check', async () => {
    // 192.0.2.1 is a documentation address no interface holds: the bind fails after the warning, nothing listens.
    const run = await runCli(['api_server', AGENTS_DIR, '--host', '192.0.2.1', '--port', '0']);
    expect(run.stderr).toContain('warning: --host 192.0.2.1 is not a loopback address');
    expect(run.stderr).toContain('checks no Host header and no Origin');
    expect(run.stderr).toContain('can read, write and delete every session');
    expect(run.code).toBe(1);
  });

  it('an agents_dir that does not exist: exits 1 saying so, before anything starts', async () => {
    const missing = join(AGENTS_DIR, 'no-such-agents');
    for (const command of ['web', 'api_server']) {
      const run = await runCli([command, missing, '--port', '0']);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(run.stderr.trim()).toBe(`adk-state ${command}: agents_dir ${missing} does not exist`);
    }
  });

  it('inspect --web with a --host that is not a loopback address: a warning of its own, about a read-only page', async () => {
    const run = await runCli(['inspect', '--web', '--host', '192.0.2.1', '--port', '0', 'memory://', '--app', 'shop']);
    const [warning] = run.stderr.split('\n');
    expect(warning).toContain('adk-state inspect: warning: --host 192.0.2.1 is not a loopback address');
    expect(warning).toContain('anyone who can reach this address');
    expect(warning).toContain('can read every session of the store');
    expect(warning).toContain('The page writes nothing');
    expect(warning).not.toContain("ADK's server");
    expect(warning).not.toContain('write and delete');
    expect(run.code).toBe(1);
  });
});
