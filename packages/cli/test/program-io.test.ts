/**
 * `createProgram` in this process with an `io` of its own: everything
 * `migrate` shows (the live progress bar, the report, the messages) goes
 * through that `io`, redacted, and nothing to the process's stdout or stderr.
 */
import { RedisSessionService } from '@adk-state/adapter-redis';
import { type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { createEvent } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createProgram, EXIT_CODES } from '../src/program.js';

describe('createProgram with an io of its own', () => {
  let redis: RedisServer;

  beforeAll(async () => {
    redis = await startRedisServer({ args: ['--requirepass', 'pa55word'] });
  });
  afterAll(async () => {
    await redis?.stop();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** Runs `adk-state <args>` with an io of its own (`terminal`: its own 60-column terminal); returns what went where. */
  async function run(args: string[], terminal = true) {
    const printed: string[] = [];
    const errors: string[] = [];
    const written: string[] = [];
    const codes: number[] = [];
    const stdout = vi.spyOn(process.stdout, 'write');
    const stderr = vi.spyOn(process.stderr, 'write');
    const program = createProgram({
      print: (text) => printed.push(text),
      error: (message) => errors.push(message),
      exit: (code) => codes.push(code),
      env: {},
      ...(terminal ? { write: (text: string) => written.push(text), tty: true, columns: 60 } : {}),
    });
    await program.parseAsync(['node', 'adk-state', ...args]);
    const direct = [...stdout.mock.calls, ...stderr.mock.calls].map(([chunk]) => String(chunk));
    vi.restoreAllMocks();
    return { printed, errors, written, codes, direct };
  }

  it('migrate: the progress bar, the report and the exit code through io, passwords hidden', async () => {
    const source = `redis://:pa55word@127.0.0.1:${redis.port}/3`;
    const target = `redis://:pa55word@127.0.0.1:${redis.port}/4`;
    const seeding = new RedisSessionService({ url: source });
    try {
      for (const userId of ['ada', 'bob', 'cy']) {
        await seeding.createSession({ appName: 'app', userId, state: { 'user:name': userId } });
      }
    } finally {
      await seeding.close();
    }

    const { printed, errors, written, codes, direct } = await run(['migrate', '--from', source, '--to', target]);
    expect(codes).toEqual([EXIT_CODES.ok]);
    expect(errors).toEqual([]);
    // The bar is redrawn in place within the terminal's 60 columns, and ends with its own line.
    const bars = written.filter((text) => text.startsWith('\r'));
    expect(bars.length).toBe(3);
    expect(bars.at(-1)).toContain('3/3 sessions');
    const erase = '\u001b[K';
    for (const bar of bars) {
      expect(bar.endsWith(erase)).toBe(true);
      expect(Array.from(bar.slice(1, -erase.length)).length).toBeLessThan(60);
    }
    expect(written.at(-1)).toBe('\n');
    expect(printed.join('\n')).toContain('copied 3 new and 0 updated sessions');
    expect(direct).toEqual([]);

    // A target refusing its password: the message through io, neither password shown.
    const failed = await run(['migrate', '--from', source, '--to', `redis://:wr0ng@127.0.0.1:${redis.port}/4`]);
    expect(failed.codes).toEqual([EXIT_CODES.error]);
    expect(failed.errors.join('\n')).toMatch(/^adk-state migrate: /);
    const shown = [...failed.errors, ...failed.printed, ...failed.written].join('\n');
    expect(shown).not.toContain('pa55word');
    expect(shown).not.toContain('wr0ng');
    expect(failed.direct).toEqual([]);
  });

  it('migrate with print but no terminal of its own: plain progress lines through print, even when stdout is a terminal', async () => {
    const source = `redis://:pa55word@127.0.0.1:${redis.port}/5`;
    const seeding = new RedisSessionService({ url: source });
    try {
      await seeding.createSession({ appName: 'app', userId: 'ada' });
    } finally {
      await seeding.close();
    }
    const isTTY = Object.getOwnPropertyDescriptor(process.stdout, 'isTTY');
    Object.defineProperty(process.stdout, 'isTTY', { value: true, configurable: true });
    try {
      const { printed, written, codes, direct } = await run(
        ['migrate', '--from', source, '--to', `redis://:pa55word@127.0.0.1:${redis.port}/6`],
        false,
      );
      expect(codes).toEqual([EXIT_CODES.ok]);
      expect(printed.filter((line) => line.startsWith('migrate: 1/1 sessions, 0 events, '))).toHaveLength(1);
      expect(printed.join('\n')).not.toContain('migrate: sessions');
      expect(written).toEqual([]);
      expect(direct).toEqual([]);
    } finally {
      if (isTTY) Object.defineProperty(process.stdout, 'isTTY', isTTY);
      else delete (process.stdout as { isTTY?: boolean }).isTTY;
    }
  });

  it('migrate that stops: the resume line repeats every option that changes the run, shell-quoted, passwords hidden', async () => {
    const source = `redis://:pa55word@127.0.0.1:${redis.port}/7`;
    const target = `redis://:pa55word@127.0.0.1:${redis.port}/8`;
    const seeding = new RedisSessionService({ url: source });
    const raw = new Redis(source);
    try {
      for (const sessionId of ['s1', 's2']) {
        const session = await seeding.createSession({ appName: "ada's shop", userId: 'ada', sessionId });
        await seeding.appendEvent({ session, event: createEvent({ invocationId: 'i', author: 'user' }) });
      }
      // Every session's log holds an entry that is no longer an event: each one fails, and one failure stops the run.
      for (const name of await raw.keys('*:e:*')) await raw.lset(name, 0, 'not an entry');
    } finally {
      raw.disconnect();
      await seeding.close();
    }
    const { errors, codes, direct } = await run(
      [
        'migrate',
        '--from',
        source,
        '--to',
        target,
        '--app',
        "ada's shop",
        '--user',
        'ada',
        '--dry-run',
        '--verify',
        '--on-conflict',
        'target',
        '--max-failures',
        '1',
        '--timeout',
        '7',
        '--check-timeout',
        '3',
      ],
      false,
    );
    expect(codes).toEqual([EXIT_CODES.error]);
    const text = errors.join('\n');
    expect(text).toContain('stopped: 1 sessions in a row failed');
    const hidden = `redis://:***@127.0.0.1:${redis.port}`;
    // Quoted: the shell would take the stars for a pattern.
    expect(text).toContain(
      `to resume, run the same command again (adk-state migrate --from '${hidden}/7' --to '${hidden}/8' ` +
        "--app 'ada'\\''s shop' --user ada --dry-run --verify --on-conflict target --max-failures 1 --timeout 7 " +
        '--check-timeout 3)',
    );
    expect(text).not.toContain('pa55word');
    expect(direct).toEqual([]);
  });
});
