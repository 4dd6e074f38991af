/**
 * The bench's PostgreSQL: a private cluster of `@adk-state/test-servers`
 * (initdb into a temporary directory, 127.0.0.1 and a free port), with the
 * settings printed with the results and a raw round-trip probe.
 */
import { type PostgresServer, startPostgres } from '@adk-state/test-servers/postgres';
import pg from 'pg';
import type { BackendSpec, RunningBackend } from './types.js';

export interface PostgresBackend extends RunningBackend {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` */
  url: string;
}

/** The server settings, printed with the results. */
const SETTINGS = ['synchronous_commit=off', 'max_connections=100'];

export const postgresBackend: BackendSpec<PostgresBackend> = {
  id: 'postgresql',
  label: 'PostgreSQL',
  async start() {
    const server: PostgresServer = await startPostgres({ settings: SETTINGS });
    try {
      // A pool, as MikroORM uses: with many requests in flight each gets a connection of its own.
      const client = new pg.Pool({ connectionString: server.url, max: 10 });
      const version = String((await client.query('SHOW server_version')).rows[0]?.server_version ?? '?');
      return {
        url: server.url,
        details: `PostgreSQL ${version} (own cluster on 127.0.0.1, ${SETTINGS.join(', ')})`,
        probes: [{ name: 'SELECT 1', run: () => client.query('SELECT 1') }],
        detachedPids: () => [server.pid()],
        async stop() {
          await client.end().catch(() => undefined);
          await server.stop();
        },
      };
    } catch (error) {
      await server.stop();
      throw error;
    }
  },
};
