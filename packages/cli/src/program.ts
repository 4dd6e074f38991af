/**
 * The `adk-state` command: `web` and `api_server` with the flags of ADK's own
 * `adk` command, so swapping `adk` for `adk-state` changes nothing but the
 * stores that `--session_service_uri` can name.
 */
import { resolve } from 'node:path';
import { Argument, Command, Option } from 'commander';
import { checkStore, closeWithin, DEFAULT_CHECK_TIMEOUT_MS } from './check.js';
import { inspectText, serveInspector } from './inspect.js';
import {
  type ConflictPolicy,
  changesOf,
  conflictsLeft,
  type MigrateProgress,
  type MigrateReport,
  migrate,
  migrationSucceeded,
} from './migrate.js';
import { Redactor, redactUri } from './redact.js';
import { type LogLevelName, type RunningServer, startServer } from './server.js';
import { sessionServiceFromUri } from './uri.js';

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
  /** Whether results go to a terminal (a live progress bar) or not (plain lines). Default: stdout's isTTY. */
  tty?: boolean;
  /** Writes to the terminal as is (the live progress bar). Default stdout. */
  write?: (text: string) => void;
  /** The terminal's width for the progress bar. Default stdout's columns, else 80. */
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

interface ServeFlags {
  host: string;
  port: string;
  allow_origins: string;
  verbose: boolean;
  log_level: string;
  session_service_uri?: string;
  artifact_service_uri?: string;
  otel_to_cloud: boolean | string;
  compile: boolean | string;
  bundle: boolean | string;
  file_type?: 'esm' | 'cjs';
  a2a: boolean | string;
  a2a_auth_token?: string;
  reload_agents: boolean | string;
  check_timeout: string;
}

const LOG_LEVELS: readonly LogLevelName[] = ['debug', 'info', 'warn', 'error'];

function flag(value: boolean | string): boolean {
  return value === true || value === 'true' || value === '1';
}

function seconds(value: string, name: string): number {
  const number = Number(value);
  if (!Number.isFinite(number) || number <= 0)
    throw new Error(`${name} must be a number of seconds above 0, got "${value}"`);
  return Math.round(number * 1000);
}

/** Whether a host to bind is a loopback address (only this machine can connect). */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127\.\d+\.\d+\.\d+$/.test(bare) || bare.endsWith('.localhost');
}

/** The warning printed when a server binds an address other machines can reach. */
export function exposedHostWarning(command: string, host: string): string {
  return (
    `adk-state ${command}: warning: --host ${host} is not a loopback address. ADK's server checks no Host header ` +
    'and no Origin and has no authentication: anyone who can reach this address (and any web page their browser ' +
    'opens, through DNS rebinding) can read, write and delete every session. Bind 127.0.0.1, or put an ' +
    'authenticating proxy in front.'
  );
}

function port(value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0 || number > 65535) {
    throw new Error(`--port must be a whole number from 0 to 65535, got "${value}"`);
  }
  return number;
}

