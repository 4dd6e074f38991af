/**
 * Starts a Firestore emulator on 127.0.0.1 on a free port, for the
 * Firestore store's test run, the CLI's tests, the bench and the consumer
 * smoke test.
 *
 * Google's emulator (the apt package `google-cloud-cli-firestore-emulator`,
 * a Java server) is the reference and is used whenever it is installed: its
 * launcher is found with `dpkg -L` (or given by
 * `ADK_STATE_FIRESTORE_EMULATOR_LAUNCHER`) and runs in a process group of
 * its own, so that the whole emulator (the launcher script and its `java`
 * child) can be paused with `SIGSTOP` and resumed with `SIGCONT`, keeping
 * its data. Without it, the npm emulator `@firestore-emulator/server` runs
 * in this process as a fallback. `ADK_STATE_FIRESTORE_EMULATOR=google` or
 * `=npm` insists on one of the two.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { freePort, untilRefused } from '../ports.js';

/** Which emulator runs: Google's or the npm fallback. */
export type EmulatorKind = 'google' | 'third-party';

/**
 * What a test run or a script needs to know of a running emulator, and can
 * pass between processes (it is plain data).
 */
export interface EmulatorInfo {
  /** `host:port`, what `FIRESTORE_EMULATOR_HOST` expects. */
  hostPort: string;
  kind: EmulatorKind;
  /** Which emulator this is, in words (printed by every script that starts one). */
  description: string;
  /**
   * The process group of Google's emulator (launcher and `java`), to pause
   * and resume it; absent for the in-process npm emulator.
   */
  processGroup?: number;
}

/** A running emulator started by {@link startFirestoreEmulator}. */
export interface FirestoreEmulator extends EmulatorInfo {
  host: string;
  port: number;
  stop(): Promise<void>;
}

/** The apt package of Google's emulator. */
export const GOOGLE_EMULATOR_PACKAGE = 'google-cloud-cli-firestore-emulator';

