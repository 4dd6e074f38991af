/**
 * `adk-state migrate` and `inspect` reading `@google/adk`'s
 * DatabaseSessionService on MariaDB (a private server on loopback), through
 * both schemes that reach it: `mariadb://` (ADK's MariaDB driver) and
 * `mysql://` (its MySQL driver). A database ADK made is copied faithfully
 * and left as it was; one that ADK would change to open it (its tables
 * missing, its schema version missing, the database itself missing, a
 * layout its MySQL driver would alter) is refused, and stays as it was.
 */
import { run } from '@adk-state/test-servers';
import { hasMariadb, type MariadbServer, startMariadb } from '@adk-state/test-servers/mariadb';
import { type RedisServer, startRedisServer } from '@adk-state/test-servers/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAdaCopied, expectRefused, writeAdkSessions } from './support/adk-database.js';
import { runCli } from './support/cli-process.js';

const SYSTEM_SCHEMAS = "('mysql', 'information_schema', 'performance_schema', 'sys')";

describe.skipIf(!hasMariadb())('adk-state migrate and inspect from MariaDB', () => {
  let mariadb: MariadbServer;
  let redis: RedisServer;
  const uri = (scheme: 'mariadb' | 'mysql', database: string) =>
    `${scheme}://root@${mariadb.host}:${mariadb.port}/${database}`;

  /** Statements through the `mariadb` client; the rows, tab-separated. */
  const sql = async (statements: string): Promise<string> => {
    const client = process.env.MARIADB_BIN ? `${process.env.MARIADB_BIN}/mariadb` : 'mariadb';
    const port = String(mariadb.port);
    return run(client, ['--no-defaults', '-h', mariadb.host, '-P', port, '-u', 'root', '-N', '-B', '-e', statements]);
  };

  /** The server's databases, tables, indexes, constraints, and the checksum of every ADK table: what must not change. */
  const layout = async (): Promise<string> =>
    sql(
      [
        'SELECT schema_name FROM information_schema.schemata ORDER BY 1',
        `SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema NOT IN ${SYSTEM_SCHEMAS} ORDER BY 1, 2`,
        `SELECT table_schema, table_name, index_name, seq_in_index, column_name FROM information_schema.statistics WHERE table_schema NOT IN ${SYSTEM_SCHEMAS} ORDER BY 1, 2, 3, 4`,
        `SELECT constraint_schema, table_name, constraint_name, constraint_type FROM information_schema.table_constraints WHERE constraint_schema NOT IN ${SYSTEM_SCHEMAS} ORDER BY 1, 2, 3`,
        'CHECKSUM TABLE adk.sessions, adk.events, adk.app_states, adk.user_states, adk.adk_internal_metadata, unversioned.adk_internal_metadata EXTENDED',
      ].join('; '),
    );

  beforeAll(async () => {
    [mariadb, redis] = await Promise.all([startMariadb(), startRedisServer()]);
    await writeAdkSessions(uri('mariadb', 'adk'));
    // ADK's tables without its schema version (an older ADK, a partial dump), and a database that is not ADK's.
    await writeAdkSessions(uri('mariadb', 'unversioned'));
    await sql(
      'DELETE FROM unversioned.adk_internal_metadata; CREATE DATABASE shop; CREATE TABLE shop.orders (id int PRIMARY KEY)',
    );
  }, 120_000);

  afterAll(async () => {
    await Promise.all([mariadb?.stop(), redis?.stop()]);
  });

  it('copies a database ADK made (mariadb://), faithfully, and leaves it as it was', async () => {
    const before = await layout();
    const target = `${redis.url}/3`;
    const copied = await runCli(['migrate', '--from', uri('mariadb', 'adk'), '--to', target, '--verify']);
    expect(copied.stderr).toBe('');
    expect(copied.code).toBe(0);
    expect(copied.stdout).toContain('copied 2 new and 0 updated sessions (6 events)');
    expect(copied.stdout).toContain('verify: 0 differences');
    await expectAdaCopied(target);
    const inspected = await runCli(['inspect', uri('mariadb', 'adk'), '--app', 'greeter']);
    expect(inspected.code, inspected.stdout + inspected.stderr).toBe(0);
    expect(await layout()).toBe(before);
  });

  describe('refuses a database ADK would change to open, and leaves the server as it was (migrate and inspect)', () => {
    // An index of the team's own on ADK's table: ADK's MariaDB driver drops it on opening.
    beforeAll(() => sql('CREATE INDEX by_time ON adk.events (timestamp)'));
    afterAll(() => sql('DROP INDEX IF EXISTS by_time ON adk.events'));

    // One test a source: each runs the CLI twice, and a loaded machine must not make one bound cover them all.
    it.each([
      ['mariadb', 'adk', 'ADK would change it first (alter table `events` drop index `by_time`)'],
      [
        'mariadb',
        'unversioned',
        "ADK would change it first (insert into `adk_internal_metadata` (`key`, `value`) values ('schema_version', '1'));",
      ],
      ['mariadb', 'shop', 'ADK would change it first (create table `app_states`'],
      ['mariadb', 'nothing', 'ADK would change it first (create database `nothing`)'],
      ['mysql', 'shop', 'ADK would change it first (create table `app_states`'],
      ['mysql', 'nothing', 'ADK would change it first (create database `nothing`)'],
    ] as const)('%s://…/%s', async (scheme, name, said) => {
      const before = await layout();
      expect(before).toContain('by_time');
      await expectRefused(uri(scheme, name), said, `${redis.url}/4`);
      expect(await layout()).toBe(before);
    });
  });

  it("refuses ADK's MariaDB database through mysql://, whose driver would alter its tables, and leaves it as it was", async () => {
    const before = await layout();
    const source = uri('mysql', 'adk');
    const copied = await runCli(['migrate', '--from', source, '--to', `${redis.url}/5`]);
    expect(copied.code, copied.stdout + copied.stderr).toBe(1);
    expect(copied.stderr).toContain(
      `adk-state migrate: the source ${source} is not a database ADK reads as it is: ADK would change it first (alter table`,
    );
    expect(await layout()).toBe(before);
  });
});
