/**
 * What every command of `adk-state` is built with: the program's surroundings
 * ({@link ProgramIo}) settled once, every output through one redaction, and
 * the readers of the flags that several commands share.
 */
import type { Redactor } from './redact.js';
import type { RunningServer } from './server.js';

/**
 * The exit codes of `adk-state`: 0 when all went well, 1 for an error (a
 * store that fails its start-up check, a failed session, a difference found
 * by --verify). `migrate` adds 3 when it left conflicts alone, 4 when the
 * source holds no session for the query, and 130 when interrupted (Ctrl-C).
 */
export const EXIT_CODES = { ok: 0, error: 1, conflicts: 3, nothingFound: 4, interrupted: 130 } as const;

/** What the program needs from its surroundings (a test passes its own). */
export interface ProgramIo {
  /** Called once a server is up; the default waits for SIGINT or SIGTERM, then stops it. */
  onStarted?: (server: RunningServer) => void;
  /** Where messages go. Default stderr. */
  error?: (message: string) => void;
  /** Where results go. Default stdout. */
  print?: (text: string) => void;
  /**
   * Whether results go to a terminal (a live progress bar) or not (plain lines).
   * Default: stdout's isTTY when results go to stdout (no `print` given), else false.
   */
  tty?: boolean;
  /** Writes to the terminal as is (the live progress bar). Default stdout, or `print` when it is given. */
  write?: (text: string) => void;
  /** The terminal's width for the progress bar. Default stdout's columns when results go to stdout, else 80. */
  columns?: number;
  /** The redaction every output goes through; the program adds the URIs of its command line. Default a new one. */
  redactor?: Redactor;
  /** Ends the process with a code. Default `process.exit`. */
  exit?: (code: number) => void;
  /** The environment (DATABASE_URL is ADK's fallback for the session URI). */
  env?: NodeJS.ProcessEnv;
  /** Directory relative agent paths start from. Default `process.cwd()`. */
  cwd?: string;
  version?: string;
}

/** {@link ProgramIo} with every default settled; `print`, `error` and `write` redact what they are given. */
export interface CommandContext {
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  readonly redactor: Redactor;
  readonly print: (text: string) => void;
  readonly error: (message: string) => void;
  readonly write: (text: string) => void;
  readonly tty: boolean;
  readonly columns: number;
  readonly exit: (code: number) => void;
  readonly onStarted: (server: RunningServer) => void;
}

/** Settles the defaults of `io`; `redactor` is the program's one redaction. */
export function commandContext(io: ProgramIo, redactor: Redactor): CommandContext {
  const toStdout = io.print === undefined;
  const rawError = io.error ?? ((message: string) => process.stderr.write(`${message}\n`));
  const rawPrint = io.print ?? ((text: string) => process.stdout.write(`${text}\n`));
  const rawWrite = io.write ?? (toStdout ? (text: string) => process.stdout.write(text) : rawPrint);
  const error = (message: string) => rawError(redactor.redact(message));
  const exit = io.exit ?? ((code: number) => process.exit(code));
  return {
    env: io.env ?? process.env,
    cwd: io.cwd ?? process.cwd(),
    redactor,
    print: (text) => rawPrint(redactor.redact(text)),
    error,
    write: (text) => rawWrite(redactor.redact(text)),
    tty: io.tty ?? (toStdout && process.stdout.isTTY === true),
    columns: io.columns ?? (toStdout ? process.stdout.columns : undefined) ?? 80,
    exit,
    onStarted: io.onStarted ?? stopOnSignal(error, exit),
  };
}

/** The message of a failure, whatever was thrown. */
export function messageOf(failure: unknown): string {
  return failure instanceof Error ? failure.message : String(failure);
}

/** A boolean flag given as `--flag`, `--flag true` or `--flag 1`. */
export function flag(value: boolean | string): boolean {
  return value === true || value === 'true' || value === '1';
}

/** A number of seconds above 0, in milliseconds. */
export function seconds(value: string, name: string): number {
  const number = Number(value);
  if (!Number.isFinite(number) || number <= 0)
    throw new Error(`${name} must be a number of seconds above 0, got "${value}"`);
  return Math.round(number * 1000);
}

/** A TCP port to bind, 0 for a free one. */
export function port(value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0 || number > 65535) {
    throw new Error(`--port must be a whole number from 0 to 65535, got "${value}"`);
  }
  return number;
}

/** Whether a host to bind is a loopback address (only this machine can connect). */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127\.\d+\.\d+\.\d+$/.test(bare) || bare.endsWith('.localhost');
}

/** The warning printed when ADK's server (`web`, `api_server`) binds an address other machines can reach. */
export function exposedHostWarning(command: 'web' | 'api_server', host: string): string {
  return (
    `adk-state ${command}: warning: --host ${host} is not a loopback address. ADK's server checks no Host header ` +
    'and no Origin and has no authentication: anyone who can reach this address (and any web page their browser ' +
    'opens, through DNS rebinding) can read, write and delete every session. Bind 127.0.0.1, or put an ' +
    'authenticating proxy in front.'
  );
}

/** The warning printed when the inspect page (read-only, not ADK's server) binds an address other machines can reach. */
export function exposedInspectorWarning(host: string): string {
  return (
    `adk-state inspect: warning: --host ${host} is not a loopback address. The inspect page checks no Host header ` +
    'and has no authentication: anyone who can reach this address (and any web page their browser opens, through ' +
    'DNS rebinding) can read every session of the store, its state and events. The page writes nothing. Bind ' +
    '127.0.0.1, or put an authenticating proxy in front.'
  );
}

/** Waits for SIGINT or SIGTERM, then stops the server and closes its session service before exiting. */
function stopOnSignal(error: (message: string) => void, exit: (code: number) => void): (server: RunningServer) => void {
  return (server) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      server.stop().then(
        () => exit(0),
        (failure: unknown) => {
          error(`adk-state: stopping after ${signal} failed: ${messageOf(failure)}`);
          exit(1);
        },
      );
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  };
}
