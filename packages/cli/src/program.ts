/**
 * The `adk-state` command: `web` and `api_server` with the flags of ADK's own
 * `adk` command, so swapping `adk` for `adk-state` changes nothing but the
 * stores that `--session_service_uri` can name; `inspect` and `migrate`. Each
 * command is built beside its feature (`server-command.ts`,
 * `inspect-command.ts`, `migrate-command.ts`) from one {@link CommandContext}.
 */
import { Command } from 'commander';
import { commandContext, type ProgramIo } from './command.js';
import { addInspectCommand } from './inspect-command.js';
import { addMigrateCommand } from './migrate-command.js';
import { Redactor } from './redact.js';
import { addServeCommand } from './server-command.js';

export { EXIT_CODES, type ProgramIo } from './command.js';

/** Builds the `adk-state` program; `run(argv)` parses and acts. */
export function createProgram(io: ProgramIo = {}): Command {
  // Every line this program prints goes through one redaction: the URIs of the command line and of DATABASE_URL.
  const redactor = io.redactor ?? new Redactor();
  const context = commandContext(io, redactor);
  redactor.add(context.env.DATABASE_URL);
  const program = new Command('adk-state')
    .description("ADK's web UI and API server on adk-state session stores")
    .version(io.version ?? '0.0.0', '--version', 'Print the version')
    .showHelpAfterError()
    .configureOutput({
      writeOut: (text) => (io.print ? context.print(text.replace(/\n$/, '')) : context.write(text)),
      writeErr: (text) =>
        io.error ? context.error(text.replace(/\n$/, '')) : process.stderr.write(redactor.redact(text)),
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

  addServeCommand(program, context, 'web', true, "Start ADK's web server: the dev UI and the API");
  addServeCommand(program, context, 'api_server', false, "Start ADK's API server");
  addInspectCommand(program, context);
  addMigrateCommand(program, context);
  return program;
}
