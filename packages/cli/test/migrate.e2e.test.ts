/**
 * `adk-state migrate` end to end, through the command: @google/adk's own
 * DatabaseSessionService on SQLite into Redis, Redis into Redis with an
 * earlier copy, a conflict and a dry run, and a run killed in the middle and
 * resumed, which ends where an uninterrupted run ends. Every copy is checked
 * with --verify.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoSessionService } from '@adk-state/adapter-mongo';
import { RedisSessionService } from '@adk-state/adapter-redis';
import { startStandIn } from '@adk-state/mongo-standin';
import { emulatorSettings, startFirestoreEmulator, TEST_PROJECT_ID } from '@adk-state/test-servers/firestore';
import { freePort, type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { createEvent, DatabaseSessionService, Runner, type Session } from '@google/adk';
import { FieldValue, Firestore } from '@google-cloud/firestore';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionServiceFromUri } from '../src/index.js';
import { rootAgent } from './fixtures/agents/greeter/agent.js';
import { expectTiesCopiedInOrder, writeTiedSession } from './support/adk-database.js';
import { runCli, startCli } from './support/cli-process.js';
import { withMethods } from './support/with-methods.js';

/** A Redis database of the test server, as a store URI and an open service. */
function redisDb(server: RedisServer, db: number): { uri: string; service: RedisSessionService } {
  const uri = `${server.url}/${db}`;
  return { uri, service: new RedisSessionService({ url: uri }) };
}

/** Every session of the app in a store, in full, keyed user/session. */
async function dump(service: RedisSessionService, appName: string): Promise<Map<string, unknown>> {
  const { sessions } = await service.listSessions({ appName });
  const all = new Map<string, unknown>();
  for (const head of sessions) {
    const full = (await service.getSession({ appName, userId: head.userId, sessionId: head.id })) as Session;
    all.set(`${head.userId}/${head.id}`, JSON.parse(JSON.stringify(full)));
  }
  return all;
}

/** A conversation through ADK's Runner on a new session; the session, with the events the runner appended in their order. */
async function converse(sessionService: Runner['sessionService'], userId: string, texts: string[]): Promise<Session> {
  const appended: Session['events'] = [];
  // The service as the runner sees it, noting each event it stores (a partial one is not stored).
  const noting = withMethods(sessionService, {
    async appendEvent(request) {
      const stored = await sessionService.appendEvent(request);
      if (!request.event.partial) appended.push(stored);
      return stored;
    },
  });
  const runner = new Runner({ appName: 'greeter', agent: rootAgent, sessionService: noting });
  const session = await sessionService.createSession({ appName: 'greeter', userId, state: { topic: `${userId}'s` } });
  for (const text of texts) {
    for await (const _event of runner.runAsync({
      userId,
      sessionId: session.id,
      newMessage: { role: 'user', parts: [{ text }] },
    })) {
      // stored by the runner
    }
  }
  return { ...session, events: appended };
}

