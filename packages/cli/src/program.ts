/**
 * The `adk-state` command: `web` and `api_server` with the flags of ADK's own
 * `adk` command, so swapping `adk` for `adk-state` changes nothing but the
 * stores that `--session_service_uri` can name.
 */
import { resolve } from 'node:path';
import { Argument, Command, Option } from 'commander';
import { inspectText, serveInspector } from './inspect.js';
import { type MigrateProgress, type MigrateReport, migrate, migrationSucceeded } from './migrate.js';
import { type LogLevelName, type RunningServer, startServer } from './server.js';
import { sessionServiceFromUri } from './uri.js';

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
}

const LOG_LEVELS: readonly LogLevelName[] = ['debug', 'info', 'warn', 'error'];

function flag(value: boolean | string): boolean {
  return value === true || value === 'true' || value === '1';
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
  const error = io.error ?? ((message: string) => process.stderr.write(`${message}\n`));
  const exit = io.exit ?? ((code: number) => process.exit(code));
  const env = io.env ?? process.env;
  const cwd = io.cwd ?? process.cwd();
  const onStarted = io.onStarted ?? stopOnSignal(error, exit);
  const print = io.print ?? ((text: string) => process.stdout.write(`${text}\n`));
  const program = new Command('adk-state')
    .description("ADK's web UI and API server on adk-state session stores")
    .version(io.version ?? '0.0.0', '--version', 'Print the version')
    .showHelpAfterError();

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
            'Default: $DATABASE_URL, else memory://',
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
      .action(async (agentsDir: string, flags: ServeFlags) => {
        try {
          const level = flags.verbose ? 'debug' : flags.log_level.toLowerCase();
          if (!LOG_LEVELS.includes(level as LogLevelName)) {
            throw new Error(`--log_level must be one of ${LOG_LEVELS.join(', ')}, got "${flags.log_level}"`);
          }
          const server = await startServer({
            agentsDir: resolve(cwd, agentsDir),
            webUi,
            host: flags.host,
            port: port(flags.port),
            sessionServiceUri: flags.session_service_uri || env.DATABASE_URL || 'memory://',
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
    .action(async (uri: string, flags: InspectFlags) => {
      let service: Awaited<ReturnType<typeof sessionServiceFromUri>> | undefined;
      try {
        service = await sessionServiceFromUri(uri);
        const opened = service;
        if (flags.web) {
          const inspector = await serveInspector(opened, {
            host: flags.host,
            port: port(flags.port),
            appName: flags.app,
          });
          print(`adk-state inspect: serving ${inspector.url}`);
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
        await opened.close?.();
      } catch (failure) {
        await service?.close?.().catch(() => {});
        error(`adk-state inspect: ${failure instanceof Error ? failure.message : String(failure)}`);
        exit(1);
      }
    });
  program
    .command('migrate')
    .description("Copy an app's sessions from one store to another: state, events and times exactly; safe to re-run")
    .requiredOption(
      '--from <uri>',
      'The source store (any --session_service_uri, sqlite:// and postgresql:// included)',
    )
    .requiredOption('--to <uri>', 'The target: an adk-state store')
    .requiredOption('--app <name>', 'The app to copy')
    .option('--user <id>', "Only this user's sessions")
    .option('--dry-run', 'Report what would be copied; write nothing')
    .option('--verify', 'Compare every copied session field by field afterwards')
    .option('--overwrite', 'Replace target sessions that are newer than, or differ from, the source')
    .action(async (flags: MigrateFlags) => {
      const tty = io.tty ?? process.stdout.isTTY === true;
      try {
        const report = await migrate({
          from: flags.from,
          to: flags.to,
          appName: flags.app,
          ...(flags.user === undefined ? {} : { userId: flags.user }),
          dryRun: flags.dryRun === true,
          verify: flags.verify === true,
          overwrite: flags.overwrite === true,
          onProgress: progressPrinter(tty, print),
        });
        print(formatReport(report));
        if (!migrationSucceeded(report)) exit(1);
      } catch (failure) {
        error(`adk-state migrate: ${failure instanceof Error ? failure.message : String(failure)}`);
        exit(1);
      }
    });
  return program;
}

interface MigrateFlags {
  from: string;
  to: string;
  app: string;
  user?: string;
  dryRun?: boolean;
  verify?: boolean;
  overwrite?: boolean;
}

/** A live bar on a terminal; otherwise one plain line per tenth of the run (and at its end). */
function progressPrinter(tty: boolean, print: (text: string) => void): (progress: MigrateProgress) => void {
  let lastTenth = -1;
  return (progress) => {
    const seconds = Math.max((Date.now() - progress.startedAt) / 1000, 0.001);
    const rate = progress.done / seconds;
    const left = rate > 0 ? Math.round((progress.total - progress.done) / rate) : 0;
    const line = `sessions ${progress.done}/${progress.total}, events ${progress.events}, ${rate.toFixed(1)} sessions/s, ETA ${left} s`;
    if (tty) {
      const width = 24;
      const filled = progress.total === 0 ? width : Math.round((progress.done / progress.total) * width);
      process.stdout.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${line}   `);
      if (progress.done === progress.total) process.stdout.write('\n');
      return;
    }
    const tenth = progress.total === 0 ? 10 : Math.floor((progress.done / progress.total) * 10);
    if (tenth !== lastTenth) {
      lastTenth = tenth;
      print(`migrate: ${line}`);
    }
  };
}

function formatReport(report: MigrateReport): string {
  const { decisions } = report;
  const lines = [
    `${report.dryRun ? 'dry run: would copy' : 'copied'} ${decisions.copy} new and ${decisions.update} updated sessions ` +
      `(${report.events} events); ${decisions.unchanged} unchanged; ${decisions.conflict} conflicts left alone; ` +
      `${report.failed.length} failed; of ${report.sessions} sessions`,
  ];
  for (const conflict of report.conflicts) {
    lines.push(`  conflict: ${conflict} is newer or different in the target (--overwrite replaces it)`);
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