const HOST = '127.0.0.1';
/** How long Google's emulator may take to answer after it was started (a JVM start). */
const START_TIMEOUT_MS = 90_000;
/** How long it may take to exit after SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 10_000;

/** The launcher of Google's emulator, or undefined when the apt package (or Java) is missing. */
export function googleEmulatorLauncher(): string | undefined {
  const given = process.env.ADK_STATE_FIRESTORE_EMULATOR_LAUNCHER;
  if (given) return existsSync(given) ? given : undefined;
  let files: string;
  try {
    files = execFileSync('dpkg', ['-L', GOOGLE_EMULATOR_PACKAGE], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch {
    return undefined;
  }
  const launcher = files.split('\n').find((line) => line.endsWith('/cloud_firestore_emulator'));
  if (!launcher || !existsSync(launcher)) return undefined;
  try {
    execFileSync(process.env.JAVA || 'java', ['-version'], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  return launcher;
}

/** Google's emulator when it is installed (or asked for), else the npm one. */
export async function startFirestoreEmulator(): Promise<FirestoreEmulator> {
  const wanted = process.env.ADK_STATE_FIRESTORE_EMULATOR;
  if (wanted !== undefined && wanted !== '' && wanted !== 'google' && wanted !== 'npm') {
    throw new Error(`ADK_STATE_FIRESTORE_EMULATOR must be google or npm, not ${wanted}`);
  }
  if (wanted === 'npm') return startNpmEmulator('asked for by ADK_STATE_FIRESTORE_EMULATOR=npm');
  const launcher = googleEmulatorLauncher();
  if (launcher) return startGoogleEmulator(launcher);
  if (wanted === 'google') {
    throw new Error(
      `ADK_STATE_FIRESTORE_EMULATOR=google, but Google's emulator is not installed (apt package ${GOOGLE_EMULATOR_PACKAGE}, and Java 11 or later)`,
    );
  }
  return startNpmEmulator(`the fallback: ${GOOGLE_EMULATOR_PACKAGE} is not installed`);
}

/** True when an HTTP request to the emulator's root gets an answer. */
async function answers(hostPort: string, timeoutMs = 2_000): Promise<boolean> {
  try {
    const response = await fetch(`http://${hostPort}/`, { signal: AbortSignal.timeout(timeoutMs) });
    await response.arrayBuffer();
    return response.ok;
  } catch {
    return false;
  }
}

/** Sends `signal` to every process of a group; false when the group is gone. */
export function signalGroup(group: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-group, signal);
    return true;
  } catch {
    return false;
  }
}

/** Waits until the emulator answers again (after `SIGCONT`, say), at most `timeoutMs`. */
export async function waitUntilAnswering(hostPort: string, timeoutMs = START_TIMEOUT_MS): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await answers(hostPort))) {
    if (Date.now() > until)
      throw new Error(`the Firestore emulator on ${hostPort} did not answer within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Starts Google's emulator with `launcher` in a process group of its own. The
 * port is free when chosen, but the emulator opens a server of its own on an
 * ephemeral port first, which can be that very one (or another process takes
 * it meanwhile): a start that fails to bind is tried again on another port.
 */
export async function startGoogleEmulator(launcher: string): Promise<FirestoreEmulator> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startGoogleEmulatorOnce(launcher);
    } catch (error) {
      const taken = error instanceof Error && error.message.includes('Address already in use');
      if (!taken || attempt >= BIND_ATTEMPTS) throw error;
    }
  }
}

/** How many ports a start of Google's emulator tries before it gives up. */
const BIND_ATTEMPTS = 3;

async function startGoogleEmulatorOnce(launcher: string): Promise<FirestoreEmulator> {
  const port = await freePort();
  const hostPort = `${HOST}:${port}`;
  const child = spawn(launcher, ['start', `--host=${HOST}`, `--port=${port}`], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const group = child.pid;
  if (group === undefined) throw new Error(`could not start Google's Firestore emulator (${launcher})`);
  // The output is drained (a full pipe would stall the emulator) and its tail kept for error messages.
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // If this process ends without stopping it (a crash, process.exit), the emulator goes with it.
  const reap = () => {
    signalGroup(group, 'SIGCONT');
    signalGroup(group, 'SIGKILL');
  };
  process.once('exit', reap);

  const stop = async () => {
    process.removeListener('exit', reap);
    if (child.exitCode !== null || child.signalCode !== null) {
      signalGroup(group, 'SIGKILL');
      await untilRefused(port);
      return;
    }
    signalGroup(group, 'SIGCONT');
    signalGroup(group, 'SIGTERM');
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, STOP_TIMEOUT_MS);
    });
    await Promise.race([exited, late]);
    clearTimeout(timer);
    // The java child may outlive the launcher script: the group goes as a whole.
    signalGroup(group, 'SIGKILL');
    // Stopped means gone: its port refuses connections (the `java` process dies a moment after the launcher).
    await untilRefused(port);
  };

  try {
    await waitForStart(child, hostPort, () => output);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    kind: 'google',
    description: `Google's Cloud Firestore emulator (${launcher}, Java) on ${hostPort}`,
    host: HOST,
    port,
    hostPort,
    processGroup: group,
    stop,
  };
}

async function waitForStart(child: ChildProcess, hostPort: string, output: () => string): Promise<void> {
  const until = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`Google's Firestore emulator exited before it answered:\n${output()}`);
    }
    if (await answers(hostPort)) return;
    if (Date.now() > until) {
      throw new Error(
        `Google's Firestore emulator did not answer on ${hostPort} within ${START_TIMEOUT_MS} ms:\n${output()}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

interface GrpcServer {
  bindAsync(address: string, credentials: unknown, callback: (error: Error | null, port: number) => void): void;
  forceShutdown(): void;
}

/**
 * Starts the npm emulator `@firestore-emulator/server` in this process. The
 * package itself binds 0.0.0.0 on a fixed port; its gRPC server is reached
 * here to bind loopback only.
 */
export async function startNpmEmulator(why = 'the fallback'): Promise<FirestoreEmulator> {
  const require = createRequire(import.meta.url);
  const entry = require.resolve('@firestore-emulator/server');
  const { FirestoreServer } = require(entry) as { FirestoreServer: new () => unknown };
  // The emulator's own copy of grpc-js, so that its server accepts the credentials object.
  const grpc = createRequire(entry)('@grpc/grpc-js') as { ServerCredentials: { createInsecure(): unknown } };
  const server = (new FirestoreServer() as { server?: GrpcServer }).server;
  if (typeof server?.bindAsync !== 'function') {
    throw new Error('@firestore-emulator/server changed shape: its gRPC server is not reachable to bind 127.0.0.1');
  }
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${HOST}:0`, grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
  const hostPort = `${HOST}:${port}`;
  return {
    kind: 'third-party',
    description: `the npm emulator @firestore-emulator/server (${why}) on ${hostPort}`,
    host: HOST,
    port,
    hostPort,
    async stop() {
      server.forceShutdown();
    },
  };
}
