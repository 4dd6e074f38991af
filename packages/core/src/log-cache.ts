/**
 * The logs of recently read sessions, kept by one service so that reading a
 * session again asks the store only for what follows (see
 * `SessionStore.loadSessionSince`). It keeps each event decoded once, as a
 * master that is never handed out: every read gets its own deep copies
 * (`copyEvent`), so nothing a caller gets is shared with another caller or
 * with the cache, and a long log costs a copy per event instead of a parse.
 */
import type { Event } from '@google/adk';
import type { StoredEvent } from './events.js';

/** One session's cached log. */
export interface CachedLog {
  revision: number;
  logMark: string;
  /**
   * The decoded events, in append order; read-only masters, copied for each
   * read. Later entries of the same log may share this array, grown at its
   * end in place: a read takes only the length it was given.
   */
  events: Event[];
  /**
   * The first position of each event id in `events`, handed to each read's
   * copy as its index (see `adoptIndex`). Later entries of the same log
   * extend this map; a copy trusts only the positions below its length.
   */
  positions: Map<string, number>;
  /** The stored form of the last event of `events` (absent for an empty log, and for a large event). */
  last?: StoredEvent;
  /** What the entry costs, by {@link logBytes}. */
  bytes: number;
}

/** A fixed cost per cached event beside its values (the event and actions objects, the array slot, its entry in `positions`). */
const EVENT_OVERHEAD_BYTES = 200;
/**
 * What a decoded event takes per UTF-16 unit of its JSON text: about 3.4
 * bytes measured on a typical tool-call event (its objects, arrays and
 * strings), rounded up.
 */
const DECODED_BYTES_PER_UNIT = 4;
/** A fixed cost per entry (the key, the record, the map slot). */
const ENTRY_OVERHEAD_BYTES = 256;

/** About what `events`, decoded, take in memory: a share of their JSON text's length, and a fixed part each. */
export function logBytes(events: readonly StoredEvent[]): number {
  let bytes = ENTRY_OVERHEAD_BYTES;
  for (const event of events) bytes += EVENT_OVERHEAD_BYTES + DECODED_BYTES_PER_UNIT * event.json.length;
  return bytes;
}

/** A byte-bounded cache, least recently used first out. */
export class LogCache {
  readonly maxBytes: number;
  #bytes = 0;
  readonly #entries = new Map<string, CachedLog>();

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** The bytes held now (never above `maxBytes`). */
  get bytes(): number {
    return this.#bytes;
  }

  get(key: string): CachedLog | undefined {
    const entry = this.#entries.get(key);
    if (entry) {
      // Most recently used last.
      this.#entries.delete(key);
      this.#entries.set(key, entry);
    }
    return entry;
  }

  /** Keeps `entry` under `key` (replacing what was there); an entry larger than the whole cache is not kept. */
  set(key: string, entry: CachedLog): void {
    this.delete(key);
    if (entry.bytes > this.maxBytes) return;
    this.#entries.set(key, entry);
    this.#bytes += entry.bytes;
    for (const [oldest, old] of this.#entries) {
      if (this.#bytes <= this.maxBytes) break;
      this.#entries.delete(oldest);
      this.#bytes -= old.bytes;
    }
  }

  delete(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }
}
