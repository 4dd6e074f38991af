/**
 * `adk-state inspect <uri>`: {@link inspectText} printed, or
 * {@link serveInspector} serving its page, on a store that passed its start-up check.
 */
import type { Command } from 'commander';
import { checkStore, closeWithin, DEFAULT_CHECK_TIMEOUT_MS } from './check.js';
import {
  type CommandContext,
  EXIT_CODES,
  exposedInspectorWarning,
  isLoopback,
  messageOf,
  port,
  seconds,
} from './command.js';
import { inspectText, serveInspector } from './inspect.js';
import { openReadOnly } from './read-only-source.js';
import { redactUri } from './redact.js';
import { sessionServiceFromUri, type UriSessionService } from './uri.js';

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

/** Adds `inspect` to `program`. */
export function addInspectCommand(program: Command, context: CommandContext): void {
  const { redactor, print, error, exit, onStarted } = context;
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
      let service: UriSessionService | undefined;
      try {
        const timeoutMs = seconds(flags.checkTimeout, '--check-timeout');
        service =
          (await openReadOnly(uri, 'the store', 'inspect only reads, and creates or changes nothing', timeoutMs)) ??
          (await sessionServiceFromUri(uri));
        const opened = service;
        await checkStore(uri, opened, { timeoutMs });
        if (flags.web) {
          if (!isLoopback(flags.host)) error(exposedInspectorWarning(flags.host));
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
        error(`adk-state inspect: ${messageOf(failure)}`);
        exit(EXIT_CODES.error);
      }
    });
}
