/**
 * Request rules: what a session key and a read configuration must look like.
 */
import type { GetSessionConfig } from '@google/adk';
import { InvalidArgumentError } from './errors.js';
import type { EventFilter } from './events.js';

/** The identity of one stored session. */
export interface SessionKey {
  appName: string;
  userId: string;
  sessionId: string;
}

export function assertNonEmptyString(name: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value === '') {
    throw new InvalidArgumentError(name, `must be a non-empty string, got ${describe(value)}`);
  }
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** True when every part of the key could exist (non-empty strings). */
export function isPossibleKey(key: Partial<SessionKey>): key is SessionKey {
  return isNonEmpty(key.appName) && isNonEmpty(key.userId) && isNonEmpty(key.sessionId);
}

function isNonEmpty(value: unknown): value is string {
  return typeof value === 'string' && value !== '';
}

/** Validates a getSession config and turns it into a store event filter. */
export function toEventFilter(config: GetSessionConfig | undefined): EventFilter {
  if (config === undefined || config === null) return {};
  const filter: EventFilter = {};
  const { afterTimestamp, numRecentEvents } = config;
  if (afterTimestamp !== undefined) {
    if (typeof afterTimestamp !== 'number' || Number.isNaN(afterTimestamp)) {
      throw new InvalidArgumentError(
        'config.afterTimestamp',
        `must be a number of milliseconds, got ${describe(afterTimestamp)}`,
      );
    }
    // Infinite bounds are settled here, so a store only ever sees a finite one:
    // nothing is <= -Infinity (no bound), everything is <= +Infinity (no event).
    if (afterTimestamp === Number.POSITIVE_INFINITY) filter.limit = 0;
    else if (afterTimestamp !== Number.NEGATIVE_INFINITY) filter.afterTimestamp = afterTimestamp;
  }
  if (numRecentEvents !== undefined) {
    if (typeof numRecentEvents !== 'number' || !Number.isInteger(numRecentEvents) || numRecentEvents < 0) {
      throw new InvalidArgumentError(
        'config.numRecentEvents',
        `must be a whole number greater than or equal to 0, got ${describe(numRecentEvents)}`,
      );
    }
    filter.limit = Math.min(numRecentEvents, filter.limit ?? numRecentEvents);
  }
  return filter;
}
