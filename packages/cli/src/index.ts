/**
 * @adk-state/cli: ADK's web UI and API server on any adk-state store (the
 * `adk-state` command), and `sessionServiceFromUri` for programs. The
 * command's own parts (its program, the migration's decisions, the
 * inspector, the redaction of output) stay inside the package.
 *
 * @packageDocumentation
 */

export { checkStore, DEFAULT_CHECK_TIMEOUT_MS, StoreCheckError, type StoreProblem } from './check.js';
export type { Inspector, InspectQuery } from './inspect.js';
export {
  type ConflictPolicy,
  type Difference,
  type MigrateOptions,
  type MigrateProgress,
  type MigrateReport,
  migrate,
  type ScopeOutcome,
  type SessionDecision,
  type Stop,
} from './migrate.js';
export { MissingPackageError } from './packages.js';
export type { ProgramIo } from './program.js';
export type { Redactor } from './redact.js';
export { type LogLevelName, type RunningServer, type ServerOptions, startServer } from './server.js';
export type { KeyChange, Timeline, TimelineEntry } from './timeline.js';
export {
  ADK_STATE_SCHEMES,
  redactUri,
  sessionServiceFromUri,
  type UriServiceOptions,
  type UriSessionService,
} from './uri.js';
