/**
 * ADK's API server (and, for `web`, its dev UI) from `@google/adk-devtools`,
 * on a session service named by a URI. Stopping the server closes the service.
 */
import { checkStore, closeWithin } from './check.js';
import { loadOptional } from './packages.js';
import { sessionServiceFromUri, type UriServiceOptions, type UriSessionService } from './uri.js';

/** Options of {@link startServer}, named after ADK's own `adk web` / `adk api_server` flags. */
export interface ServerOptions {
  /** An agent file, or a directory of `<name>/agent.{js,ts}` or `<name>.{js,ts}` files. */
  agentsDir: string;
  /** Serve ADK's dev UI at `/dev-ui` (`adk-state web`), or the API only (`adk-state api_server`). */
  webUi: boolean;
  /** Default `localhost`. */
  host?: string;
  /** Default 8000; 0 picks a free port. */
  port?: number;
  /** Where sessions live (see `sessionServiceFromUri`). Default `memory://`. */
  sessionServiceUri?: string;
  /** Options for an adk-state store made from `sessionServiceUri` (`timeoutMs`, `onStale`, …). */
  serviceOptions?: UriServiceOptions;
  /** Passed to `@google/adk`'s `getArtifactServiceFromUri`. Default `memory://`. */
  artifactServiceUri?: string;
  /** Comma-separated CORS origins. */
  allowOrigins?: string;
  /** `debug`, `info`, `warn` or `error`. Default `info`. */
  logLevel?: LogLevelName;
  /** Compile (`compile`) and bundle (`bundle`) TypeScript or JavaScript agent files with esbuild first. Both default true, as in ADK. */
  compile?: boolean;
  bundle?: boolean;
  /** The module type of agent files (`esm` or `cjs`), when it cannot be told from the file. */
  fileType?: 'esm' | 'cjs';
  /** Reload agent files when they change. */
  reloadAgents?: boolean;
  /** Serve the A2A surface, with this bearer token when given. */
  a2a?: boolean;
  a2aAuthToken?: string;
  /** Send OpenTelemetry traces to Google Cloud. */
  otelToCloud?: boolean;
  /**
   * How long the start-up check of the store may take (one read, and for
   * Redis a probe of the database), in milliseconds. Default 10 000. The
   * server does not start on a store that fails it.
   */
  checkTimeoutMs?: number;
}

export type LogLevelName = 'debug' | 'info' | 'warn' | 'error';

/** A running server from {@link startServer}. */
export interface RunningServer {
  /** `http://<host>:<port>` with the port actually bound. */
  readonly url: string;
  /** The session service the server uses. */
  readonly sessionService: UriSessionService;
  /** Stops accepting requests, then closes the session service. Safe to call twice. */
  stop(): Promise<void>;
}

/** Starts ADK's API server (and dev UI when `webUi`) on the store that `sessionServiceUri` names. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const devtools = await loadOptional('@google/adk-devtools', 'adk-state web and adk-state api_server');
  const adk = await import('@google/adk');
  const logLevel = adk.LogLevel[(options.logLevel ?? 'info').toUpperCase() as Uppercase<LogLevelName>];
  adk.setLogLevel(logLevel);
  const uri = options.sessionServiceUri ?? 'memory://';
  const sessionService = await sessionServiceFromUri(uri, options.serviceOptions);
  try {
    await checkStore(uri, sessionService, {
      ...(options.checkTimeoutMs === undefined ? {} : { timeoutMs: options.checkTimeoutMs }),
    });
  } catch (error) {
    await closeWithin(sessionService);
    throw error;
  }
  const server = new devtools.AdkApiServer({
    agentsDir: options.agentsDir,
    host: options.host ?? 'localhost',
    port: options.port ?? 8000,
    serveDebugUI: options.webUi,
    sessionService,
    artifactService: adk.getArtifactServiceFromUri(options.artifactServiceUri ?? 'memory://'),
    logLevel,
    agentFileLoadOptions: {
      compile: options.compile ?? true,
      bundle: options.bundle ?? true,
      ...(options.fileType === undefined ? {} : { moduleType: options.fileType as never }),
    },
    reloadAgents: options.reloadAgents ?? false,
    a2a: options.a2a ?? false,
    otelToCloud: options.otelToCloud ?? false,
    ...(options.allowOrigins ? { allowOrigins: options.allowOrigins } : {}),
    ...(options.a2aAuthToken === undefined ? {} : { a2aAuthToken: options.a2aAuthToken }),
  });
  try {
    await server.start();
  } catch (error) {
    await sessionService.close?.();
    throw error;
  }
  const address = (server as unknown as { server?: { address(): unknown } }).server?.address();
  const port = typeof address === 'object' && address !== null ? (address as { port: number }).port : options.port;
  const host = options.host ?? 'localhost';
  let stopping: Promise<void> | undefined;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    sessionService,
    stop() {
      stopping ??= (async () => {
        try {
          await server.stop();
        } finally {
          await sessionService.close?.();
        }
      })();
      return stopping;
    },
  };
}
