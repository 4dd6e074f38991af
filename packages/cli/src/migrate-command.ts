/**
 * `adk-state migrate --from <uri> --to <uri>`: {@link migrate} with a
 * progress display, its report, the line that says how to resume, and an
 * exit code that tells what happened. Every line goes through the program's
 * output ({@link CommandContext}), the live progress bar included.
 */
import { type Command, Option } from 'commander';
import { DEFAULT_CHECK_TIMEOUT_MS } from './check.js';
import { type CommandContext, EXIT_CODES, messageOf, seconds } from './command.js';
import {
  type ConflictPolicy,
  changesOf,
  conflictsLeft,
  keysUnwritten,
  type MigrateProgress,
  type MigrateReport,
  migrate,
  migrationSucceeded,
  type SessionDecision,
} from './migrate.js';
import { redactUri } from './redact.js';

/** Adds `migrate` to `program`. */
export function addMigrateCommand(program: Command, context: CommandContext): void {
  const { print, error, write, tty, columns, exit } = context;
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
    .action(async (flags: MigrateFlags, command: Command) => {
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
        print(formatReport(report, flags.overwrite === true ? 'source' : flags.onConflict));
        const given = (key: keyof MigrateFlags) => (command.getOptionValueSource(key) ?? 'default') !== 'default';
        exit(exitCodeOf(report, resumeCommand(flags, given), flags, print, error));
      } catch (failure) {
        display.end();
        error(`adk-state migrate: ${messageOf(failure)}`);
        exit(EXIT_CODES.error);
      } finally {
        process.off('SIGINT', interrupt);
        process.off('SIGTERM', interrupt);
      }
    });
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

/**
 * The same command again, as the line that says how to resume: every option
 * given that changes the run (`given` tells one given from a default), each
 * value quoted for a shell. The URIs are redacted before they are quoted: a
 * secret quoted (a `'` in a password) no longer reads as itself, and the
 * printer's redaction would miss it.
 */
function resumeCommand(flags: MigrateFlags, given: (key: keyof MigrateFlags) => boolean): string {
  const quote = (text: string) => (/^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`);
  const parts = ['adk-state migrate', '--from', quote(redactUri(flags.from)), '--to', quote(redactUri(flags.to))];
  if (flags.app !== undefined) parts.push('--app', quote(flags.app));
  if (flags.user !== undefined) parts.push('--user', quote(flags.user));
  if (flags.dryRun) parts.push('--dry-run');
  if (flags.verify) parts.push('--verify');
  if (flags.overwrite) parts.push('--overwrite');
  else if (given('onConflict')) parts.push('--on-conflict', quote(flags.onConflict));
  if (given('maxFailures')) parts.push('--max-failures', quote(flags.maxFailures));
  if (flags.timeout !== undefined) parts.push('--timeout', quote(flags.timeout));
  if (given('checkTimeout')) parts.push('--check-timeout', quote(flags.checkTimeout));
  return parts.join(' ');
}

/** The exit code of a run, after the lines that explain it. */
function exitCodeOf(
  report: MigrateReport,
  again: string,
  flags: MigrateFlags,
  print: (text: string) => void,
  error: (text: string) => void,
): number {
  const resume = report.dryRun
    ? `to resume, run the same command again (${again}): a dry run writes nothing, so it looks at every session again`
    : `to resume, run the same command again (${again}): what was copied is found unchanged and skipped`;
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
      `${conflictsLeft(report)} conflicts left alone: ${keptBecause(flags.onConflict)} (--overwrite, or --on-conflict source, gives them the source's values)`,
    );
    return EXIT_CODES.conflicts;
  }
  if (keysUnwritten(report) > 0) {
    error(
      `adk-state migrate: ${keysUnwritten(report)} user:/app: keys not written (see "not written" above); ${resume}`,
    );
    return EXIT_CODES.error;
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
      print(`migrate: ${line}`);
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

/** Why a run left conflicts to the target, under `policy`. */
function keptBecause(policy: ConflictPolicy): string {
  return policy === 'target'
    ? '--on-conflict target keeps them'
    : "the target wrote them last, or no earlier than the source (a tie, or the target's log extends the source's)";
}

function formatReport(report: MigrateReport, policy: ConflictPolicy): string {
  const kept = keptBecause(policy);
  const { decisions } = report;
  const scopeWrites = report.scopes.reduce((sum, scope) => sum + scope.written.length, 0);
  const lines = [
    `${report.dryRun ? 'dry run: would copy' : 'copied'} ${decisions.copy} new and ${decisions.update} updated sessions ` +
      `(${report.events} events); ${decisions.unchanged} unchanged; ${decisions.conflict} conflicts left alone; ` +
      `${report.failed.length} failed; of ${report.sessions} sessions` +
      (report.apps.length > 1 ? ` in ${report.apps.length} apps` : ''),
    `${report.dryRun ? 'would write' : 'wrote'} ${scopeWrites} user:/app: keys; ${changesOf(report)} changes in all`,
  ];
  // A session missing from the listing is named once: with its failure, with its conflict, or on a line of its own.
  const unlisted = new Set(report.unlisted);
  const failed = new Set(report.failed.map((failure) => failure.session));
  const found = (session: string) =>
    unlisted.has(session) ? " (unlisted: missing from the source's listing, found by a scan of its records)" : '';
  for (const session of report.unlisted) {
    const decision = report.unlistedDecisions[session];
    if (failed.has(session) || decision === 'conflict') continue;
    lines.push(
      `  unlisted: ${session} is missing from the source's listing (found by a scan of its records; ${unlistedOutcome(decision, report.dryRun)})`,
    );
  }
  for (const conflict of report.conflicts) {
    lines.push(`  conflict: ${conflict}${found(conflict)} has writes of its own in the target (left alone: ${kept})`);
  }
  for (const session of report.overwritten) {
    lines.push(
      `  overwritten: ${session}${found(session)} had writes of its own in the target, which the source's session ${report.dryRun ? 'would replace' : 'replaced'} (${policy === 'source' ? '--on-conflict source' : 'the source wrote last'})`,
    );
  }
  for (const scope of report.scopes) {
    if (scope.written.length > 0) {
      lines.push(
        `  ${scope.appName} ${scope.scope}: ${report.dryRun ? 'would write' : 'wrote'} ${scope.written.join(', ')}`,
      );
    }
    if (scope.keptInTarget.length > 0) {
      lines.push(
        `  conflict: ${scope.appName} ${scope.scope}: kept the target's ${scope.keptInTarget.join(', ')} (${kept})`,
      );
    }
    if (scope.unwritten.length > 0) {
      const why = report.stopped
        ? `the run stopped before a session ${report.dryRun ? 'would carry' : 'carried'} them; running it again writes them`
        : `no session of the ${scope.scope === 'app' ? 'app' : 'user'} ${report.dryRun ? 'would be' : 'was'} written to carry them; a run that writes one writes them`;
      lines.push(`  not written: ${scope.appName} ${scope.scope}: ${scope.unwritten.join(', ')} (${why})`);
    }
  }
  for (const failure of report.failed) {
    lines.push(`  failed: ${failure.session}${found(failure.session)}: ${failure.error}`);
  }
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

/** What became of a session missing from the source's listing that neither failed nor was left as a conflict. */
function unlistedOutcome(decision: SessionDecision | undefined, dryRun: boolean): string {
  if (decision === 'copy' || decision === 'update') {
    return dryRun ? 'would be copied with the rest' : 'copied with the rest';
  }
  if (decision === 'unchanged') return "the target's copy is the same: left alone";
  return 'not reached: the run stopped before it';
}
