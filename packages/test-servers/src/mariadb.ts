/**
 * A private MariaDB server on loopback: `mariadb-install-db` into a
 * temporary directory, `mariadbd` on 127.0.0.1 and a free port (and a unix
 * socket in that directory), stopped and the directory removed at the end
 * (also when the process exits without stopping it). Uses Debian's
 * `mariadb-server` package or the binaries MARIADB_BIN names. `root` logs
 * in without a password from 127.0.0.1.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from './exec.js';
import { accepts, freePort, waitUntil } from './ports.js';

export interface MariadbServer {
  /** `127.0.0.1` and the server's port: a URI is `<scheme>://root@127.0.0.1:<port>/<database>`. */
  host: string;
  port: number;
  stop(): Promise<void>;
}

/** Where `mariadbd` and `mariadb-install-db` are: MARIADB_BIN (one directory for both), else Debian's places. */
function binaries(): { server: string; install: string } {
  const dir = process.env.MARIADB_BIN;
  if (dir) return { server: join(dir, 'mariadbd'), install: join(dir, 'mariadb-install-db') };
  return { server: '/usr/sbin/mariadbd', install: '/usr/bin/mariadb-install-db' };
}

/** Whether {@link startMariadb} can run here. */
export function hasMariadb(): boolean {
  const { server, install } = binaries();
  return existsSync(server) && existsSync(install);
}

/** util-linux's `setpriv`, to start the server with a parent-death signal. */
const SETPRIV = '/usr/bin/setpriv';

/** How long the server has to start accepting connections. */
const START_TIMEOUT_MS = 60_000;

export async function startMariadb(): Promise<MariadbServer> {
  const { server, install } = binaries();
  if (!hasMariadb()) {
    throw new Error(`MariaDB is not installed (apt-get install -y mariadb-server), or set MARIADB_BIN: no ${server}`);
  }
  const dir = await mkdtemp(join(tmpdir(), 'adk-state-mariadb-'));
  const data = join(dir, 'data');
  // The server runs as whoever runs this; as root it must be told so (otherwise it is told nothing).
  const user = process.getuid?.() === 0 ? ['--user=root'] : [];
  let child: ChildProcess | undefined;
  const onExit = () => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      process.removeListener('exit', onExit);
      const running = child;
      child = undefined;
      if (running && running.exitCode === null && running.signalCode === null) {
        const exited = new Promise((resolve) => running.once('exit', resolve));
        running.kill('SIGTERM');
        const killed = setTimeout(() => running.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(killed);
      }
      await rm(dir, { recursive: true, force: true });
    })();
    return stopping;
  };
  try {
    await run(install, [
      '--no-defaults',
      `--datadir=${data}`,
      ...user,
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
    ]);
    const port = await freePort();
    const serverArgs = [
      '--no-defaults',
      `--datadir=${data}`,
      ...user,
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      `--socket=${join(dir, 'socket')}`,
      `--pid-file=${join(dir, 'pid')}`,
      `--log-error=${join(dir, 'error.log')}`,
      '--skip-log-bin',
      '--innodb-buffer-pool-size=32M',
      '--skip-name-resolve',
    ];
    // mariadbd ignores SIGINT: where util-linux's setpriv is, the server also dies with this process
    // (a test run interrupted or killed), not only on 'exit'.
    const started = existsSync(SETPRIV)
      ? spawn(SETPRIV, ['--pdeathsig', 'TERM', '--', server, ...serverArgs], { stdio: 'ignore' })
      : spawn(server, serverArgs, { stdio: 'ignore' });
    child = started;
    const exited = () => started.exitCode !== null || started.signalCode !== null;
    const failure = async () => {
      const log = await readFile(join(dir, 'error.log'), 'utf8').catch(() => '');
      return `mariadbd did not start on 127.0.0.1:${port}:\n${log.split('\n').slice(-20).join('\n')}`;
    };
    await waitUntil(async () => exited() || (await accepts(port)), START_TIMEOUT_MS, failure);
    if (exited()) throw new Error(await failure());
    return { host: '127.0.0.1', port, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
