/**
 * @adk-state/cli: ADK's web UI and API server on any adk-state store (the
 * `adk-state` command), and `sessionServiceFromUri` for programs.
 *
 * @packageDocumentation
 */

export { type Inspector, type InspectQuery, inspectText, serveInspector } from './inspect.js';
export {
  compareCopies,
  copyAll,
  type Difference,
  decide,
  type MigrateOptions,
  type MigrateProgress,
  type MigrateReport,
  migrate,
  migrationSucceeded,
  type SessionDecision,
} from './migrate.js';
export { MissingPackageError } from './packages.js';
export { createProgram, type ProgramIo } from './program.js';
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
