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