/** Builds the `adk-state` program; `run(argv)` parses and acts. */
export function createProgram(io: ProgramIo = {}): Command {
  const env = io.env ?? process.env;
  // Every line this program prints goes through one redaction: the URIs of the command line and of DATABASE_URL.
  const redactor = io.redactor ?? new Redactor();
  redactor.add(env.DATABASE_URL);
  const rawError = io.error ?? ((message: string) => process.stderr.write(`${message}\n`));
  const rawPrint = io.print ?? ((text: string) => process.stdout.write(`${text}\n`));
  const rawWrite = io.write ?? ((text: string) => process.stdout.write(text));
  const error = (message: string) => rawError(redactor.redact(message));
  const print = (text: string) => rawPrint(redactor.redact(text));
  const write = (text: string) => rawWrite(redactor.redact(text));
  const exit = io.exit ?? ((code: number) => process.exit(code));
  const cwd = io.cwd ?? process.cwd();
  const onStarted = io.onStarted ?? stopOnSignal(error, exit);
  const program = new Command('adk-state')
    .description("ADK's web UI and API server on adk-state session stores")
    .version(io.version ?? '0.0.0', '--version', 'Print the version')
    .showHelpAfterError()
    .configureOutput({
      writeOut: (text) =>
        io.print ? rawPrint(redactor.redact(text.replace(/\n$/, ''))) : process.stdout.write(redactor.redact(text)),
      writeErr: (text) =>
        io.error ? rawError(redactor.redact(text.replace(/\n$/, ''))) : process.stderr.write(redactor.redact(text)),
    });
  for (const method of ['parse', 'parseAsync'] as const) {
    const original = program[method].bind(program) as (argv?: readonly string[], options?: object) => unknown;
    (program as unknown as Record<string, unknown>)[method] = (argv?: readonly string[], options?: object) => {
      for (const arg of argv ?? process.argv) {
        const uri = /^(?:--?[\w-]+=)?([a-z][a-z0-9+.-]*:\/\/.*)$/is.exec(arg)?.[1];
        if (uri !== undefined) redactor.add(uri);
      }
      return original(argv, options);
    };
  }

  for (const [name, webUi, description] of [
    ['web', true, "Start ADK's web server: the dev UI and the API"],
    ['api_server', false, "Start ADK's API server"],
  ] as const) {
    program
      .command(name)
      .description(description)
      .addArgument(
        new Argument(
          '[agents_dir]',
          'An agent file, or a directory of agents (<dir>/<name>/agent.js or <dir>/<name>.js, .ts too)',
        ).default(cwd),
      )
      .addOption(new Option('-h, --host <string>', 'Host to bind').default('localhost'))
      .addOption(new Option('-p, --port <number>', 'Port to bind').default('8000'))
      .addOption(new Option('--allow_origins <string>', 'Allowed CORS origins, comma separated').default(''))
      .addOption(new Option('-v, --verbose', 'Log at debug level (same as --log_level debug)').default(false))
      .addOption(new Option('--log_level <string>', 'debug, info, warn or error').default('info'))
      .addOption(
        new Option(
          '--session_service_uri <string>',
          'Where sessions live: memory://, redis://host:port, redis+cluster://h1:p1,h2:p2, mongodb://…, ' +
            'firestore://<project>[/<database>]?root=<collection>, or any URI @google/adk accepts (sqlite://, postgresql://, …). ' +
            `Default: $DATABASE_URL, else memory://${env.DATABASE_URL ? ` (now $DATABASE_URL is ${redactUri(env.DATABASE_URL)})` : ''}`,
        ),
      )
      .addOption(
        new Option('--artifact_service_uri <string>', 'An artifact service URI @google/adk accepts (gs://<bucket>)'),
      )
      .addOption(new Option('--otel_to_cloud [boolean]', 'Send OpenTelemetry traces to Google Cloud').default(false))
      .addOption(new Option('--compile [boolean]', 'Compile agent files with esbuild before loading').default(true))
      .addOption(new Option('--bundle [boolean]', 'Bundle agent files with esbuild before loading').default(true))
      .addOption(new Option('--file_type <string>', 'Module type of agent files').choices(['esm', 'cjs']))
      .addOption(new Option('--a2a [boolean]', 'Serve the A2A surface').default(false))
      .addOption(new Option('--a2a_auth_token <string>', 'Bearer token for the A2A surface (or $ADK_A2A_AUTH_TOKEN)'))
      .addOption(new Option('--reload_agents [boolean]', 'Reload agent files when they change').default(false))
      .addOption(
        new Option(
          '--check_timeout <seconds>',
          'How long the start-up check of the session store may take; the server does not start on a store that fails it',
        ).default(String(DEFAULT_CHECK_TIMEOUT_MS / 1000)),
      )
      .action(async (agentsDir: string, flags: ServeFlags) => {
        try {
          const sessionServiceUri = flags.session_service_uri || env.DATABASE_URL || 'memory://';
          if (!isLoopback(flags.host)) error(exposedHostWarning(name, flags.host));
          const level = flags.verbose ? 'debug' : flags.log_level.toLowerCase();
          if (!LOG_LEVELS.includes(level as LogLevelName)) {
            throw new Error(`--log_level must be one of ${LOG_LEVELS.join(', ')}, got "${flags.log_level}"`);
          }
          const server = await startServer({
            agentsDir: resolve(cwd, agentsDir),
            webUi,
            host: flags.host,
            port: port(flags.port),
            sessionServiceUri,
            checkTimeoutMs: seconds(flags.check_timeout, '--check_timeout'),
            logLevel: level as LogLevelName,
            compile: flag(flags.compile),
            bundle: flag(flags.bundle),
            reloadAgents: flag(flags.reload_agents),
            a2a: flag(flags.a2a),
            otelToCloud: flag(flags.otel_to_cloud),
            ...(flags.allow_origins ? { allowOrigins: flags.allow_origins } : {}),
            ...(flags.artifact_service_uri ? { artifactServiceUri: flags.artifact_service_uri } : {}),
            ...(flags.file_type ? { fileType: flags.file_type } : {}),
            ...(flags.a2a_auth_token ? { a2aAuthToken: flags.a2a_auth_token } : {}),
          });
          const origin = flags.session_service_uri
            ? ''
            : env.DATABASE_URL
              ? ' (from $DATABASE_URL)'
              : ' (the default: sessions last only as long as this process)';
          print(`adk-state ${name}: ${server.url} with sessions in ${redactUri(sessionServiceUri)}${origin}`);
          onStarted(server);
        } catch (failure) {
          error(`adk-state ${name}: ${failure instanceof Error ? failure.message : String(failure)}`);
          exit(1);
        }
      });
  }
  program
    .command('inspect')
    .description("A store's sessions as a table, or one session's state by scope and its timeline")
    .argument('<uri>', 'The session service URI (as for --session_service_uri)')
    .requiredOption('--app <name>', 'The app')
    .option('--user <id>', 'One user (every user when absent)')
    .option('--session <id>', "One session's timeline (needs --user)")
    .option('--json', 'Print JSON instead of text')
    .option('--web', 'Serve the timeline page instead of printing')
    .option('--host <host>', 'Host of the page (--web)', '127.0.0.1')
    .option('--port <number>', 'Port of the page (--web); 0 picks a free one', '0')
    .option(
      '--check-timeout <seconds>',
      'How long the start-up check of the store may take',
      String(DEFAULT_CHECK_TIMEOUT_MS / 1000),
    )
    .action(async (uri: string, flags: InspectFlags) => {
      let service: Awaited<ReturnType<typeof sessionServiceFromUri>> | undefined;
      try {
        const timeoutMs = seconds(flags.checkTimeout, '--check-timeout');
        service = await sessionServiceFromUri(uri);
        const opened = service;
        await checkStore(uri, opened, { timeoutMs });
        if (flags.web) {
          if (!isLoopback(flags.host)) error(exposedHostWarning('inspect', flags.host));
          const inspector = await serveInspector(opened, {
            host: flags.host,
            port: port(flags.port),
            appName: flags.app,
            redact: (text) => redactor.redact(text),
          });
          print(`adk-state inspect: serving ${inspector.url} with sessions in ${redactUri(uri)}`);
          onStarted({
            url: inspector.url,
            sessionService: opened,
            stop: async () => {
              await inspector.close();
              await opened.close?.();
            },
          });
          return;
        }
        const query = {
          appName: flags.app,
          ...(flags.user === undefined ? {} : { userId: flags.user }),
          ...(flags.session === undefined ? {} : { sessionId: flags.session }),
        };
        print(await inspectText(opened, query, flags.json === true));
        await closeWithin(opened);
      } catch (failure) {
        await closeWithin(service);
        error(`adk-state inspect: ${failure instanceof Error ? failure.message : String(failure)}`);
        exit(EXIT_CODES.error);
      }
    });
  program
    .command('migrate')
    .description(
      'Copy sessions from one store to another: state, events and times exactly. Safe to re-run: state the target ' +
        'wrote later is never replaced by older state, and a second run finds nothing to change.',
    )
    .requiredOption(
      '--from <uri>',
      'The source store (any --session_service_uri, sqlite:// and postgresql:// included)',
    )
    .requiredOption('--to <uri>', 'The target: an adk-state store')
    .option('--app <name>', 'The app to copy (default: every app of the source)')
    .option('--user <id>', "Only this user's sessions")
    .option('--dry-run', 'Report what would be copied; write nothing')
    .option('--verify', 'Compare every copied session field by field afterwards')
    .addOption(
      new Option(
        '--on-conflict <policy>',
        'Who wins where the target holds other values: newer (the side that wrote last), target, or source',
      )
        .choices(['newer', 'target', 'source'])
        .default('newer'),
    )
    .option('--overwrite', 'The source wins every conflict (same as --on-conflict source)')
    .option('--max-failures <n>', 'Stop after this many sessions in a row failed', '5')
    .option('--timeout <seconds>', 'Deadline of each call to an adk-state store (default 30)')
    .option(
      '--check-timeout <seconds>',
      'How long the start-up check of each store may take',
      String(DEFAULT_CHECK_TIMEOUT_MS / 1000),
    )
    .action(async (flags: MigrateFlags) => {
      const tty = io.tty ?? process.stdout.isTTY === true;
      const columns = io.columns ?? process.stdout.columns ?? 80;
      const controller = new AbortController();
      const interrupt = () => {
        if (controller.signal.aborted) {
          error('adk-state migrate: stopped at once; run the same command again to resume');
          exit(EXIT_CODES.interrupted);
          return;
        }
        controller.abort();
        error('adk-state migrate: stopping after the current session (press Ctrl-C again to stop at once)');
      };
      process.on('SIGINT', interrupt);
      process.on('SIGTERM', interrupt);
      const display = progressDisplay(tty, columns, print, write);
      try {
        const maxFailures = Number(flags.maxFailures);
        if (!Number.isInteger(maxFailures) || maxFailures < 1) {
          throw new Error(`--max-failures must be a whole number from 1, got "${flags.maxFailures}"`);
        }
        const report = await migrate({
          from: flags.from,
          to: flags.to,
          ...(flags.app === undefined ? {} : { appName: flags.app }),
          ...(flags.user === undefined ? {} : { userId: flags.user }),
          dryRun: flags.dryRun === true,
          verify: flags.verify === true,
          onConflict: flags.overwrite === true ? 'source' : flags.onConflict,
          maxFailures,
          ...(flags.timeout === undefined ? {} : { timeoutMs: seconds(flags.timeout, '--timeout') }),
          checkTimeoutMs: seconds(flags.checkTimeout, '--check-timeout'),
          signal: controller.signal,
          onProgress: display.update,
        });
        display.end();
        print(formatReport(report));
        exit(exitCodeOf(report, flags, print, error));
      } catch (failure) {
        display.end();
        error(`adk-state migrate: ${failure instanceof Error ? failure.message : String(failure)}`);
        exit(EXIT_CODES.error);
      } finally {
        process.off('SIGINT', interrupt);
        process.off('SIGTERM', interrupt);
      }
    });
  return program;
}

