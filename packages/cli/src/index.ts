/**
 * @adk-state/cli: ADK's web UI and API server on any adk-state store (the
 * `adk-state` command), and `sessionServiceFromUri` for programs.
 *
 * @packageDocumentation
 */

export { checkStore, DEFAULT_CHECK_TIMEOUT_MS, StoreCheckError, type StoreProblem } from './check.js';
export { type Inspector, type InspectQuery, inspectText, serveInspector } from './inspect.js';
export {
  type ConflictPolicy,
  changesOf,
  compareCopies,
  conflictsLeft,
  copyAll,
  type Difference,
  decide,
  lastWriteOf,
  listApps,
  type MigrateOptions,
  type MigrateProgress,
  type MigrateReport,
  migrate,
  migrationSucceeded,
  type ScopeOutcome,
  type SessionDecision,
  type Stop,
} from './migrate.js';
export { MissingPackageError } from './packages.js';
export { createProgram, EXIT_CODES, type ProgramIo } from './program.js';
export { Redactor } from './redact.js';
export { type LogLevelName, type RunningServer, type ServerOptions, startServer } from './server.js';
export {
  buildTimeline,
  formatTimeline,
  type KeyChange,
  type Timeline,
  type TimelineEntry,
} from './timeline.js';
export {
  ADK_STATE_SCHEMES,
  clusterNodes,
  firestoreLocation,
  redactUri,
  sessionServiceFromUri,
  type UriServiceOptions,
  type UriSessionService,
} from './uri.js';
