/**
 * A `sqlite://` store that a command only reads (`migrate`'s source,
 * `inspect`) must be a database `@google/adk`'s DatabaseSessionService made:
 * ADK opens any file it is given as one of its own, creating the file if
 * there is none, adding its tables where they are missing and writing its
 * schema version into them. This looks at the file first, without writing:
 * its header, then (read-only, through the `sqlite3` driver ADK itself uses)
 * its tables.
 */
import { open } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { redactUri } from './redact.js';
import { sqliteFile } from './uri.js';

/** The tables ADK's DatabaseSessionService keeps sessions in, and the key of its schema version row. */
const ADK_TABLES = ['sessions', 'events', 'app_states', 'user_states', 'adk_internal_metadata'] as const;
const SCHEMA_VERSION_KEY = 'schema_version';

/** How long a read of the schema waits for a writer's lock on the file. */
const BUSY_TIMEOUT_MS = 5_000;

/** Every SQLite database file begins with these 16 bytes. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\u0000', 'latin1');

/**
 * Throws when `uri` names a SQLite file that is missing, is not a SQLite
 * database, or lacks ADK's tables or schema version: reading it through ADK
 * would create or change it. `what` names the store in the message (`the
 * source`), `why` says why it must not change. Any other URI passes.
 */
export async function assertAdkSqliteFile(uri: string, what: string, why: string): Promise<void> {
  const file = sqliteFile(uri);
  if (file === undefined) return;
  const named = `${what} ${redactUri(uri)}`;
  if (file === '') throw new Error(`${named} names no SQLite file: give its path`);
  const header = await readHeader(file);
  if (header === 'missing') {
    throw new Error(`${named} names a SQLite file that does not exist (${resolve(file)}): ${why}`);
  }
  if (header.length === 0) {
    throw new Error(
      `${named} is an empty file, not a database ADK made: reading it through ADK would make it one (${why})`,
    );
  }
  if (header.length < SQLITE_HEADER.length || !header.equals(SQLITE_HEADER)) {
    throw new Error(`${named} is not a SQLite database (${resolve(file)})`);
  }
  const driver = sqliteDriver();
  // Without the driver ADK cannot open the file either, and says so itself.
  if (!driver) return;
  const found = await readSchema(driver, file).catch((cause: unknown) => {
    throw new Error(`${named} cannot be read (${cause instanceof Error ? cause.message : String(cause)})`, { cause });
  });
  const missing = ADK_TABLES.filter((table) => !found.tables.includes(table));
  if (missing.length > 0) {
    throw new Error(
      `${named} is not a database ADK's DatabaseSessionService made (it has no ${missing.join(', ')} table${missing.length > 1 ? 's' : ''}): reading it through ADK would add ${missing.length > 1 ? 'them' : 'it'} (${why})`,
    );
  }
  if (!found.versioned) {
    throw new Error(
      `${named} has no ADK schema version: reading it through ADK would write one (${why}); open it once with the ADK version that made it`,
    );
  }
}

/** The file's first 16 bytes (fewer for a shorter file), or `'missing'`. */
async function readHeader(file: string): Promise<Buffer | 'missing'> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return 'missing';
    throw error;
  }
  try {
    const buffer = Buffer.alloc(SQLITE_HEADER.length);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** What this module uses of the `sqlite3` driver. */
interface SqliteDriver {
  OPEN_READONLY: number;
  Database: new (
    file: string,
    mode: number,
    done: (error: Error | null) => void,
  ) => {
    configure(option: 'busyTimeout', ms: number): void;
    all(sql: string, params: unknown[], done: (error: Error | null, rows: Record<string, unknown>[]) => void): void;
    close(done: (error: Error | null) => void): void;
  };
}

/**
 * The `sqlite3` driver as ADK loads it: from `@mikro-orm/sqlite`, found from
 * `@google/adk`. Undefined when either is not installed.
 */
function sqliteDriver(): SqliteDriver | undefined {
  try {
    const fromHere = createRequire(import.meta.url);
    const adk = fromHere.resolve('@google/adk');
    const orm = createRequire(adk).resolve('@mikro-orm/sqlite');
    return createRequire(orm)('sqlite3') as SqliteDriver;
  } catch {
    return undefined;
  }
}

/** The names of the file's tables, and whether ADK's schema version row is there; opened read-only. */
async function readSchema(driver: SqliteDriver, file: string): Promise<{ tables: string[]; versioned: boolean }> {
  const db = await new Promise<InstanceType<SqliteDriver['Database']>>((done, fail) => {
    const opened = new driver.Database(file, driver.OPEN_READONLY, (error) => (error ? fail(error) : done(opened)));
  });
  // A database an application is writing to is locked now and then: wait for it, as ADK's own connection would.
  db.configure('busyTimeout', BUSY_TIMEOUT_MS);
  const all = (sql: string, params: unknown[]) =>
    new Promise<Record<string, unknown>[]>((done, fail) =>
      db.all(sql, params, (error, rows) => (error ? fail(error) : done(rows))),
    );
  try {
    const rows = await all("SELECT name FROM sqlite_master WHERE type = 'table'", []);
    const tables = rows.map((row) => String(row.name));
    const versioned =
      tables.includes('adk_internal_metadata') &&
      (await all('SELECT 1 FROM adk_internal_metadata WHERE key = ?', [SCHEMA_VERSION_KEY])).length > 0;
    return { tables, versioned };
  } finally {
    await new Promise<void>((done) => db.close(() => done()));
  }
}