interface MigrateFlags {
  from: string;
  to: string;
  app?: string;
  user?: string;
  dryRun?: boolean;
  verify?: boolean;
  onConflict: ConflictPolicy;
  overwrite?: boolean;
  maxFailures: string;
  timeout?: string;
  checkTimeout: string;
}

/** The same command again, as the line that says how to resume (URIs redacted by the printer). */
function resumeCommand(flags: MigrateFlags): string {
  const quote = (text: string) => (/^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`);
  const parts = ['adk-state migrate', '--from', quote(flags.from), '--to', quote(flags.to)];
  if (flags.app !== undefined) parts.push('--app', quote(flags.app));
  if (flags.user !== undefined) parts.push('--user', quote(flags.user));
  if (flags.overwrite) parts.push('--overwrite');
  else if (flags.onConflict !== 'newer') parts.push('--on-conflict', flags.onConflict);
  return parts.join(' ');
}

/** The exit code of a run, after the lines that explain it. */
function exitCodeOf(
  report: MigrateReport,
  flags: MigrateFlags,
  print: (text: string) => void,
  error: (text: string) => void,
): number {
  const resume = `to resume, run the same command again (${resumeCommand(flags)}): what was copied is found unchanged and skipped`;
  if (report.stopped) {
    if (report.stopped.reason === 'interrupted') {
      error(`adk-state migrate: interrupted after ${report.processed} of ${report.sessions} sessions; ${resume}`);
      return EXIT_CODES.interrupted;
    }
    const why = report.stopped.reason === 'store' ? 'stopped at a failure of the store' : 'stopped';
    error(`adk-state migrate: ${why}: ${report.stopped.message}`);
    error(`adk-state migrate: ${report.processed} of ${report.sessions} sessions done; ${resume}`);
    return EXIT_CODES.error;
  }
  if (!migrationSucceeded(report)) return EXIT_CODES.error;
  if (report.sessions === 0) {
    const where =
      report.apps.length === 0
        ? 'the source holds no app'
        : `no sessions of ${report.apps.length === 1 ? `app ${report.apps[0]}` : `apps ${report.apps.join(', ')}`}${flags.user === undefined ? '' : ` and user ${flags.user}`}`;
    error(`adk-state migrate: nothing found: ${where} in ${redactUri(flags.from)}`);
    return EXIT_CODES.nothingFound;
  }
  if (conflictsLeft(report) > 0) {
    print(
      `${conflictsLeft(report)} conflicts left alone: the target wrote them last (--overwrite, or --on-conflict source, gives them the source's values)`,
    );
    return EXIT_CODES.conflicts;
  }
  return EXIT_CODES.ok;
}

