/**
 * The peers: what an ADK user would otherwise pick. `@google/adk`'s
 * `InMemorySessionService`, and its `DatabaseSessionService` on SQLite and
 * on PostgreSQL (MikroORM drivers `@mikro-orm/sqlite` and `@mikro-orm/postgresql`).
 */
import { DatabaseSessionService, type Event, InMemorySessionService } from '@google/adk';
import type { MikroORM, Options } from '@mikro-orm/core';
import { PostgreSqlDriver } from '@mikro-orm/postgresql';
import { SqliteDriver } from '@mikro-orm/sqlite';
import { type PostgresBackend, postgresBackend } from '../backends/postgres.js';
import { type SqliteBackend, sqliteBackend } from '../backends/sqlite.js';
import { IN_PROCESS } from '../backends/types.js';
import { sessionState } from '../seed-data.js';
import { defineTarget, type OpenTarget, type SessionKey } from './types.js';

export const adkInMemory = defineTarget({
  id: 'adk-in-memory',
  label: 'ADK InMemorySessionService',
  kind: 'peer',
  backend: IN_PROCESS,
  async open(): Promise<OpenTarget> {
    return {
      service: new InMemorySessionService(),
      fresh: () => new InMemorySessionService(),
      roundTrips: 'in-process',
      async close() {},
    };
  },
});

export const adkDatabaseSqlite = defineTarget<SqliteBackend>({
  id: 'adk-db-sqlite',
  label: 'ADK DatabaseSessionService (SQLite)',
  kind: 'peer',
  backend: sqliteBackend,
  open: (backend) => openDatabase({ driver: SqliteDriver, dbName: backend.file }, 'SQL statements sent by MikroORM'),
});

export const adkDatabasePostgres = defineTarget<PostgresBackend>({
  id: 'adk-db-postgresql',
  label: 'ADK DatabaseSessionService (PostgreSQL)',
  kind: 'peer',
  backend: postgresBackend,
  open: (backend) =>
    openDatabase({ driver: PostgreSqlDriver, clientUrl: backend.url }, 'SQL statements sent to PostgreSQL'),
});

/** Rows per bulk insert when seeding. */
const BATCH = 500;

/**
 * Two services on the same database: one measured, and one whose MikroORM
 * query log counts the statements (its logging would slow the measured one).
 */
async function openDatabase(options: Options, unit: string): Promise<OpenTarget> {
  const service = new DatabaseSessionService(options);
  await service.init();
  let statements = 0;
  const counting = new DatabaseSessionService({
    ...options,
    debug: ['query'],
    colors: false,
    logger: (message: string) => {
      if (message.includes('[query] ')) statements++;
    },
  });
  await counting.init();
  const orm = (service as unknown as { orm: MikroORM }).orm;

  return {
    service,
    roundTrips: {
      unit,
      service: counting,
      async count(operation) {
        statements = 0;
        await operation();
        return statements;
      },
    },
    seed: {
      // Writes the rows DatabaseSessionService's own appendEvent writes, many
      // per statement: one call per event would take minutes here.
      async history(key: SessionKey, events: Event[]) {
        await service.createSession({ ...key, state: sessionState() });
        for (let start = 0; start < events.length; start += BATCH) {
          const rows = events.slice(start, start + BATCH).map((event) => ({
            id: event.id,
            appName: key.appName,
            userId: key.userId,
            sessionId: key.sessionId,
            invocationId: event.invocationId,
            timestamp: new Date(event.timestamp),
            eventData: event,
          }));
          await orm.em.fork().insertMany('StorageEvent', rows);
        }
      },
      // The first session of each user through the service (it creates the
      // app and user rows), the rest as rows.
      async sessions(appName: string, users: string[], count: number) {
        for (const [index, userId] of users.entries()) {
          await service.createSession({ appName, userId, sessionId: `s${index}`, state: sessionState() });
        }
        const base = Date.now();
        const rows = [];
        for (let index = users.length; index < count; index++) {
          const time = new Date(base + index);
          rows.push({
            id: `s${index}`,
            appName,
            userId: users[index % users.length] as string,
            state: sessionState(),
            createTime: time,
            updateTime: time,
          });
        }
        for (let start = 0; start < rows.length; start += BATCH) {
          await orm.em.fork().insertMany('StorageSession', rows.slice(start, start + BATCH));
        }
      },
    },
    async close() {
      const orms = [orm, (counting as unknown as { orm: MikroORM }).orm];
      await Promise.all(orms.map((each) => each.close(true)));
    },
  };
}
