/**
 * `adk-state migrate` on production data, through the command on a real
 * Redis: a re-run never puts older `user:`/`app:` state over what the target
 * wrote later, re-runs settle (the second reports 0 changes), the policy is
 * explicit, every app is copied without --app, and the exit codes tell
 * conflicts left, nothing found, interrupted and stopped apart. The progress
 * display fits a narrow terminal and is plain lines elsewhere.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoSessionService, type MongoStore } from '@adk-state/adapter-mongo';
import { RedisSessionService } from '@adk-state/adapter-redis';
import { startStandIn } from '@adk-state/mongo-standin';
import { type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { type BaseSessionService, createEvent, type Session } from '@google/adk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionServiceFromUri } from '../src/index.js';
import { runCli, startCli, startCliOnTerminal } from './support/cli-process.js';

function redisDb(server: RedisServer, db: number): { uri: string; service: RedisSessionService } {
  const uri = `${server.url}/${db}`;
  return { uri, service: new RedisSessionService({ url: uri }) };
}

/** Appends one event at `timestamp` with `delta`; returns the session as it is now. */
async function write(
  service: BaseSessionService,
  key: { appName: string; userId: string; sessionId: string },
  timestamp: number,
  delta: Record<string, unknown>,
): Promise<void> {
  const session = (await service.getSession(key)) as Session;
  await service.appendEvent({
    session,
    event: createEvent({
      invocationId: `at-${timestamp}`,
      author: 'agent',
      timestamp,
      actions: { stateDelta: delta } as never,
    }),
  });
}

const T0 = 1_700_000_000_000;
const ESCAPE = String.fromCharCode(27);
/** ANSI "erase to the end of the line". */
const CLEAR_LINE = `${ESCAPE}[K`;