/**
 * On a terminal, one line redrawn in place that never wraps (cut to the
 * terminal's width); otherwise one plain line per tenth of the run.
 */
function progressDisplay(
  tty: boolean,
  columns: number,
  print: (text: string) => void,
  write: (text: string) => void,
): { update: (progress: MigrateProgress) => void; end: () => void } {
  let lastTenth = -1;
  let live = false;
  const update = (progress: MigrateProgress) => {
    const elapsed = Math.max((Date.now() - progress.startedAt) / 1000, 0.001);
    const rate = progress.done / elapsed;
    const left = rate > 0 ? Math.round((progress.total - progress.done) / rate) : 0;
    const line = `${progress.done}/${progress.total} sessions, ${progress.events} events, ${rate.toFixed(1)}/s, ETA ${left} s, app ${progress.appName}`;
    if (tty) {
      const width = Math.max(columns - 1, 1);
      const barWidth = Math.min(24, width - line.length - 3);
      let text = line;
      if (barWidth >= 8) {
        const filled = progress.total === 0 ? barWidth : Math.round((progress.done / progress.total) * barWidth);
        text = `[${'#'.repeat(filled)}${'.'.repeat(barWidth - filled)}] ${line}`;
      }
      // Cut by code points, so no surrogate pair is split: the line never reaches the last column.
      text = Array.from(text).slice(0, width).join('');
      write(`\r${text}\u001b[K`);
      live = true;
      return;
    }
    const tenth = progress.total === 0 ? 10 : Math.floor((progress.done / progress.total) * 10);
    if (tenth !== lastTenth) {
      lastTenth = tenth;
      print(`migrate: sessions ${line}`);
    }
  };
  return {
    update,
    end() {
      if (live) write('\n');
      live = false;
    },
  };
}

