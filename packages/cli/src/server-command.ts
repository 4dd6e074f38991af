/**
 * `adk-state web` and `adk-state api_server`: the flags of ADK's own `adk`
 * command, and {@link startServer} on the store `--session_service_uri` names.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { Argument, type Command, Option } from 'commander';
import { DEFAULT_CHECK_TIMEOUT_MS } from './check.js';
import { type CommandContext, exposedHostWarning, flag, isLoopback, messageOf, port, seconds } from './command.js';
import { redactUri } from './redact.js';
import { type LogLevelName, startServer } from './server.js';

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

/** Adds `web` (`webUi`: the dev UI and the API) or `api_server` (the API only) to `program`. */
export function addServeCommand(
  program: Command,
  context: CommandContext,
  name: 'web' | 'api_server',
  webUi: boolean,
  description: string,
): void {
  const { env, cwd, print, error, exit, onStarted } = context;
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
        const agents = resolve(cwd, agentsDir);
        // A mistyped path would start a server that serves no agent, and say nothing of it.
        if (!existsSync(agents)) throw new Error(`agents_dir ${agents} does not exist`);
        const server = await startServer({
          agentsDir: agents,
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
        error(`adk-state ${name}: ${messageOf(failure)}`);
        exit(1);
      }
    });
}
