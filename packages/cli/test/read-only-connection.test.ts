/**
 * A source's connections are made read-only, and the server is asked whether
 * that took: a connection it does not confirm is refused (a proxy that passed
 * the setting over would leave ADK free to change the database).
 */
import { describe, expect, it } from 'vitest';
import {
  MYSQL_READ_ONLY,
  NotReadOnlyError,
  POSTGRES_READ_ONLY,
  type ReadOnlySetting,
  refusingWrites,
  SQLITE_READ_ONLY,
} from '../src/read-only-source.js';

type Answer = { error?: string; result?: unknown };

/** A connection of the query() kind (pg, mysql2, mariadb) that answers each statement as told, and records them. */
function queryConnection(answers: Record<string, Answer>) {
  const sent: string[] = [];
  return {
    sent,
    query(sql: string, done: (error: Error | null, result?: unknown) => void) {
      sent.push(sql);
      const answer = answers[sql] ?? { error: `no answer scripted for ${sql}` };
      setImmediate(() => (answer.error ? done(new Error(answer.error)) : done(null, answer.result)));
    },
  };
}

function afterCreate(setting: ReadOnlySetting, connection: object): Promise<Error | null> {
  return new Promise((resolve) => refusingWrites(setting)(connection, (error) => resolve(error)));
}

describe('a read-only source connection', () => {
  it('PostgreSQL: passes when SHOW says on, and is refused when it says off', async () => {
    const on = queryConnection({
      [POSTGRES_READ_ONLY.statement]: { result: { rows: [] } },
      'SHOW default_transaction_read_only': { result: { rows: [{ default_transaction_read_only: 'on' }] } },
    });
    expect(await afterCreate(POSTGRES_READ_ONLY, on)).toBeNull();
    expect(on.sent).toEqual([POSTGRES_READ_ONLY.statement, 'SHOW default_transaction_read_only']);

    const off = queryConnection({
      [POSTGRES_READ_ONLY.statement]: { result: { rows: [] } },
      'SHOW default_transaction_read_only': { result: { rows: [{ default_transaction_read_only: 'off' }] } },
    });
    const refused = await afterCreate(POSTGRES_READ_ONLY, off);
    expect(refused).toBeInstanceOf(NotReadOnlyError);
    expect(refused?.message).toContain('SHOW default_transaction_read_only says "off"');
  });

  it("MySQL and MariaDB: the older variable's name is asked when the newer one is unknown; 1, '1' and 1n pass, 0 does not", async () => {
    const [newer, older] = MYSQL_READ_ONLY.checks as [string, string];
    for (const value of [1, '1', 1n]) {
      const mariadb = queryConnection({
        [MYSQL_READ_ONLY.statement]: { result: [] },
        [newer]: { error: "Unknown system variable 'transaction_read_only'" },
        [older]: { result: [{ [older.slice(7)]: value }] },
      });
      expect(await afterCreate(MYSQL_READ_ONLY, mariadb)).toBeNull();
      expect(mariadb.sent).toEqual([MYSQL_READ_ONLY.statement, newer, older]);
    }
    const mysql = queryConnection({
      [MYSQL_READ_ONLY.statement]: { result: [] },
      [newer]: { result: [{ [newer.slice(7)]: 0 }] },
    });
    expect(await afterCreate(MYSQL_READ_ONLY, mysql)).toBeInstanceOf(NotReadOnlyError);
    expect(mysql.sent).toEqual([MYSQL_READ_ONLY.statement, newer]);
  });

  it('a server that answers none of the checks is refused, with each answer in the message', async () => {
    const mute = queryConnection({ [MYSQL_READ_ONLY.statement]: { result: [] } });
    const refused = await afterCreate(MYSQL_READ_ONLY, mute);
    expect(refused).toBeInstanceOf(NotReadOnlyError);
    for (const check of MYSQL_READ_ONLY.checks) expect(refused?.message).toContain(`${check}: no answer scripted`);
  });

  it('a setting the server refuses is passed on as its own error, and nothing is asked after it', async () => {
    const refusing = queryConnection({ [POSTGRES_READ_ONLY.statement]: { error: 'permission denied' } });
    const refused = await afterCreate(POSTGRES_READ_ONLY, refusing);
    expect(refused?.message).toBe('permission denied');
    expect(refused).not.toBeInstanceOf(NotReadOnlyError);
    expect(refusing.sent).toEqual([POSTGRES_READ_ONLY.statement]);
  });

  it('SQLite (sqlite3): the pragma is run with run() and read back with get()', async () => {
    const calls: string[] = [];
    const sqlite = (queryOnly: number) => ({
      run(sql: string, done: (error: Error | null) => void) {
        calls.push(`run ${sql}`);
        setImmediate(() => done(null));
      },
      get(sql: string, done: (error: Error | null, row?: unknown) => void) {
        calls.push(`get ${sql}`);
        setImmediate(() => done(null, { query_only: queryOnly }));
      },
    });
    expect(await afterCreate(SQLITE_READ_ONLY, sqlite(1))).toBeNull();
    expect(calls).toEqual(['run PRAGMA query_only = ON', 'get PRAGMA query_only']);
    expect(await afterCreate(SQLITE_READ_ONLY, sqlite(0))).toBeInstanceOf(NotReadOnlyError);
  });
});
