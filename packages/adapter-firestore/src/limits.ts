/**
 * Firestore's document size limit, checked before anything is written, so an
 * oversized event or state is refused with a clear error instead of a failed
 * (or, on some emulators, silently accepted) commit. Sizes follow Firestore's
 * documented storage-size rules.
 */
import { InvalidArgumentError } from '@adk-state/core';

/** The largest document Firestore stores: 1 MiB. */
export const MAX_DOCUMENT_BYTES = 1_048_576;

/** An event or a state bucket would not fit in one Firestore document. Nothing was written. */
export class DocumentTooLargeError extends InvalidArgumentError {
  readonly bytes: number;
  readonly limit: number;

  constructor(what: string, bytes: number) {
    super(
      what,
      `would be stored as a Firestore document of ${bytes} bytes, at or over the ${MAX_DOCUMENT_BYTES}-byte (1 MiB) limit; nothing was written. Keep large payloads (files, long transcripts) in artifacts or object storage and put a reference in state`,
    );
    this.bytes = bytes;
    this.limit = MAX_DOCUMENT_BYTES;
  }
}

function utf8(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** Storage size of a value as this adapter writes them (strings, bytes, numbers, booleans, null, dates, maps). */
export function valueSize(value: unknown): number {
  if (typeof value === 'string') return utf8(value) + 1;
  if (value instanceof Uint8Array) return value.byteLength + 1;
  if (typeof value === 'number' || value instanceof Date || isTimestamp(value)) return 8;
  if (typeof value === 'boolean' || value === null || value === undefined) return 1;
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + valueSize(item), 0);
  return fieldsSize(value as Record<string, unknown>);
}

function isTimestamp(value: unknown): boolean {
  return (
    typeof value === 'object' && value !== null && typeof (value as { toMillis?: unknown }).toMillis === 'function'
  );
}

/** Storage size of a map's fields: each name (UTF-8 bytes + 1) plus its value. */
export function fieldsSize(fields: Record<string, unknown>): number {
  let size = 0;
  for (const name of Object.keys(fields)) size += utf8(name) + 1 + valueSize(fields[name]);
  return size;
}

/** Storage size of a document name such as `root/kapp/adk_sessions/ku.ks`. */
export function nameSize(path: string): number {
  return path.split('/').reduce((sum, segment) => sum + utf8(segment) + 1, 0) + 16;
}

/** Throws {@link DocumentTooLargeError} when a document with this path and fields would reach 1 MiB. */
export function assertDocumentFits(what: string, path: string, fields: Record<string, unknown>): void {
  const bytes = nameSize(path) + fieldsSize(fields) + 32;
  // Firestore refuses a document of exactly 1 MiB too.
  if (bytes >= MAX_DOCUMENT_BYTES) throw new DocumentTooLargeError(what, bytes);
}