describe('adk-state migrate', () => {
  let redis: RedisServer;
  let scratch: string;

  beforeAll(async () => {
    redis = await startRedisServer();
    scratch = await mkdtemp(join(tmpdir(), 'adk-state-migrate-'));
  });
  afterAll(async () => {
    await redis?.stop();
    await rm(scratch, { recursive: true, force: true });
  });

  it("copies @google/adk's DatabaseSessionService on SQLite into Redis, faithfully (--verify: 0 differences)", async () => {
    const sqlite = `sqlite://${join(scratch, 'adk.db')}`;
    const adk = await sessionServiceFromUri(sqlite);
    // The order the runner appended the events in (ADK's own read turns round those of one millisecond).
    const order = new Map<string, string[]>();
    for (const [userId, texts] of [
      ['ada', ['hello', 'again']],
      ['bob', ['hi']],
    ] as const) {
      order.set(
        userId,
        (await converse(adk, userId, [...texts])).events.map((event) => event.id),
      );
    }
    // State given at creation only, and a session with no events.
    await adk.createSession({ appName: 'greeter', userId: 'cy', sessionId: 'empty', state: { only: 'given' } });

    const target = redisDb(redis, 1);
    try {
      const run = await runCli(['migrate', '--from', sqlite, '--to', target.uri, '--app', 'greeter', '--verify']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('copied 3 new and 0 updated sessions (12 events)');
      expect(run.stdout).toContain('verify: 0 differences');

      for (const [userId, count] of [
        ['ada', 8],
        ['bob', 4],
        ['cy', 0],
      ] as const) {
        const [head] = (await adk.listSessions({ appName: 'greeter', userId })).sessions;
        const key = { appName: 'greeter', userId, sessionId: head?.id ?? '' };
        const original = (await adk.getSession(key)) as Session;
        const copy = await target.service.getSession(key);
        expect(copy?.events).toHaveLength(count);
        const stored = new Map(original.events.map((event) => [event.id, event]));
        const appended = (order.get(userId) ?? []).map((id) => stored.get(id));
        expect(JSON.parse(JSON.stringify(copy?.events))).toEqual(JSON.parse(JSON.stringify(appended)));
        expect(copy?.state).toEqual(original.state);
        expect(copy?.lastUpdateTime).toBe(original.lastUpdateTime);
      }
      expect(await target.service.getUserState({ appName: 'greeter', userId: 'ada' })).toEqual({ turns: 2 });

      const again = await runCli(['migrate', '--from', sqlite, '--to', target.uri, '--app', 'greeter', '--verify']);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain('copied 0 new and 0 updated sessions (0 events); 3 unchanged');
    } finally {
      await Promise.all([target.service.close(), adk.close?.()]);
    }
  });

  // Was a loss of order: ADK reads a session's events newest first by time and turns the list
  // round, so on SQLite the events of one millisecond came back (and were copied) in the reverse
  // of the order they were appended in: a tool's answer before its call.
  // Was a loss of order: ADK reads a session's events newest first by time and turns the list
  // round, so on SQLite the events of one millisecond came back (and were copied) in the reverse
  // of the order they were appended in: a tool's answer before its call.
  it("copies the events of one millisecond from ADK's SQLite store in the order they were appended", async () => {
    const source = `sqlite://${join(scratch, 'ties.db')}`;
    await writeTiedSession(source);
    await expectTiesCopiedInOrder(source, `${redis.url}/9`);
  });

  it('copies a MongoDB store (the wire stand-in) into Redis, faithfully', async () => {
    const mongo = await startStandIn();
    const source = new MongoSessionService({ url: mongo.url });
    const target = redisDb(redis, 7);
    try {
      await converse(source, 'ada', ['hello', 'again']);
      await converse(source, 'bob', ['hi']);
      const run = await runCli(['migrate', '--from', mongo.url, '--to', target.uri, '--app', 'greeter', '--verify']);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('copied 2 new and 0 updated sessions (12 events)');
      expect(run.stdout).toContain('verify: 0 differences');
      expect(await target.service.getUserState({ appName: 'greeter', userId: 'ada' })).toEqual({ turns: 2 });
    } finally {
      await Promise.all([source.close(), target.service.close()]);
      await mongo.stop();
    }
  });

  it("copies Redis into Firestore (the emulator the Firestore store's tests use), faithfully", async () => {
    const emulator = await startFirestoreEmulator();
    const previous = process.env.FIRESTORE_EMULATOR_HOST;
    process.env.FIRESTORE_EMULATOR_HOST = emulator.hostPort;
    const source = redisDb(redis, 8);
    const firestoreUri = `firestore://${TEST_PROJECT_ID}?root=migrated`;
    try {
      await converse(source.service, 'ada', ['hello', 'again']);
      await converse(source.service, 'bob', ['hi']);
      const run = await runCli(['migrate', '--from', source.uri, '--to', firestoreUri, '--app', 'greeter', '--verify']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('copied 2 new and 0 updated sessions (12 events)');
      expect(run.stdout).toContain('verify: 0 differences');
      // One copy loses its listing key outside adk-state (an ordered query leaves such a document out).
      const firestore = new Firestore(emulatorSettings(emulator.hostPort));
      try {
        const heads = await firestore.collectionGroup('adk_sessions').get();
        const copied = heads.docs.find((doc) => doc.id.includes('bob'));
        await copied?.ref.update({ lastUpdateKey: FieldValue.delete() });
        expect(copied).toBeDefined();
      } finally {
        await firestore.terminate();
      }
      // Back out of Firestore without --app: the store lists its apps.
      const back = await runCli(['migrate', '--from', firestoreUri, '--to', `${redis.url}/9`, '--verify']);
      expect(back.code, back.stdout + back.stderr).toBe(0);
      expect(back.stdout).toContain('copied 2 new and 0 updated sessions (12 events)');
      expect(back.stdout).toContain('verify: 0 differences');
      const target = await sessionServiceFromUri(firestoreUri);
      try {
        const [head] = (await target.listSessions({ appName: 'greeter', userId: 'ada' })).sessions;
        const key = { appName: 'greeter', userId: 'ada', sessionId: head?.id ?? '' };
        const copy = await target.getSession(key);
        const original = await source.service.getSession(key);
        expect(JSON.parse(JSON.stringify(copy))).toEqual(JSON.parse(JSON.stringify(original)));
      } finally {
        await target.close?.();
      }
    } finally {
      if (previous === undefined) delete process.env.FIRESTORE_EMULATOR_HOST;
      else process.env.FIRESTORE_EMULATOR_HOST = previous;
      await source.service.close();
      await emulator.stop();
    }
  }, 120_000);

  it('copies only what is missing or behind, leaves newer target sessions alone unless --overwrite, and --dry-run writes nothing', async () => {
    const source = redisDb(redis, 2);
    const target = redisDb(redis, 3);
    try {
      const grown = await converse(source.service, 'ada', ['one']);
      await converse(source.service, 'bob', ['one']);
      let run = await runCli(['migrate', '--from', source.uri, '--to', target.uri, '--app', 'greeter']);
      expect(run.stdout).toContain('copied 2 new');

      // The source grows (an update), the target's copy of bob's session moves on (a conflict), a new one appears.
      await converse(source.service, 'cy', ['one']);
      const sourceSession = (await source.service.getSession({
        appName: 'greeter',
        userId: 'ada',
        sessionId: grown.id,
      })) as Session;
      await source.service.appendEvent({
        session: sourceSession,
        event: createEvent({ invocationId: 'late', author: 'user' }),
      });
      const [bobHead] = (await target.service.listSessions({ appName: 'greeter', userId: 'bob' })).sessions;
      const bobCopy = (await target.service.getSession({
        appName: 'greeter',
        userId: 'bob',
        sessionId: bobHead?.id ?? '',
      })) as Session;
      await target.service.appendEvent({
        session: bobCopy,
        event: createEvent({ invocationId: 'target-only', author: 'user', timestamp: Date.now() + 60_000 }),
      });

      const dry = await runCli(['migrate', '--from', source.uri, '--to', target.uri, '--app', 'greeter', '--dry-run']);
      // 3: a conflict was left alone.
      expect(dry.code).toBe(3);
      expect(dry.stdout).toContain('dry run: would copy 1 new and 1 updated sessions');
      expect(dry.stdout).toContain('1 conflicts left alone');
      expect((await target.service.listSessions({ appName: 'greeter' })).sessions).toHaveLength(2);

      run = await runCli(['migrate', '--from', source.uri, '--to', target.uri, '--app', 'greeter', '--verify']);
      expect(run.code).toBe(3);
      expect(run.stdout).toContain('copied 1 new and 1 updated sessions');
      expect(run.stdout).toContain(`conflict: greeter/bob/${bobHead?.id} has writes of its own in the target`);
      expect(run.stdout).toContain('verify: 0 differences');
      const kept = await target.service.getSession({ appName: 'greeter', userId: 'bob', sessionId: bobHead?.id ?? '' });
      expect(kept?.events.at(-1)?.invocationId).toBe('target-only');

      run = await runCli([
        'migrate',
        '--from',
        source.uri,
        '--to',
        target.uri,
        '--app',
        'greeter',
        '--verify',
        '--overwrite',
      ]);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('copied 0 new and 1 updated sessions');
      // The session whose own event the source's replaced is named, not only counted.
      expect(run.stdout).toContain(
        `overwritten: greeter/bob/${bobHead?.id} had writes of its own in the target, which the source's session replaced (--on-conflict source)`,
      );
      expect(await dump(target.service, 'greeter')).toEqual(await dump(source.service, 'greeter'));
    } finally {
      await Promise.all([source.service.close(), target.service.close()]);
    }
  });

  it('a run killed in the middle and run again ends exactly where an uninterrupted run ends', async () => {
    const source = redisDb(redis, 4);
    const resumed = redisDb(redis, 5);
    const straight = redisDb(redis, 6);
    try {
      for (let n = 0; n < 400; n++) {
        const session = await source.service.createSession({ appName: 'big', userId: `u${n % 40}`, state: { n } });
        for (let e = 0; e < 6; e++) {
          await source.service.appendEvent({
            session,
            event: createEvent({
              invocationId: `i${e}`,
              author: 'agent',
              actions: { stateDelta: { e, 'user:last': n } } as never,
            }),
          });
        }
      }
      const args = (to: string) => ['migrate', '--from', source.uri, '--to', to, '--app', 'big'];
      const interrupted = await startCli(args(resumed.uri), 0, '/400 sessions, ');
      // The first progress line is printed after the first session: kill it there, mid-run.
      interrupted.child.kill('SIGKILL');
      await interrupted.stop();
      const partial = (await resumed.service.listSessions({ appName: 'big' })).sessions.length;
      expect(partial).toBeGreaterThan(0);
      expect(partial).toBeLessThan(400);

      const finish = await runCli([...args(resumed.uri), '--verify']);
      expect(finish.code).toBe(0);
      expect(finish.stdout).toContain('verify: 0 differences');
      const whole = await runCli(args(straight.uri));
      expect(whole.code).toBe(0);
      expect(await dump(resumed.service, 'big')).toEqual(await dump(straight.service, 'big'));
      expect(await dump(resumed.service, 'big')).toEqual(await dump(source.service, 'big'));
    } finally {
      await Promise.all([source.service.close(), resumed.service.close(), straight.service.close()]);
    }
  }, 180_000);

  it('refuses a target that is not an adk-state store, in one line with exit code 1', async () => {
    const run = await runCli([
      'migrate',
      '--from',
      `${redis.url}/10`,
      '--to',
      `sqlite://${join(scratch, 'x.db')}`,
      '--app',
      'a',
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('is not an adk-state store');
  });

  it('refuses memory:// on either side before any work, in one line that says why, with exit code 1', async () => {
    const source = redisDb(redis, 11);
    try {
      await source.service.createSession({ appName: 'shop', userId: 'ada', state: { 'user:plan': 'pro' } });
      // A memory:// target would take the copy, pass --verify, and be gone when the run ends.
      let run = await runCli(['migrate', '--from', source.uri, '--to', 'memory://', '--verify']);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(run.stdout).not.toContain('copied');
      expect(run.stderr.trim().split('\n')).toEqual([
        'adk-state migrate: the target memory:// cannot be migrated to: a memory:// store lives only in the ' +
          'process that made it, so the copy would be gone when this run ends',
      ]);
      // A memory:// source is a new, empty store: refused, not "nothing found" (exit 4).
      run = await runCli(['migrate', '--from', 'memory://', '--to', `${redis.url}/12`]);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(run.stderr).toContain('the source memory:// cannot be migrated from');
      expect(run.stderr).toContain('lives only in the process that made it');
      // Before any work: a source nothing listens on is never reached.
      run = await runCli(['migrate', '--from', `redis://127.0.0.1:${await freePort()}`, '--to', 'MEMORY://']);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(run.stderr).toContain('the target MEMORY:// cannot be migrated to');
      expect(run.stderr).not.toContain('refused the connection');
    } finally {
      await source.service.close();
    }
  });

  it('refuses a SQLite source whose file does not exist, and creates nothing (migrate and inspect)', async () => {
    const missing = join(scratch, 'nonexist.db');
    const before = await readdir(scratch);
    const run = await runCli(['migrate', '--from', `sqlite://${missing}`, '--to', `${redis.url}/13`]);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([
      `adk-state migrate: the source sqlite://${missing} names a SQLite file that does not exist (${missing}): ` +
        'a source is only read, never created or changed',
    ]);
    expect(existsSync(missing)).toBe(false);
    // inspect only reads too.
    const inspected = await runCli(['inspect', `sqlite://${missing}`, '--app', 'shop']);
    expect(inspected.code, inspected.stdout + inspected.stderr).toBe(1);
    expect(inspected.stderr.trim().split('\n')).toEqual([
      `adk-state inspect: the store sqlite://${missing} names a SQLite file that does not exist (${missing}): ` +
        'inspect only reads, and creates or changes nothing',
    ]);
    expect(existsSync(missing)).toBe(false);
    expect(await readdir(scratch)).toEqual(before);
    // An in-memory SQLite database would be as new and empty as memory://.
    const inMemory = await runCli(['migrate', '--from', 'sqlite://:memory:', '--to', `${redis.url}/13`]);
    expect(inMemory.code, inMemory.stdout + inMemory.stderr).toBe(1);
    expect(inMemory.stderr).toContain(
      'the source sqlite://:memory: cannot be migrated from: an in-memory SQLite database lives only in the process that opened it',
    );
  });

  it('opens a SQLite source so that it cannot change: one ADK would change first is refused, its file as it was', async () => {
    const driver = sqliteDriver();
    const other = join(scratch, 'other.db');
    await sqlite(driver, other, [
      'CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)',
      "INSERT INTO notes (text) VALUES ('keep me')",
    ]);
    const text = join(scratch, 'notes.txt');
    await writeFile(text, 'not a database at all\n');
    const empty = join(scratch, 'empty.db');
    await writeFile(empty, '');
    const folder = join(scratch, 'folder.db');
    await mkdir(folder);
    /** A database ADK made, then changed by `statements`. */
    const made = async (name: string, statements: string[]) => {
      const file = join(scratch, name);
      const adk = new DatabaseSessionService(`sqlite://${file}`);
      await adk.createSession({ appName: 'shop', userId: 'u1', sessionId: 's1' });
      await (adk as unknown as { orm?: { close(): Promise<void> } }).orm?.close();
      await sqlite(driver, file, statements);
      return file;
    };
    const unversioned = await made('unversioned.db', [
      "DELETE FROM adk_internal_metadata WHERE key = 'schema_version'",
    ]);
    const indexed = await made('indexed.db', ['CREATE INDEX by_time ON events (timestamp)']);
    const later = await made('later.db', ["UPDATE adk_internal_metadata SET value = '2' WHERE key = 'schema_version'"]);

    const cases: [string, string][] = [
      [other, 'is not a database ADK reads as it is: ADK would change it first (create table `app_states`'],
      [text, `is not a SQLite database (${text})`],
      [empty, 'is an empty file, not a database ADK made: reading it through ADK would make it one'],
      [folder, `names ${folder}, which is not a file`],
      [unversioned, 'is not a database ADK reads as it is: ADK would'],
      [indexed, 'is not a database ADK reads as it is: ADK would change it first (drop index `by_time`)'],
    ];
    // A schema version ADK cannot read: ADK's own refusal, as any store's failed check is told.
    const laterBefore = await readFile(later);
    const refused = await runCli(['migrate', '--from', `sqlite://${later}`, '--to', `${redis.url}/13`]);
    expect(refused.code, refused.stdout + refused.stderr).toBe(1);
    expect(refused.stderr.trim()).toBe(
      `adk-state migrate: the session store sqlite://${later} failed its start-up check: ADK Database schema version 2 is not compatible.`,
    );
    expect((await readFile(later)).equals(laterBefore)).toBe(true);
    for (const [file, said] of cases) {
      const before = file === folder ? undefined : await readFile(file);
      const run = await runCli(['migrate', '--from', `sqlite://${file}`, '--to', `${redis.url}/13`]);
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(run.stderr).toContain(`adk-state migrate: the source sqlite://${file} ${said}`);
      const inspected = await runCli(['inspect', `sqlite://${file}`, '--app', 'shop']);
      expect(inspected.code, inspected.stdout + inspected.stderr).toBe(1);
      expect(inspected.stderr).toContain(`adk-state inspect: the store sqlite://${file} ${said}`);
      if (before) expect((await readFile(file)).equals(before), file).toBe(true);
    }
    expect(await sqlite(driver, other, ["SELECT name FROM sqlite_master WHERE type = 'table'"])).toEqual([
      { name: 'notes' },
    ]);
    const kept = await sqlite(driver, indexed, ["SELECT name FROM sqlite_master WHERE name = 'by_time'"]);
    expect(kept).toEqual([{ name: 'by_time' }]);
  }, 180_000); // thirteen runs of the CLI, one after another
});

/** What these tests use of the `sqlite3` driver ADK loads (through `@mikro-orm/sqlite`). */
interface Sqlite3 {
  Database: new (
    file: string,
  ) => {
    all(sql: string, done: (error: Error | null, rows: Record<string, unknown>[]) => void): void;
    close(done: (error: Error | null) => void): void;
  };
}

function sqliteDriver(): Sqlite3 {
  const adk = createRequire(import.meta.url).resolve('@google/adk');
  return createRequire(createRequire(adk).resolve('@mikro-orm/sqlite'))('sqlite3') as Sqlite3;
}

/** Runs `statements` on the SQLite file `file` (created if missing); the rows of the last. */
async function sqlite(driver: Sqlite3, file: string, statements: string[]): Promise<Record<string, unknown>[]> {
  const db = new driver.Database(file);
  let rows: Record<string, unknown>[] = [];
  try {
    for (const statement of statements) {
      rows = await new Promise((done, fail) => db.all(statement, (error, got) => (error ? fail(error) : done(got))));
    }
    return rows;
  } finally {
    await new Promise<void>((done) => db.close(() => done()));
  }
}
