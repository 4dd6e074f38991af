/**
 * Option checks shared by the service and every adapter: a bad option is
 * refused when the service is made, with {@link InvalidArgumentError}, never
 * discovered later as a failing write.
 */
import { InvalidArgumentError } from './errors.js';

/** What a numeric option may be besides a positive number. */
export interface NumberLimits {
  /** The largest value the backend (or the timer behind it) can take. */
  max?: number;
  /** Only whole numbers. */
  integer?: boolean;
  /** `Infinity` is allowed and means "no limit". */
  allowInfinity?: boolean;
  /** Zero is allowed too. */
  allowZero?: boolean;
}

/** Throws {@link InvalidArgumentError} unless `value` is a number greater than 0 within `limits`. */
export function assertPositiveNumber(name: string, value: unknown, limits: NumberLimits = {}): asserts value is number {
  if (typeof value === 'number' && value === Number.POSITIVE_INFINITY && limits.allowInfinity) return;
  const least = limits.allowZero ? 'greater than or equal to 0' : 'greater than 0';
  const kind = limits.integer ? 'a whole number' : 'a finite number';
  const most = limits.max !== undefined ? ` and at most ${limits.max}` : '';
  const infinity = limits.allowInfinity ? ' (or Infinity for none)' : '';
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (limits.allowZero ? value >= 0 : value > 0) &&
    (!limits.integer || Number.isInteger(value)) &&
    (limits.max === undefined || value <= limits.max);
  if (!ok) throw new InvalidArgumentError(name, `must be ${kind} ${least}${most}${infinity}, got ${describe(value)}`);
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** What a session's time to live counts from: its last write (`idle`) or its creation (`create`). */
export type ExpiryClock = 'idle' | 'create';

/**
 * The two expiry options, as every adk-state store names them: the name says
 * the clock. A store declares the ones its backend can keep.
 */
export interface ExpiryOptions {
  expireAfterIdleSeconds?: number;
  expireAfterCreateSeconds?: number;
}

/** A time to live: its clock and its length. */
export interface Expiry {
  clock: ExpiryClock;
  seconds: number;
}

/** What {@link expiryOf} accepts. */
export interface ExpiryLimits {
  /** The longest time to live the backend keeps exactly, in seconds. */
  max: number;
  /** The clocks the backend can keep; default both. */
  clocks?: readonly ExpiryClock[];
  /** Why a clock is missing from `clocks`, for the error. */
  unsupported?: string;
}

const EXPIRY_OPTION: Record<ExpiryClock, keyof ExpiryOptions> = {
  idle: 'expireAfterIdleSeconds',
  create: 'expireAfterCreateSeconds',
};

/**
 * The time to live that `options` ask for, or undefined for none. Throws
 * {@link InvalidArgumentError} when both options are given, when one names a
 * clock the backend cannot keep, or when its value is not a positive number
 * of at most `limits.max` seconds.
 */
export function expiryOf(options: ExpiryOptions, limits: ExpiryLimits): Expiry | undefined {
  const { clocks = ['idle', 'create'] } = limits;
  const given = (Object.keys(EXPIRY_OPTION) as ExpiryClock[]).filter(
    (clock) => options[EXPIRY_OPTION[clock]] !== undefined,
  );
  if (given.length === 0) return undefined;
  if (given.length > 1) {
    throw new InvalidArgumentError(
      'expireAfterCreateSeconds',
      'give at most one of expireAfterIdleSeconds (counted from the last write) or expireAfterCreateSeconds (counted from creation)',
    );
  }
  const clock = given[0] as ExpiryClock;
  const name = EXPIRY_OPTION[clock];
  if (!clocks.includes(clock)) {
    throw new InvalidArgumentError(
      name,
      `is not supported by this store${limits.unsupported ? `: ${limits.unsupported}` : ''}`,
    );
  }
  const seconds = options[name];
  assertPositiveNumber(name, seconds, { max: limits.max });
  return { clock, seconds };
}