describe('adk-state migrate, run again on a target that took writes', () => {
  let redis: RedisServer;
  let scratch: string;

  beforeAll(async () => {
    redis = await startRedisServer();
    scratch = await mkdtemp(join(tmpdir(), 'adk-state-migrate-safety-'));
  });
  afterAll(async () => {
    await redis?.stop();
    await rm(scratch, { recursive: true, force: true });
  });

  it('keeps what the target wrote later, settles at 0 changes, and lets the source win what it wrote later', async () => {
    const source = redisDb(redis, 10);
    const target = redisDb(redis, 11);
    const ada = { appName: 'shop', userId: 'ada', sessionId: 's1' };
    const bob = { appName: 'shop', userId: 'bob', sessionId: 's2' };
    const args = ['migrate', '--from', source.uri, '--to', target.uri, '--app', 'shop'];
    try {
      await source.service.createSession({ ...ada, state: { 'user:plan': 'free', 'app:motd': 'hello' } });
      await write(source.service, ada, T0, { step: 1, 'user:plan': 'free' });
      await source.service.createSession(bob);
      await write(source.service, bob, T0 + 1, { step: 1, 'user:plan': 'pro' });
      let run = await runCli(args);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('copied 2 new and 0 updated sessions');

      // The target moves on: a session of its own writes user: and app: keys (one the source never had),
      // and its copy of bob's session takes an event of its own.
      await target.service.createSession({ appName: 'shop', userId: 'ada', sessionId: 'only-in-target' });
      await write(target.service, { appName: 'shop', userId: 'ada', sessionId: 'only-in-target' }, T0 + 100, {
        'user:plan': 'team',
        'user:extra': 1,
        'app:motd': 'from the target',
      });
      await write(target.service, bob, T0 + 100, { step: 2, 'user:plan': 'bob in the target' });

      for (let again = 0; again < 2; again++) {
        run = await runCli(args);
        expect(run.code, run.stdout + run.stderr).toBe(3);
        expect(run.stdout).toContain('0 changes in all');
        expect(run.stdout).toContain('copied 0 new and 0 updated sessions');
        expect(run.stdout).toContain('1 unchanged; 1 conflicts left alone');
        expect(run.stdout).toContain('conflict: shop/bob/s2 has writes of its own in the target');
        expect(run.stdout).toContain("conflict: shop user:ada: kept the target's user:plan");
        expect(run.stdout).toContain("conflict: shop user:bob: kept the target's user:plan");
        expect(run.stdout).toContain("conflict: shop app: kept the target's app:motd");
        expect(run.stdout).toContain('4 conflicts left alone: the target wrote them last');
      }
      expect(await target.service.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan: 'team', extra: 1 });
      expect(await target.service.getUserState({ appName: 'shop', userId: 'bob' })).toEqual({
        plan: 'bob in the target',
      });
      expect(await target.service.getAppState({ appName: 'shop' })).toEqual({ motd: 'from the target' });
      // bob's copy still ends with its own event, and its state agrees with it.
      const bobCopy = (await target.service.getSession(bob)) as Session;
      expect(bobCopy.events.at(-1)?.invocationId).toBe(`at-${T0 + 100}`);
      expect(bobCopy.state['user:plan']).toBe('bob in the target');

      // A dry run of the source winning: what it would write, nothing written.
      run = await runCli([...args, '--dry-run', '--on-conflict', 'source']);
      expect(run.stdout).toContain('dry run: would copy 0 new and 2 updated sessions');
      expect(run.stdout).toContain('would write 3 user:/app: keys');
      // Each scope says what it would write, not what it wrote.
      expect(run.stdout).toContain('shop user:ada: would write user:plan');
      expect(run.stdout).toContain('shop user:bob: would write user:plan');
      expect(run.stdout).toContain('shop app: would write app:motd');
      expect(run.stdout).not.toContain(': wrote ');
      expect(await target.service.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({ plan: 'team', extra: 1 });

      // The source writes later than the target: the source wins those, the target keeps bob's session.
      await write(source.service, ada, T0 + 200, { step: 2, 'user:plan': 'enterprise', 'app:motd': 'later' });
      run = await runCli([...args, '--verify']);
      expect(run.code, run.stdout).toBe(3);
      expect(run.stdout).toContain('copied 0 new and 1 updated sessions');
      expect(run.stdout).toContain('shop user:ada: wrote user:plan');
      expect(run.stdout).toContain('shop app: wrote app:motd');
      expect(run.stdout).toContain('verify: 0 differences');
      expect(await target.service.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({
        plan: 'enterprise',
        extra: 1,
      });
      expect(await target.service.getAppState({ appName: 'shop' })).toEqual({ motd: 'later' });

      // --overwrite: the source wins the rest; then a plain run finds nothing to do and exits 0.
      run = await runCli([...args, '--overwrite']);
      expect(run.code, run.stdout).toBe(0);
      expect(await target.service.getUserState({ appName: 'shop', userId: 'bob' })).toEqual({ plan: 'pro' });
      run = await runCli([...args, '--verify']);
      expect(run.code, run.stdout).toBe(0);
      expect(run.stdout).toContain('copied 0 new and 0 updated sessions (0 events); 2 unchanged');
      expect(run.stdout).toContain('0 changes in all');
      expect(run.stdout).toContain('verify: 0 differences');
      // The key only the target ever had stays.
      expect(await target.service.getUserState({ appName: 'shop', userId: 'ada' })).toEqual({
        plan: 'enterprise',
        extra: 1,
      });
    } finally {
      await Promise.all([source.service.close(), target.service.close()]);
    }
  }, 180_000);

  it('--on-conflict target leaves every conflict alone, even where the source wrote later', async () => {
    const source = redisDb(redis, 12);
    const target = redisDb(redis, 13);
    const key = { appName: 'shop', userId: 'cy', sessionId: 's' };
    const args = ['migrate', '--from', source.uri, '--to', target.uri, '--app', 'shop'];
    try {
      await source.service.createSession(key);
      await write(source.service, key, T0, { 'user:plan': 'free' });
      expect((await runCli(args)).code).toBe(0);
      await target.service.createSession({ ...key, sessionId: 't' });
      await write(target.service, { ...key, sessionId: 't' }, T0 + 100, { 'user:plan': 'team' });
      await write(source.service, key, T0 + 200, { 'user:plan': 'enterprise' });
      const run = await runCli([...args, '--on-conflict', 'target']);
      expect(run.code, run.stdout).toBe(3);
      expect(run.stdout).toContain("kept the target's user:plan");
      expect(await target.service.getUserState({ appName: 'shop', userId: 'cy' })).toEqual({ plan: 'team' });
    } finally {
      await Promise.all([source.service.close(), target.service.close()]);
    }
  });

  it('a source session whose stored data cannot be read fails alone, named as unreadable; the others are copied, one missing from the listing too', async () => {
    const source = redisDb(redis, 6);
    const target = redisDb(redis, 7);
    const raw = new Redis(source.uri);
    try {
      const damaged = ['sbad', 'shead', 'sstate'];
      for (const sessionId of ['sa', ...damaged, 'sc', 'slost']) {
        const key = { appName: 'damaged', userId: 'ada', sessionId };
        await source.service.createSession({ ...key, state: { n: 0 } });
        await write(source.service, key, T0 + 1, { n: 1 });
      }
      // Three sessions changed outside adk-state: a log entry that is no longer an event, a
      // revision that is not a number, a state value that is not JSON. The listing of the app
      // still shows every session, so that the others are copied.
      const keyOf = async (sessionId: string, part: 'e' | 's') => {
        const names = await raw.keys(`*:${part}:*${sessionId}`);
        expect(names).toHaveLength(1);
        return names[0] as string;
      };
      await raw.lset(await keyOf('sbad', 'e'), 0, 'not an entry');
      await raw.hset(await keyOf('shead', 's'), '\u0000r', 'seven');
      await raw.hset(await keyOf('sstate', 's'), 'n', '{broken');
      // And one whose entries in the listing's sorted sets were removed: the listing no longer
      // shows it, the store's scan of its session keys does.
      const [appIndex] = await raw.keys('*{damaged}:l');
      const [userIndex] = await raw.keys('*{damaged}:m:ada');
      expect(await raw.zrem(appIndex as string, 'slost\u0000ada')).toBe(1);
      expect(await raw.zrem(userIndex as string, 'slost')).toBe(1);
      expect((await source.service.listSessions({ appName: 'damaged' })).sessions.map((s) => s.id)).not.toContain(
        'slost',
      );
      const dry = await runCli(['migrate', '--from', source.uri, '--to', target.uri, '--app', 'damaged', '--dry-run']);
      expect(dry.stdout).toContain(
        "unlisted: damaged/ada/slost is missing from the source's listing (found by a scan of its records; would be copied with the rest)",
      );
      const run = await runCli(['migrate', '--from', source.uri, '--to', target.uri, '--app', 'damaged']);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(run.stdout).toContain(
        "unlisted: damaged/ada/slost is missing from the source's listing (found by a scan of its records; copied with the rest)",
      );
      expect(run.stdout).toContain('of 6 sessions');
      for (const sessionId of damaged) {
        expect(run.stdout + run.stderr).toMatch(new RegExp(`failed: .*${sessionId}.*Stored data could not be read`));
        expect(await target.service.getSession({ appName: 'damaged', userId: 'ada', sessionId })).toBeUndefined();
      }
      for (const sessionId of ['sa', 'sc', 'slost']) {
        const copied = await target.service.getSession({ appName: 'damaged', userId: 'ada', sessionId });
        expect(copied?.state).toEqual({ n: 1 });
        expect(copied?.events).toHaveLength(1);
      }
    } finally {
      raw.disconnect();
      await Promise.all([source.service.close(), target.service.close()]);
    }
  });

  it('MongoDB source sessions whose lastUpdateTime was changed to a word or removed (with its sortId too) are met and named as unreadable, not skipped', async () => {
    const mongo = await startStandIn();
    const source = new MongoSessionService({ url: mongo.url });
    const target = redisDb(redis, 5);
    try {
      for (const sessionId of ['sa', 'swhen', 'sc', 'sgone', 'sbare']) {
        const key = { appName: 'timed', userId: 'ada', sessionId };
        await source.createSession({ ...key, state: { n: 0, 'user:u': 1 } });
        await write(source, key, T0 + 1, { n: 1 });
      }
      // Straight in the database, with the store's own client.
      const heads = (source.store as MongoStore).client.db('adk_state').collection('adk_sessions');
      await heads.updateOne(
        { _id: { app: 'timed', user: 'ada', id: 'swhen' } as never },
        { $set: { lastUpdateTime: 'then' } },
      );
      // Removed, as a bucket (the user's, here) has none.
      await heads.updateOne(
        { _id: { app: 'timed', user: 'ada', id: 'sgone' } as never },
        { $unset: { lastUpdateTime: '' } },
      );
      // Removed with its sortId: the listing reads it as a bucket; the store's scan of heads finds it.
      await heads.updateOne(
        { _id: { app: 'timed', user: 'ada', id: 'sbare' } as never },
        { $unset: { lastUpdateTime: '', sortId: '' } },
      );
      const run = await runCli(['migrate', '--from', mongo.url, '--to', target.uri, '--app', 'timed']);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      // Missing from the listing and unreadable: named once, with its failure, never as copied.
      expect(run.stdout).toContain(
        "failed: timed/ada/sbare (unlisted: missing from the source's listing, found by a scan of its records): ",
      );
      expect(run.stdout.match(/timed\/ada\/sbare/g)).toHaveLength(1);
      expect(run.stdout).not.toContain('copied with the rest');
      expect(run.stdout).toContain('of 5 sessions');
      for (const sessionId of ['swhen', 'sgone', 'sbare']) {
        expect(run.stdout + run.stderr).toMatch(new RegExp(`failed: .*${sessionId}.*Stored data could not be read`));
        expect(await target.service.getSession({ appName: 'timed', userId: 'ada', sessionId })).toBeUndefined();
      }
      for (const sessionId of ['sa', 'sc']) {
        const copied = await target.service.getSession({ appName: 'timed', userId: 'ada', sessionId });
        expect(copied?.state).toEqual({ n: 1, 'user:u': 1 });
      }
    } finally {
      await Promise.all([source.close(), target.service.close()]);
      await mongo.stop();
    }
  }, 60_000);

  it('without --app copies every app of the source (SQL, MongoDB and Redis list theirs); a mistyped --app exits 4', async () => {
    const sqlite = `sqlite://${join(scratch, 'apps.db')}`;
    const adk = await sessionServiceFromUri(sqlite);
    const mongo = await startStandIn();
    const fromMongo = new MongoSessionService({ url: mongo.url });
    const target = redisDb(redis, 14);
    const second = redisDb(redis, 15);
    try {
      for (const service of [adk, fromMongo]) {
        for (const appName of ['shop', 'support', 'odd {app} #1']) {
          await service.createSession({ appName, userId: 'ada', state: { 'app:name': appName, here: true } });
        }
      }
      let run = await runCli(['migrate', '--from', sqlite, '--to', target.uri, '--verify']);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toContain('copied 3 new and 0 updated sessions (0 events)');
      expect(run.stdout).toContain('of 3 sessions in 3 apps');
      expect(run.stdout).toContain('verify: 0 differences');
      run = await runCli(['migrate', '--from', mongo.url, '--to', second.uri]);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toContain('of 3 sessions in 3 apps');
      for (const store of [target.service, second.service]) {
        for (const appName of ['shop', 'support', 'odd {app} #1']) {
          expect(await store.getAppState({ appName })).toEqual({ name: appName });
        }
      }

      // Redis lists its apps from its key names.
      const fromRedis = redisDb(redis, 9);
      const third = redisDb(redis, 8);
      try {
        for (const appName of ['shop', 'support', 'odd {app} #1']) {
          await fromRedis.service.createSession({ appName, userId: 'ada', state: { 'app:name': appName } });
        }
        run = await runCli(['migrate', '--from', fromRedis.uri, '--to', third.uri, '--verify']);
        expect(run.code, run.stdout + run.stderr).toBe(0);
        expect(run.stdout).toContain('of 3 sessions in 3 apps');
        expect(await third.service.getAppState({ appName: 'odd {app} #1' })).toEqual({ name: 'odd {app} #1' });
      } finally {
        await Promise.all([fromRedis.service.close(), third.service.close()]);
      }

      run = await runCli(['migrate', '--from', sqlite, '--to', target.uri, '--app', 'shpo']);
      expect(run.code).toBe(4);
      expect(run.stderr).toContain('nothing found: no sessions of app shpo in sqlite://');
    } finally {
      await Promise.all([target.service.close(), second.service.close(), fromMongo.close(), adk.close?.()]);
      await mongo.stop();
    }
  }, 120_000);
});

describe('adk-state migrate, interrupted and stopped', () => {
  let redis: RedisServer;
  const sessions = 300;

  beforeAll(async () => {
    redis = await startRedisServer();
    const source = redisDb(redis, 1);
    try {
      for (let n = 0; n < sessions; n++) {
        const key = { appName: 'big', userId: `u${n % 12}`, sessionId: `s${n}` };
        await source.service.createSession(key);
        await write(source.service, key, T0 + n, { n, 'user:last': n });
      }
    } finally {
      await source.service.close();
    }
  }, 60_000);
  afterAll(async () => {
    redis?.resume();
    await redis?.stop();
  });

  it('Ctrl-C stops after the current session with exit 130 and a line that says how to resume; the re-run finishes', async () => {
    const target = `${redis.url}/2`;
    const args = ['migrate', '--from', `${redis.url}/1`, '--to', target, '--app', 'big'];
    const cli = await startCli(args, 0, '/300 sessions, ');
    // The server is frozen while the signal arrives, so the run cannot be through before it sees it.
    await redis.pause();
    cli.child.kill('SIGINT');
    redis.resume();
    expect(await cli.stop('SIGCONT')).toBe(130);
    expect(cli.output()).toContain('stopping after the current session');
    expect(cli.output()).toMatch(/interrupted after \d+ of 300 sessions; to resume, run the same command again/);
    const rest = await runCli([...args, '--verify']);
    expect(rest.code, rest.stdout + rest.stderr).toBe(0);
    expect(rest.stdout).toContain('verify: 0 differences');
  });

  it('a target that dies mid-run stops the run at once (exit 1, how to resume), not one failure per session', async () => {
    const doomed = await startRedisServer();
    try {
      const args = [
        'migrate',
        '--from',
        `${redis.url}/1`,
        '--to',
        `${doomed.url}/0`,
        '--app',
        'big',
        '--max-failures',
        '3',
      ];
      const cli = await startCli(args, 0, '/300 sessions, ');
      await doomed.kill();
      const code = await cli.stop('SIGCONT');
      const output = cli.output();
      expect(code, output).toBe(1);
      expect(output).toMatch(/stopped/);
      expect(output).toContain('to resume, run the same command again');
      const failed = Number(/; (\d+) failed; of 300 sessions/.exec(output)?.[1]);
      expect(failed).toBeGreaterThanOrEqual(1);
      expect(failed).toBeLessThanOrEqual(3);
    } finally {
      await doomed.stop();
    }
  });

  it('a target that hangs mid-run stops the run after --max-failures timed-out sessions, not one wait per session', async () => {
    const hanging = await startRedisServer();
    try {
      const args = [
        'migrate',
        '--from',
        `${redis.url}/1`,
        '--to',
        `${hanging.url}/0`,
        '--app',
        'big',
        '--max-failures',
        '2',
        '--timeout',
        '1',
      ];
      const cli = await startCli(args, 0, '/300 sessions, ');
      await hanging.pause();
      const code = await cli.stop('SIGCONT');
      const output = cli.output();
      expect(code, output).toBe(1);
      expect(output).toContain('stopped: 2 sessions in a row failed');
      // The resume line keeps what made the run stop where it did: its deadline and its bound of failures.
      expect(output).toContain(
        `to resume, run the same command again (adk-state migrate --from ${redis.url}/1 --to ${hanging.url}/0 ` +
          '--app big --max-failures 2 --timeout 1)',
      );
      expect(output).toMatch(/; 2 failed; of 300 sessions/);
    } finally {
      hanging.resume();
      await hanging.stop();
    }
  });

  it('on a terminal 40 columns wide the progress is one line redrawn within 39 columns; elsewhere plain lines', async () => {
    const cli = await startCliOnTerminal(
      ['migrate', '--from', `${redis.url}/1`, '--to', `${redis.url}/3`, '--app', 'big'],
      40,
      'changes in all',
    );
    const code = await cli.stop('SIGCONT');
    expect(code).toBe(0);
    const output = cli.output();
    const [progress] = output.split('copied ');
    // Every redraw starts with a carriage return; the display adds no line of its own but the last.
    const redraws = (progress ?? '').split('\r').filter((part) => part.includes('sessions'));
    expect(redraws.length).toBeGreaterThan(1);
    for (const redraw of redraws) {
      const visible = redraw.split(CLEAR_LINE).join('').replace(/\n$/, '');
      expect(visible.includes('\n'), JSON.stringify(redraw)).toBe(false);
      expect(Array.from(visible).length).toBeLessThanOrEqual(39);
    }

    const plain = await runCli(['migrate', '--from', `${redis.url}/1`, '--to', `${redis.url}/4`, '--app', 'big']);
    const lines = plain.stdout.split('\n').filter((line) => line.startsWith('migrate: '));
    expect(lines.length).toBeGreaterThan(1);
    // "sessions" once: `migrate: 30/300 sessions, …`.
    for (const line of lines) expect(line).toMatch(/^migrate: \d+\/300 sessions, \d+ events, /);
    expect(lines.length).toBeLessThanOrEqual(11);
    expect(plain.stdout).not.toContain('\r');
    expect(plain.stdout).not.toContain(ESCAPE);
  });
});
