/**
 * Names that Firestore accepts for any string. Document ids may not contain
 * `/`, be `.` or `..`, match `__.*__` or exceed 1,500 bytes; field names need
 * quoting (and break some emulators) unless they are plain identifiers. So
 * every id and state key is escaped into a small safe alphabet, and a long
 * one is replaced by its SHA-256 (the original is always kept in a field).
 *
 * Escaping works on UTF-16 code units, so every JavaScript string (lone
 * surrogates included) has exactly one escaped form and two different
 * strings never share one.
 */
import { createHash } from 'node:crypto';
import { UnreadableDataError, utf16OrderKey } from '@adk-state/core/store';

/** Escaped names longer than this are hashed (well under Firestore's 1,500 bytes, to keep paths short). */
export const MAX_PLAIN_NAME = 400;

const PLAIN = 'k';
const HASHED = 'h';

/** `_` + four hex digits per code unit outside `keep`; everything else as is. */
function escapeUnits(text: string, keep: RegExp): string {
  let out = '';
  for (let index = 0; index < text.length; index++) {
    const char = text[index] as string;
    out += keep.test(char) ? char : `_${text.charCodeAt(index).toString(16).padStart(4, '0')}`;
  }
  return out;
}

function unescapeUnits(text: string): string {
  return text.replace(/_([0-9a-f]{4})/g, (_match, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf16le').digest('hex');
}

const ID_CHARS = /^[A-Za-z0-9-]$/;
const FIELD_CHARS = /^[A-Za-z0-9]$/;

/**
 * A document id for one or more strings. Parts are escaped and joined with
 * `.`, which escaping never produces, so `(a.b, c)` and `(a, b.c)` differ.
 * Plain ids start with `k`, hashed ones with `h`: the two never meet.
 */
export function documentId(...parts: string[]): string {
  const plain = parts.map((part) => escapeUnits(part, ID_CHARS)).join('.');
  return plain.length <= MAX_PLAIN_NAME ? PLAIN + plain : HASHED + sha256(plain);
}

/**
 * A state key as a field name: a plain identifier (`k` + escaped key, letters,
 * digits and `_` only) or, for a long key, `h` + its hash. Dotted paths such
 * as `state.<name>` are then unambiguous without quoting.
 */
export function fieldName(key: string): string {
  const plain = escapeUnits(key, FIELD_CHARS);
  return plain.length <= MAX_PLAIN_NAME ? PLAIN + plain : HASHED + sha256(plain);
}

/** True when {@link fieldName} hashed the key (its original then travels with the value). */
export function isHashedField(name: string): boolean {
  return name.startsWith(HASHED);
}

/** The state key of a plain field name. */
export function keyOfField(name: string): string {
  return unescapeUnits(name.slice(PLAIN.length));
}

/**
 * The longest `idOrder` value stored, in UTF-8 bytes: below Firestore's
 * 1,500-byte limit for indexed values, so the index never truncates it. A
 * longer session id keeps a prefix of its order key (prefixes keep the
 * order, ties among them are sorted exactly when listing).
 */
export const MAX_ORDER_KEY_BYTES = 1_024;

/** `utf16OrderKey` (of `@adk-state/core/store`) cut to at most {@link MAX_ORDER_KEY_BYTES} UTF-8 bytes, on a code point boundary. */
export function idOrder(id: string): string {
  const key = utf16OrderKey(id);
  if (key.length * 3 <= MAX_ORDER_KEY_BYTES) return key;
  let bytes = 0;
  let end = 0;
  for (const char of key) {
    const size = Buffer.byteLength(char, 'utf8');
    if (bytes + size > MAX_ORDER_KEY_BYTES) break;
    bytes += size;
    end += char.length;
  }
  return key.slice(0, end);
}

/** True when `value` (an `idOrder`) may be a cut one, so that other ids may share it. */
export function mayBeCut(value: string): boolean {
  return Buffer.byteLength(value, 'utf8') > MAX_ORDER_KEY_BYTES - 4;
}

/**
 * The strings a plain {@link documentId} was made of, or `undefined` for a
 * hashed one (or a name it never makes): what the document's place says of
 * its key when the fields that name it cannot be read.
 */
export function documentIdParts(id: string): string[] | undefined {
  if (!id.startsWith(PLAIN) || !/^[A-Za-z0-9_.-]*$/.test(id)) return undefined;
  return id.slice(PLAIN.length).split('.').map(unescapeUnits);
}

/**
 * A string as a Firestore field stores it. Firestore strings are UTF-8, so
 * a JavaScript string that is not well-formed UTF-16 (a lone surrogate such
 * as `'\ud800'`) cannot be a string value: it is stored as bytes, its UTF-16
 * code units in little-endian order. Every other string is stored as is.
 * {@link readText} turns both back into the exact string.
 */
export type StoredText = string | Uint8Array;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function isWellFormed(text: string): boolean {
  const native = (text as { isWellFormed?: () => boolean }).isWellFormed;
  return typeof native === 'function' ? native.call(text) : !LONE_SURROGATE.test(text);
}

export function storeText(text: string): StoredText {
  return isWellFormed(text) ? text : Buffer.from(text, 'utf16le');
}

/** Whether `value` is text as {@link storeText} stores it: a string or its bytes. */
export function isText(value: unknown): value is StoredText {
  return typeof value === 'string' || value instanceof Uint8Array;
}

/** The string that {@link storeText} stored (a string as is, bytes as UTF-16 code units). */
export function readText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf16le');
  throw new UnreadableDataError(`expected a stored string, found ${value === null ? 'null' : typeof value}`);
}

/**
 * A number as 16 hex digits whose string order is the numeric order. Firestore
 * orders integers and doubles together, but not every emulator does; a
 * string key sorts the same everywhere. (IEEE 754 bits, sign bit flipped for
 * positives and every bit flipped for negatives; -0 is written as 0.)
 */
export function numberKey(value: number): string {
  const bytes = Buffer.alloc(8);
  bytes.writeDoubleBE(value === 0 ? 0 : value);
  const first = bytes[0] as number;
  if (first & 0x80) for (let index = 0; index < 8; index++) bytes[index] = ~(bytes[index] as number) & 0xff;
  else bytes[0] = first | 0x80;
  return bytes.toString('hex');
}
