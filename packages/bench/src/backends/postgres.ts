/**
 * A private PostgreSQL cluster for the bench: initdb into a temporary
 * directory, pg_ctl start on 127.0.0.1 and a free port, pg_ctl stop and
 * remove the directory at the end. Uses Debian's `postgresql` package
 * (/usr/lib/postgresql/<version>/bin) or PG_BIN. initdb refuses to run as
 * root, so as root the cluster runs as the `postgres` user (via runuser).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, run } from './process.js';
import type { BackendSpec, RunningBackend } from './types.js';

export interface PostgresBackend extends RunningBackend {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` */
  url: string;
}

/** The server settings, printed with the results. */
const SETTINGS = ['synchronous_commit=off', 'max_connections=100'];

/** The directory holding initdb and pg_ctl. */
export function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((name) => /^\d+$/.test(name) && existsSync(join(root, name, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error('PostgreSQL is not installed (apt-get install -y postgresql), or set PG_BIN to its bin directory');
  }
  return join(root, versions[0] as string, 'bin');
}

async function postgresUser(): Promise<{ uid: number; gid: number }> {
  const uid = Number(await run('id', ['-u', 'postgres']));
  const gid = Number(await run('id', ['-g', 'postgres']));
  return { uid, gid };
}

export const postgresBackend: BackendSpec<PostgresBackend> = {
  id: 'postgresql',
  label: 'PostgreSQL',
  async start() {
    const bin = postgresBinDir();
    const asRoot = process.getuid?.() === 0;
    const dir = await mkdtemp(join(tmpdir(), 'adk-state-bench-pg-'));
    const data = join(dir, 'data');
    const runAsOwner = (tool: string, args: string[]) =>
      asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : run(join(bin, tool), args);
    let started = false;
    // If the process ends without stop() (a crash, Ctrl-C), the cluster still goes.
    const onExit = () => {
      if (!started) {
        rmSync(dir, { recursive: true, force: true });
        return;
      }
      const stopArgs = [join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'];
      try {
        if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', ...stopArgs], { stdio: 'ignore' });
        else execFileSync(stopArgs[0] as string, stopArgs.slice(1), { stdio: 'ignore' });
      } catch {
        // Already gone.
      }
      rmSync(dir, { recursive: true, force: true });
    };
    process.once('exit', onExit);
    const stopServer = async () => {
      process.removeListener('exit', onExit);
      if (started) {
        started = false;
        await runAsOwner('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']).catch(() => undefined);
      }
      await rm(dir, { recursive: true, force: true });
    };
    try {
      if (asRoot) {
        const owner = await postgresUser();
        await chown(dir, owner.uid, owner.gid);
      }
      await runAsOwner('initdb', [
        '-D',
        data,
        '-U',
        'postgres',
        '-A',
        'trust',
        '-E',
        'UTF8',
        '--locale=C',
        '--no-sync',
      ]);
      const port = await freePort();
      const serverArgs = ['-k', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1'];
      for (const setting of SETTINGS) serverArgs.push('-c', setting);
      started = true;
      await runAsOwner('pg_ctl', [
        '-D',
        data,
        '-l',
        join(dir, 'server.log'),
        '-w',
        '-t',
        '60',
        '-o',
        serverArgs.join(' '),
        'start',
      ]);
      const url = `postgresql://postgres@127.0.0.1:${port}/postgres`;
      // A pool, as MikroORM uses: with many requests in flight each gets a connection of its own.
      const client = new pg.Pool({ connectionString: url, max: 10 });
      const version = String((await client.query('SHOW server_version')).rows[0]?.server_version ?? '?');
      return {
        url,
        details: `PostgreSQL ${version} (own cluster on 127.0.0.1, ${SETTINGS.join(', ')})`,
        probes: [{ name: 'SELECT 1', run: () => client.query('SELECT 1') }],
        // pg_ctl leaves the postmaster to init; its pid is the first line of postmaster.pid.
        detachedPids: () => [Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0])],
        async stop() {
          await client.end().catch(() => undefined);
          await stopServer();
        },
      };
    } catch (error) {
      await stopServer();
      throw error;
    }
  },
};
