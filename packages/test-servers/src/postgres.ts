/**
 * A private PostgreSQL cluster on loopback: initdb into a temporary
 * directory, pg_ctl start on 127.0.0.1 and a free port, pg_ctl stop and
 * remove the directory at the end (also when the process exits without
 * stopping it). Uses Debian's `postgresql` package
 * (/usr/lib/postgresql/<version>/bin) or PG_BIN. initdb refuses to run as
 * root, so as root the cluster runs as the `postgres` user (via runuser).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from './exec.js';
import { freePort } from './ports.js';

export interface PostgresServer {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` (trust authentication on loopback). */
  url: string;
  /** The postmaster's pid (pg_ctl leaves it to init). */
  pid(): number;
  stop(): Promise<void>;
}

export interface PostgresOptions {
  /** Server settings (`name=value`), each passed as `-c`. */
  settings?: readonly string[];
}

/** The directory holding initdb and pg_ctl; throws when PostgreSQL is not installed. */
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

/** Whether {@link startPostgres} can run here. */
export function hasPostgres(): boolean {
  try {
    postgresBinDir();
    return true;
  } catch {
    return false;
  }
}

export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const asRoot = process.getuid?.() === 0;
  const dir = await mkdtemp(join(tmpdir(), 'adk-state-pg-'));
  const data = join(dir, 'data');
  const runAsOwner = (tool: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : run(join(bin, tool), args);
  let started = false;
  // If the process ends without stop() (a crash, Ctrl-C), the cluster still goes.
  const onExit = () => {
    if (started) {
      const stopArgs = [join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'];
      try {
        if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', ...stopArgs], { stdio: 'ignore' });
        else execFileSync(stopArgs[0] as string, stopArgs.slice(1), { stdio: 'ignore' });
      } catch {
        // Already gone.
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  const stop = async () => {
    process.removeListener('exit', onExit);
    if (started) {
      started = false;
      await runAsOwner('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']).catch(() => undefined);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    if (asRoot) {
      const uid = Number(await run('id', ['-u', 'postgres']));
      const gid = Number(await run('id', ['-g', 'postgres']));
      await chown(dir, uid, gid);
    }
    await runAsOwner('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    const port = await freePort();
    const serverArgs = ['-k', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1'];
    for (const setting of options.settings ?? []) serverArgs.push('-c', setting);
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
    return {
      url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
      pid: () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
