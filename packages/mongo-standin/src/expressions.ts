/**
 * The aggregation expressions the stand-in evaluates, in `$group` and in the
 * computed fields of a projection (`find` accepts them since MongoDB 4.4):
 * field paths, constants, `$isNumber`, the comparisons `$eq`, `$ne`, `$gt`,
 * `$gte`, `$lt`, `$lte`, `$cond` (array or object form) and the variable
 * `$$REMOVE`. Any other operator or variable is an error, never a guess.
 */
import { errors } from './errors.js';
import { isNumeric } from './query.js';
import { compareValues, type Doc, defineField, getPath, isDocument } from './values.js';

/** What `$$REMOVE` evaluates to: a computed field of this value is left out. */
export const REMOVE: unique symbol = Symbol('$$REMOVE');

const COMPARISONS: Readonly<Record<string, (order: number) => boolean>> = {
  $eq: (order) => order === 0,
  $ne: (order) => order !== 0,
  $gt: (order) => order > 0,
  $gte: (order) => order >= 0,
  $lt: (order) => order < 0,
  $lte: (order) => order <= 0,
};

/** Whether a projection's value is an expression (a computed field) rather than an inclusion flag. */
export function isExpression(value: unknown): boolean {
  return isDocument(value) || (typeof value === 'string' && value.startsWith('$'));
}

export function evaluate(doc: Doc, expression: unknown): unknown {
  if (typeof expression === 'string' && expression.startsWith('$')) {
    if (expression === '$$REMOVE') return REMOVE;
    if (expression.startsWith('$$'))
      throw errors.badValue(`variables are not supported by the stand-in: ${expression}`);
    return getPath(doc, expression.slice(1));
  }
  if (Array.isArray(expression)) return expression.map((element) => evaluate(doc, element));
  if (!isDocument(expression)) return expression;
  const keys = Object.keys(expression);
  const operator = keys[0];
  if (operator?.startsWith('$')) {
    if (keys.length !== 1) throw errors.badValue(`an expression object holds one operator, got ${keys.join(', ')}`);
    return operation(doc, operator, expression[operator]);
  }
  const result: Doc = {};
  for (const key of keys) {
    const value = evaluate(doc, expression[key]);
    if (value !== REMOVE) defineField(result, key, value);
  }
  return result;
}

function operation(doc: Doc, operator: string, argument: unknown): unknown {
  if (operator === '$isNumber') return isNumeric(evaluate(doc, unwrapOne(argument)));
  if (operator === '$cond') {
    const [test, then, otherwise] = condParts(argument);
    return truthy(evaluate(doc, test)) ? evaluate(doc, then) : evaluate(doc, otherwise);
  }
  const compare = COMPARISONS[operator];
  if (compare) {
    if (!Array.isArray(argument) || argument.length !== 2) {
      throw errors.badValue(`Expression ${operator} takes exactly 2 arguments`);
    }
    const [left, right] = argument.map((part) => orNull(evaluate(doc, part)));
    return compare(compareValues(left, right));
  }
  throw errors.badValue(`expression ${operator} is not supported by the stand-in`);
}

/** `$isNumber: x` or `$isNumber: [x]`. */
function unwrapOne(argument: unknown): unknown {
  return Array.isArray(argument) && argument.length === 1 ? argument[0] : argument;
}

function condParts(argument: unknown): [unknown, unknown, unknown] {
  if (Array.isArray(argument)) {
    if (argument.length !== 3) throw errors.badValue('Expression $cond takes exactly 3 arguments');
    return argument as [unknown, unknown, unknown];
  }
  if (isDocument(argument) && 'if' in argument && 'then' in argument && 'else' in argument) {
    return [argument.if, argument.then, argument.else];
  }
  throw errors.badValue("$cond needs 'if', 'then' and 'else'");
}

/** A missing value compares as null, as in MongoDB's expressions. */
function orNull(value: unknown): unknown {
  return value === undefined || value === REMOVE ? null : value;
}

/** Aggregation truth: false, null, missing, 0 and undefined are false; anything else is true. */
function truthy(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === REMOVE) return false;
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'bigint') return value !== 0n;
  if (typeof value === 'object' && typeof (value as { toNumber?: unknown }).toNumber === 'function') {
    return (value as { toNumber(): number }).toNumber() !== 0;
  }
  return true;
}
