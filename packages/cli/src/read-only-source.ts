/**
 * A SQL store of `@google/adk` that a command only reads (`migrate`'s
 * source, `inspect`). ADK's DatabaseSessionService opens any database it is
 * given as one of its own: it creates a missing SQLite file or database,
 * brings the tables to its own layout (adding tables and columns, dropping
 * indexes and constraints it did not make) and writes its schema version.
 * So a `sqlite://`, `postgresql://`, `mysql://` or `mariadb://` store is
 * opened here on connections that refuse writes and schema changes (SQLite's
 * `PRAGMA query_only`, PostgreSQL's `default_transaction_read_only`, MySQL's
 * and MariaDB's `SET SESSION TRANSACTION READ ONLY`, which refuse DDL too,
 * each confirmed by asking the connection): whatever ADK would change fails
 * instead, and the command stops saying so.
 * A SQLite file is also looked at first without opening it as a database:
 * it must be a regular, non-empty file that begins with SQLite's header.
 * `mssql://` has no session setting that refuses DDL, and is opened as ADK
 * opens it.
 */
import { open, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { DatabaseSessionService } from '@google/adk';
import { bounded, chain, checkFailure, closeWithin, DEFAULT_CHECK_TIMEOUT_MS } from './check.js';
import { messageOf } from './command.js';
import { MissingPackageError } from './packages.js';
import { redactUri } from './redact.js';
import { closableAdkService, sqliteFile, type UriSessionService } from './uri.js';

/** Every SQLite database file begins with these 16 bytes. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\u0000', 'latin1');

/** How much of ADK's refusal a message quotes. */
const QUOTED_CHARS = 300;

/** The MikroORM driver ADK loads for a MySQL-protocol scheme, and its export. */
const MYSQL_DRIVERS = {
  mysql: ['@mikro-orm/mysql', 'MySqlDriver'],
  mariadb: ['@mikro-orm/mariadb', 'MariaDbDriver'],
} as const;

/**
 * For a `sqlite://` URI that names a file, or a `postgresql://` (`postgres://`),
 * `mysql://` or `mariadb://` URI: ADK's DatabaseSessionService on it, opened (and its tables checked,
 * by ADK) on connections that cannot write, within `timeoutMs`. Throws,
 * naming the store as `what` and saying `why` it must not change, when ADK
 * would create or change anything to open it, and when a SQLite file is
 * missing, not a regular file, empty or not SQLite; a `StoreCheckError` when
 * the opening fails otherwise or runs out of time. Undefined for any other
 * URI (and for `sqlite://:memory:`), which the caller opens as usual.
 */
export async function openReadOnly(
  uri: string,
  what: string,
  why: string,
  timeoutMs = DEFAULT_CHECK_TIMEOUT_MS,
): Promise<UriSessionService | undefined> {
  const named = `${what} ${redactUri(uri)}`;
  const file = sqliteFile(uri);
  const mysqlScheme = /^(mysql|mariadb):\/\//.exec(uri)?.[1] as keyof typeof MYSQL_DRIVERS | undefined;
  let options: Record<string, unknown>;
  if (file !== undefined) {
    await assertSqliteFile(file, named, why);
    const { SqliteDriver } = (await driverPackage('@mikro-orm/sqlite', 'sqlite')) as typeof import('@mikro-orm/sqlite');
    options = { driver: SqliteDriver, dbName: file, pool: { afterCreate: refusingWrites(SQLITE_READ_ONLY) } };
  } else if (/^postgres(ql)?:\/\//.test(uri)) {
    const { PostgreSqlDriver } = (await driverPackage(
      '@mikro-orm/postgresql',
      'postgresql',
    )) as typeof import('@mikro-orm/postgresql');
    options = {
      driver: PostgreSqlDriver,
      clientUrl: uri,
      pool: { afterCreate: refusingWrites(POSTGRES_READ_ONLY) },
    };
  } else if (mysqlScheme !== undefined) {
    const [name, exported] = MYSQL_DRIVERS[mysqlScheme];
    const driver = ((await driverPackage(name, mysqlScheme)) as Record<string, unknown>)[exported];
    if (typeof driver !== 'function') {
      throw new Error(
        `${name}, installed beside @google/adk, has no ${exported}: install the version @google/adk asks for`,
      );
    }
    options = {
      driver,
      clientUrl: uri,
      pool: { afterCreate: refusingWrites(MYSQL_READ_ONLY) },
    };
  } else {
    return undefined;
  }
  const { DatabaseSessionService: Database } = await import('@google/adk');
  const service = closableAdkService(new Database(options as ConstructorParameters<typeof DatabaseSessionService>[0]));
  if (mysqlScheme !== undefined) inEventTimeOrder(service);
  if (file !== undefined) inAppendOrder(service, 'sqlite');
  else if (mysqlScheme === undefined) inAppendOrder(service, 'postgresql');
  // Opening connects and reads the tables: bounded as the start-up check is, whatever the server does.
  const opening = (service as DatabaseSessionService).init();
  try {
    await bounded(timeoutMs, () => opening);
  } catch (error) {
    // An opening that ends after the bound still closes what it opened.
    opening.then(
      () => closeWithin(service),
      () => closeWithin(service),
    );
    await closeWithin(service);
    const message = messageOf(error);
    const unconfirmed = chain(error).find(
      (each): each is Error => each instanceof Error && (each as { code?: unknown }).code === NOT_READ_ONLY,
    );
    if (unconfirmed) {
      throw new Error(`${named} could not be opened read-only: ${unconfirmed.message}; ${why}`, { cause: error });
    }
    if (!READ_ONLY_REFUSAL.test(message)) throw checkFailure(uri, timeoutMs, error);
    throw new Error(refusal(named, why, message), { cause: error });
  }
  return service;
}

/**
 * ADK keeps an event's time on MySQL and MariaDB in a `datetime` column, to
 * the second, and reads a session's events in that column's order: the
 * events of one second come back in whatever order the server returns them.
 * Each event also holds its own time to the millisecond, and on SQLite and
 * PostgreSQL ADK reads in that order: `getSession` here puts the events back
 * in it (a stable sort: events of one millisecond keep the server's order).
 */
function inEventTimeOrder(service: UriSessionService): void {
  const read = service.getSession.bind(service);
  service.getSession = async (request) => {
    const session = await read(request);
    session?.events.sort((first, second) => first.timestamp - second.timestamp);
    return session;
  };
}

/** What of ADK's MikroORM instance (`orm`, made by its `init`) a raw query needs. */
interface SqlOrm {
  em: { getConnection(): { execute(sql: string, params: unknown[]): Promise<unknown> } };
}

/**
 * ADK reads a session's events newest first by time and turns the list
 * around, so the events of one millisecond (a tool's call and its answer,
 * say) come back in the reverse of the order they were appended on SQLite,
 * and in no fixed order on PostgreSQL. Both keep that order: SQLite as each
 * row's `rowid` (which an update of the row keeps), PostgreSQL as the
 * transaction that wrote the row (`xmin`: ADK appends each event in a
 * transaction of its own, one after the other, and ids of transactions
 * that close in time compare in 32-bit wraparound order). `getSession` here
 * puts the events of one millisecond back in it, with one more query for a
 * session that has such events.
 */
const APPEND_ORDER = {
  sqlite: 'SELECT id, rowid AS appended FROM events WHERE app_name = ? AND user_id = ? AND session_id = ?',
  postgresql: 'SELECT id, xmin::text AS appended FROM events WHERE app_name = ? AND user_id = ? AND session_id = ?',
} as const;

function inAppendOrder(service: UriSessionService, dialect: keyof typeof APPEND_ORDER): void {
  const read = service.getSession.bind(service);
  service.getSession = async (request) => {
    const session = await read(request);
    const events = session?.events ?? [];
    if (!events.some((event, index) => index > 0 && event.timestamp === events[index - 1]?.timestamp)) return session;
    const { orm } = service as unknown as { orm: SqlOrm };
    const rows = (await orm.em
      .getConnection()
      .execute(APPEND_ORDER[dialect], [request.appName, request.userId, request.sessionId])) as Array<{
      id: string;
      appended: unknown;
    }>;
    const appended = new Map(rows.map((row) => [row.id, Number(row.appended)]));
    events.sort(
      (first, second) =>
        first.timestamp - second.timestamp || ((appended.get(first.id) ?? 0) - (appended.get(second.id) ?? 0)) | 0,
    );
    return session;
  };
}

/**
 * How a connection is made read-only, and how it is asked whether that took:
 * the checks are tried in order until one runs (a server may know only an
 * older name of the setting), and the one value of its first row must say
 * read-only. A proxy between the command and the server that passed the
 * setting over would otherwise leave ADK free to change the database.
 */
export interface ReadOnlySetting {
  statement: string;
  checks: readonly string[];
}

export const SQLITE_READ_ONLY: ReadOnlySetting = { statement: 'PRAGMA query_only = ON', checks: ['PRAGMA query_only'] };
export const POSTGRES_READ_ONLY: ReadOnlySetting = {
  statement: 'SET default_transaction_read_only = on',
  checks: ['SHOW default_transaction_read_only'],
};
/** `transaction_read_only` is MySQL 5.7.20's and MariaDB 11.1's name; `tx_read_only` the older one (gone in MySQL 8). */
export const MYSQL_READ_ONLY: ReadOnlySetting = {
  statement: 'SET SESSION TRANSACTION READ ONLY',
  checks: ['SELECT @@SESSION.transaction_read_only', 'SELECT @@SESSION.tx_read_only'],
};

/** The `code` of a {@link NotReadOnlyError}. */
const NOT_READ_ONLY = 'ADK_STATE_NOT_READ_ONLY';

/** A connection the server did not make read-only, or would not say whether it did. */
export class NotReadOnlyError extends Error {
  /** Also how it is known when MikroORM passes it on wrapped (its `DriverException` keeps the `code`, not the cause). */
  readonly code = NOT_READ_ONLY;

  constructor(setting: ReadOnlySetting, detail: string) {
    super(`the connection did not become read-only after ${setting.statement} (${detail})`);
    this.name = 'NotReadOnlyError';
  }
}

/**
 * A pool's `afterCreate`: makes each new connection read-only before it is
 * used, and hands the pool an error instead when the server does not confirm it.
 */
export function refusingWrites(setting: ReadOnlySetting) {
  return (connection: Connection, done: (error: Error | null, connection: Connection) => void) => {
    const finish = (error: Error | null) => done(error, connection);
    run(connection, setting.statement, false, (error) => {
      if (error) return finish(error);
      const failures: string[] = [];
      const check = (at: number) => {
        const query = setting.checks[at];
        if (query === undefined) {
          finish(new NotReadOnlyError(setting, failures.join('; ')));
          return;
        }
        run(connection, query, true, (failure, result) => {
          if (failure) {
            failures.push(`${query}: ${failure.message}`);
            check(at + 1);
            return;
          }
          const value = firstValue(result);
          if (READ_ONLY_VALUES.has(typeof value === 'bigint' ? Number(value) : value)) finish(null);
          else finish(new NotReadOnlyError(setting, `${query} says ${JSON.stringify(String(value))}`));
        });
      };
      check(0);
    });
  };
}

/** What a server answers for a setting that is on. */
const READ_ONLY_VALUES = new Set<unknown>([1, '1', 'on', 'ON', true]);

/** sqlite3 runs a statement with run() and reads a row with get(); pg, mysql2 and mariadb's callback API query(). */
function run(
  connection: Connection,
  sql: string,
  reading: boolean,
  done: (error: Error | null, result?: unknown) => void,
): void {
  if (typeof connection.run === 'function' && typeof connection.get === 'function') {
    if (reading) connection.get(sql, done);
    else connection.run(sql, (error) => done(error));
  } else if (typeof connection.query === 'function') connection.query(sql, done);
  else done(new Error('a connection of an unknown driver: it cannot be made read-only'));
}

/** The one value of the first row of a result: pg's `{ rows }`, an array of rows (mysql2, mariadb), or a row (sqlite3's get). */
function firstValue(result: unknown): unknown {
  const rows = (result as { rows?: unknown })?.rows ?? result;
  const row = Array.isArray(rows) ? rows[0] : rows;
  return typeof row === 'object' && row !== null ? Object.values(row)[0] : undefined;
}

/** What a pool hands `afterCreate`: a `sqlite3`, `pg`, `mysql2` or `mariadb` connection. */
interface Connection {
  run?(sql: string, done: (error: Error | null) => void): void;
  get?(sql: string, done: (error: Error | null, row?: unknown) => void): void;
  query?(sql: string, done: (error: Error | null, result?: unknown) => void): void;
}

/** How SQLite, PostgreSQL, MySQL and MariaDB refuse a write on a connection that cannot write. */
const READ_ONLY_REFUSAL = /SQLITE_READONLY|in a read-only transaction|in a READ ONLY transaction/;

/**
 * The change ADK would have made, from MikroORM's message: the statement,
 * " - ", then the refusal (which on MariaDB goes on with the statement again,
 * after it): cut at the last " - " before the refusal's own words.
 */
function refusal(named: string, why: string, message: string): string {
  const refused = message.search(READ_ONLY_REFUSAL);
  const cut = message.lastIndexOf(' - ', refused < 0 ? undefined : refused);
  const change = cut > 0 ? message.slice(0, cut).trim().replace(/;$/, '') : message;
  return `${named} is not a database ADK reads as it is: ADK would change it first (${quote(change)}); ${why}`;
}

function quote(text: string): string {
  return text.length > QUOTED_CHARS ? `${text.slice(0, QUOTED_CHARS)}…` : text;
}

/** The file must be a regular, non-empty file with SQLite's header; nothing is written. */
async function assertSqliteFile(file: string, named: string, why: string): Promise<void> {
  if (file === '') throw new Error(`${named} names no SQLite file: give its path`);
  const where = resolve(file);
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(file);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOENT') throw new Error(`${named} names a SQLite file that does not exist (${where}): ${why}`);
    throw new Error(`${named} cannot be read (${where}: ${messageOf(error)})`, { cause: error });
  }
  if (!info.isFile()) throw new Error(`${named} names ${where}, which is not a file`);
  if (info.size === 0) {
    throw new Error(
      `${named} is an empty file, not a database ADK made: reading it through ADK would make it one (${why})`,
    );
  }
  let header: Buffer;
  try {
    const handle = await open(file, 'r');
    try {
      header = Buffer.alloc(SQLITE_HEADER.length);
      header = header.subarray(0, (await handle.read(header, 0, header.length, 0)).bytesRead);
    } finally {
      await handle.close();
    }
  } catch (error) {
    throw new Error(`${named} cannot be read (${where}: ${messageOf(error)})`, { cause: error });
  }
  if (!header.equals(SQLITE_HEADER)) throw new Error(`${named} is not a SQLite database (${where})`);
}

/**
 * A MikroORM driver package ADK loads for a scheme, found from where
 * `@google/adk` is installed (as ADK finds it).
 */
async function driverPackage(name: string, scheme: string): Promise<unknown> {
  let path: string;
  try {
    const adk = createRequire(thisFile()).resolve('@google/adk');
    path = createRequire(adk).resolve(name);
  } catch (error) {
    throw new MissingPackageError(name, scheme, [], { cause: error });
  }
  return import(pathToFileURL(path).href);
}

/** This module's file, in the ES module build and the CommonJS one alike. */
function thisFile(): string {
  return typeof __filename === 'string' ? __filename : fileURLToPath(import.meta.url);
}
