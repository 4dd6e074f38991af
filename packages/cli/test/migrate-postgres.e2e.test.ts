/**
 * `adk-state migrate` and `inspect` reading `@google/adk`'s
 * DatabaseSessionService on PostgreSQL (a private cluster on loopback): a
 * database ADK made is copied faithfully and left as it was; one that ADK
 * would change to open it (its own tables missing, an index it did not make,
 * the database itself missing) is refused, and stays as it was.
 */
import { hasPostgres, type PostgresServer, startPostgres } from '@adk-state/test-servers/postgres';
import { type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expectAdaCopied,
  expectRefused,
  expectTiesCopiedInOrder,
  writeAdkSessions,
  writeTiedSession,
} from './support/adk-database.js';
import { runCli } from './support/cli-process.js';

/** The tables, indexes and databases of the cluster: what must not change. */
async function layout(url: string): Promise<unknown> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const rows = async (sql: string) => (await client.query(sql)).rows.map((row) => Object.values(row).join('.'));
    return {
      databases: await rows('SELECT datname FROM pg_database ORDER BY datname'),
      tables: await rows("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"),
      indexes: await rows("SELECT tablename, indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1, 2"),
      metadata: await rows('SELECT * FROM adk_internal_metadata').catch(() => []),
    };
  } finally {
    await client.end();
  }
}

async function sql(url: string, statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}

describe.skipIf(!hasPostgres())('adk-state migrate and inspect from PostgreSQL', () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  /** The cluster's url with another database. */
  const database = (name: string) => postgres.url.replace(/\/postgres$/, `/${name}`);

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedisServer()]);
    await sql(postgres.url, ['CREATE DATABASE adk', 'CREATE DATABASE shop']);
    await writeAdkSessions(database('adk'));
    await sql(database('shop'), ['CREATE TABLE orders (id integer PRIMARY KEY)']);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([postgres?.stop(), redis?.stop()]);
  });

  it('copies a database ADK made, faithfully, and leaves it as it was', async () => {
    const before = await layout(database('adk'));
    const target = `${redis.url}/3`;
    const run = await runCli(['migrate', '--from', database('adk'), '--to', target, '--verify']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('copied 2 new and 0 updated sessions (6 events)');
    expect(run.stdout).toContain('verify: 0 differences');
    await expectAdaCopied(target);
    expect(await layout(database('adk'))).toEqual(before);
  });

  // Was a loss of order: ADK reads a session's events newest first by time and turns the list
  // round; PostgreSQL handed the events of one millisecond back in no fixed order, and they were
  // copied so. The CLI orders them by the transaction that wrote each.
  it('copies the events of one millisecond in the order they were appended', async () => {
    await sql(postgres.url, ['CREATE DATABASE ties']);
    await writeTiedSession(database('ties'));
    await expectTiesCopiedInOrder(database('ties'), `${redis.url}/5`);
  });

  describe('refuses a database ADK would change to open, and leaves it as it was (migrate and inspect)', () => {
    beforeAll(() => sql(database('adk'), ['CREATE INDEX by_time ON events (timestamp)']));
    afterAll(() => sql(database('adk'), ['DROP INDEX IF EXISTS by_time']));

    // One test a source: each runs the CLI twice, and a loaded machine must not make one bound cover them all.
    it.each([
      ['adk', 'ADK would change it first (drop index "by_time")'],
      ['shop', 'ADK would change it first (create table "app_states"'],
      ['nothing', 'ADK would change it first (create database "nothing")'],
    ])('…/%s', async (name, said) => {
      const url = database(name);
      const before = await layout(postgres.url);
      const inside = name === 'nothing' ? undefined : await layout(url);
      await expectRefused(url, said, `${redis.url}/4`);
      expect(await layout(postgres.url)).toEqual(before);
      if (inside) expect(await layout(url)).toEqual(inside);
    });
  });
});
