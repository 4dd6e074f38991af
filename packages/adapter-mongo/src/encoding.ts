/**
 * How keys travel into MongoDB exactly. Ids are stored as they are, except
 * the rare string that is not well-formed UTF-16 (a lone surrogate), which
 * BSON cannot carry and is stored as its code units instead, so no two ids
 * ever meet. State keys become field names with `%`, `.`, `$`, NUL and lone
 * surrogates escaped. Listings break ties with a sort key whose UTF-8 byte
 * order (MongoDB's) equals JavaScript's UTF-16 order (core's).
 */

/** An id as stored: the string itself, or its UTF-16 code units when it has a lone surrogate. */
export type KeyPart = string | { utf16: number[] };

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function encodeKeyPart(value: string): KeyPart {
  if (!LONE_SURROGATE.test(value)) return value;
  const units: number[] = [];
  for (let i = 0; i < value.length; i++) units.push(value.charCodeAt(i));
  return { utf16: units };
}

export function decodeKeyPart(part: KeyPart): string {
  if (typeof part === 'string') return part;
  let text = '';
  for (const unit of part.utf16) text += String.fromCharCode(unit);
  return text;
}

function escapeUnit(unit: number): string {
  return `%${unit.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * The field name of a state key: `%`, `.`, `$`, NUL and lone surrogates as
 * `%XXXX` (UTF-16 code unit in hex); the empty key as a lone `%`, which no
 * escaped key can be.
 */
export function encodeFieldName(key: string): string {
  if (key === '') return '%';
  let name = '';
  for (let i = 0; i < key.length; i++) {
    const unit = key.charCodeAt(i);
    if (unit === 0x25 || unit === 0x2e || unit === 0x24 || unit === 0) {
      name += escapeUnit(unit);
    } else if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = key.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        name += key.slice(i, i + 2);
        i++;
      } else {
        name += escapeUnit(unit);
      }
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      name += escapeUnit(unit);
    } else {
      name += key[i];
    }
  }
  return name;
}

export function decodeFieldName(name: string): string {
  if (name === '%') return '';
  return name.replace(/%([0-9A-F]{4})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}
