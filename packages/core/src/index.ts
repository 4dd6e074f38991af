/**
 * @adk-state/core: the session-state contract of adk-state, its merge
 * semantics, and the `BaseSessionService` that turns any store into a
 * drop-in `sessionService` for the `@google/adk` Runner.
 */
export * from './errors.js';
export * from './events.js';
export * from './listing.js';
export * from './options.js';
export * from './requests.js';
export * from './scopes.js';
export * from './service.js';
export type * from './store.js';
export { type StoreUsage, type TelemetryOptions, TRACER_NAME } from './telemetry.js';
export * from './values.js';
