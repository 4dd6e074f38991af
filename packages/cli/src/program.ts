/**
 * The `adk-state` command: `web` and `api_server` with the flags of ADK's own
 * `adk` command, so swapping `adk` for `adk-state` changes nothing but the
 * stores that `--session_service_uri` can name.
 */
import { resolve } from 'node:path';
import { Argument, Command, Option } from 'commander';
import { inspectText, serveInspector } from './inspect.js';
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
  return program;
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
