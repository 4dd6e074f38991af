/**
 * A SQLite database file for the bench, in a temporary directory on tmpfs
 * (/dev/shm) when there is one, so that no figure measures the disk: Redis
 * runs without persistence and PostgreSQL with synchronous_commit=off.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sqlite3 from 'sqlite3';
import type { BackendSpec, RunningBackend } from './types.js';

export interface SqliteBackend extends RunningBackend {
  /** The database file. */
  file: string;
}

export const sqliteBackend: BackendSpec<SqliteBackend> = {
  id: 'sqlite',
  label: 'SQLite',
  async start() {
    const parent = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
    const dir = await mkdtemp(join(parent, 'adk-state-bench-sqlite-'));
    const file = join(dir, 'sessions.db');
    const database = await open(file);
    const version = await query<{ version: string }>(database, 'SELECT sqlite_version() AS version');
    return {
      file,
      details: `SQLite ${version.version} (sqlite3 driver, file on ${parent === '/dev/shm' ? 'tmpfs' : 'disk'})`,
      probes: [{ name: 'SELECT 1', run: () => query(database, 'SELECT 1') }],
      async stop() {
        await new Promise<void>((resolve) => database.close(() => resolve()));
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
};

function open(file: string): Promise<sqlite3.Database> {
  return new Promise((resolve, reject) => {
    const database = new sqlite3.Database(file, (error) => (error ? reject(error) : resolve(database)));
  });
}

function query<T>(database: sqlite3.Database, sql: string): Promise<T> {
  return new Promise((resolve, reject) => {
    database.get(sql, (error: Error | null, row: T) => (error ? reject(error) : resolve(row)));
  });
}
