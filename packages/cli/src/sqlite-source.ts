/**
 * A `sqlite://` store that a command only reads (`migrate`'s source,
 * `inspect`). `@google/adk`'s DatabaseSessionService opens any file it is
 * given as one of its own: it creates a missing file, brings the tables to
 * its own layout (adding tables and columns, dropping indexes it did not
 * make) and writes its schema version. So such a store is opened here on a
 * connection that refuses every write (`PRAGMA query_only`): whatever ADK
 * would change fails instead, and the command stops saying so. Before that,
 * the file is looked at without opening it as a database: it must be a
 * regular, non-empty file that begins with SQLite's header.
 */
import { open, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { DatabaseSessionService } from '@google/adk';
import { MissingPackageError } from './packages.js';
import { redactUri } from './redact.js';
import { closableAdkService, sqliteFile, type UriSessionService } from './uri.js';

/** Every SQLite database file begins with these 16 bytes. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\u0000', 'latin1');

/** How much of ADK's refusal a message quotes. */
const QUOTED_CHARS = 300;

/**
 * For a `sqlite://` URI that names a file: ADK's DatabaseSessionService on it,
 * opened (and its tables checked, by ADK) on a connection that cannot write.
 * Throws, naming the store as `what` and saying `why` it must not change,
 * when the file is missing, not a regular file, empty, not SQLite, or not a
 * database ADK can read as it is. Undefined for any other URI (and for
 * `sqlite://:memory:`), which the caller opens as usual.
 */
export async function openSqliteReadOnly(
  uri: string,
  what: string,
  why: string,
): Promise<UriSessionService | undefined> {
  const file = sqliteFile(uri);
  if (file === undefined) return undefined;
  const named = `${what} ${redactUri(uri)}`;
  await assertSqliteFile(file, named, why);
  const { SqliteDriver } = await sqliteDriver();
  const { DatabaseSessionService: Database } = await import('@google/adk');
  const service = closableAdkService(
    new Database({
      driver: SqliteDriver,
      dbName: file,
      // Every connection of the pool refuses writes before it is used.
      pool: {
        afterCreate: (connection: QueryOnly, done: (error: Error | null, connection: QueryOnly) => void) =>
          connection.run('PRAGMA query_only = ON', (error) => done(error, connection)),
      },
    } as ConstructorParameters<typeof DatabaseSessionService>[0]),
  );
  try {
    await (service as DatabaseSessionService).init();
  } catch (error) {
    await service.close?.().catch(() => {});
    throw new Error(refusal(named, why, error), { cause: error });
  }
  return service;
}

/** What the pool hands `afterCreate`: a `sqlite3` connection. */
interface QueryOnly {
  run(sql: string, done: (error: Error | null) => void): void;
}

/** Why ADK could not open the file as it is: the change it would make, or its own words. */
function refusal(named: string, why: string, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const readOnly = message.indexOf(' - SQLITE_READONLY');
  if (readOnly >= 0) {
    const change = message.slice(0, readOnly).trim().replace(/;$/, '');
    return `${named} is not a database ADK reads as it is: ADK would change it first (${quote(change)}); ${why}`;
  }
  if (/SQLITE_READONLY/.test(message)) {
    return `${named} is not a database ADK reads as it is: ADK would write to it first (${quote(message)}); ${why}`;
  }
  return `${named} cannot be opened by ADK's DatabaseSessionService: ${quote(message)}`;
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
    throw new Error(`${named} cannot be read (${where}: ${(error as Error).message})`, { cause: error });
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
    throw new Error(`${named} cannot be read (${where}: ${(error as Error).message})`, { cause: error });
  }
  if (!header.equals(SQLITE_HEADER)) throw new Error(`${named} is not a SQLite database (${where})`);
}

/**
 * `@mikro-orm/sqlite`, the driver package ADK loads for `sqlite://`, found
 * from where `@google/adk` is installed (as ADK finds it).
 */
async function sqliteDriver(): Promise<typeof import('@mikro-orm/sqlite')> {
  let path: string;
  try {
    const adk = createRequire(thisFile()).resolve('@google/adk');
    path = createRequire(adk).resolve('@mikro-orm/sqlite');
  } catch (error) {
    throw new MissingPackageError('@mikro-orm/sqlite', 'The sqlite:// session store', [], { cause: error });
  }
  return (await import(pathToFileURL(path).href)) as typeof import('@mikro-orm/sqlite');
}

/** This module's file, in the ES module build and the CommonJS one alike. */
function thisFile(): string {
  return typeof __filename === 'string' ? __filename : fileURLToPath(import.meta.url);
}