function formatReport(report: MigrateReport): string {
  const { decisions } = report;
  const scopeWrites = report.scopes.reduce((sum, scope) => sum + scope.written.length, 0);
  const lines = [
    `${report.dryRun ? 'dry run: would copy' : 'copied'} ${decisions.copy} new and ${decisions.update} updated sessions ` +
      `(${report.events} events); ${decisions.unchanged} unchanged; ${decisions.conflict} conflicts left alone; ` +
      `${report.failed.length} failed; of ${report.sessions} sessions` +
      (report.apps.length > 1 ? ` in ${report.apps.length} apps` : ''),
    `${report.dryRun ? 'would write' : 'wrote'} ${scopeWrites} user:/app: keys; ${changesOf(report)} changes in all`,
  ];
  for (const conflict of report.conflicts) {
    lines.push(`  conflict: ${conflict} has writes of its own in the target, which wrote it last (left alone)`);
  }
  for (const scope of report.scopes) {
    if (scope.written.length > 0) lines.push(`  ${scope.appName} ${scope.scope}: wrote ${scope.written.join(', ')}`);
    if (scope.keptInTarget.length > 0) {
      lines.push(
        `  conflict: ${scope.appName} ${scope.scope}: kept the target's ${scope.keptInTarget.join(', ')} (the target wrote them last)`,
      );
    }
  }
  for (const failure of report.failed) lines.push(`  failed: ${failure.session}: ${failure.error}`);
  if (report.verified) lines.push(`verify: ${report.differences.length} differences`);
  if (report.differences.length > 0) {
    for (const difference of report.differences.slice(0, 50)) {
      lines.push(
        `  ${difference.session} ${difference.field}: source ${JSON.stringify(difference.source)}, target ${JSON.stringify(difference.target)}`,
      );
    }
  }
  return lines.join('\n');
}

interface InspectFlags {
  app: string;
  user?: string;
  session?: string;
  json?: boolean;
  web?: boolean;
  host: string;
  port: string;
  checkTimeout: string;
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
          error(
            `adk-state: stopping after ${signal} failed: ${failure instanceof Error ? failure.message : String(failure)}`,
          );
          exit(1);
        },
      );
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  };
}
