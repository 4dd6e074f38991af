/**
 * A SQL store of `@google/adk` that a command only reads (`migrate`'s
 * source, `inspect`). ADK's DatabaseSessionService opens any database it is
 * given as one of its own: it creates a missing SQLite file or database,
 * brings the tables to its own layout (adding tables and columns, dropping
 * indexes and constraints it did not make) and writes its schema version.
 * So a `sqlite://`, `postgresql://`, `mysql://` or `mariadb://` store is
 * opened here on connections that refuse writes and schema changes (SQLite's
 * `PRAGMA query_only`, PostgreSQL's `default_transaction_read_only`, MySQL's
 * and MariaDB's `SET SESSION TRANSACTION READ ONLY`, which refuse DDL too):
 * whatever ADK would change fails instead, and the command stops saying so.
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
import { bounded, checkFailure, closeWithin, DEFAULT_CHECK_TIMEOUT_MS } from './check.js';
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
    options = { driver: SqliteDriver, dbName: file, pool: { afterCreate: refusingWrites('PRAGMA query_only = ON') } };
  } else if (/^postgres(ql)?:\/\//.test(uri)) {
    const { PostgreSqlDriver } = (await driverPackage(
      '@mikro-orm/postgresql',
      'postgresql',
    )) as typeof import('@mikro-orm/postgresql');
    options = {
      driver: PostgreSqlDriver,
      clientUrl: uri,
      pool: { afterCreate: refusingWrites('SET default_transaction_read_only = on') },
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
      pool: { afterCreate: refusingWrites('SET SESSION TRANSACTION READ ONLY') },
    };
  } else {
    return undefined;
  }
  const { DatabaseSessionService: Database } = await import('@google/adk');
  const service = closableAdkService(new Database(options as ConstructorParameters<typeof DatabaseSessionService>[0]));
  if (mysqlScheme !== undefined) inEventTimeOrder(service);
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

/** A pool's `afterCreate`: runs `statement` on each new connection before it is used. */
function refusingWrites(statement: string) {
  return (connection: Connection, done: (error: Error | null, connection: Connection) => void) => {
    const ran = (error: Error | null) => done(error, connection);
    // sqlite3 runs a statement with run(); pg, mysql2 and mariadb's callback API with query().
    if (typeof connection.run === 'function') connection.run(statement, ran);
    else if (typeof connection.query === 'function') connection.query(statement, ran);
    else ran(new Error('a connection of an unknown driver: it cannot be made read-only'));
  };
}

/** What a pool hands `afterCreate`: a `sqlite3`, `pg`, `mysql2` or `mariadb` connection. */
interface Connection {
  run?(sql: string, done: (error: Error | null) => void): void;
  query?(sql: string, done: (error: Error | null) => void): void;
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
